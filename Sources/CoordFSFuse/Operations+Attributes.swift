import CFuse
import Glibc
import CoordFSCore
import SystemPackage

// Lookups, forgets and attributes: the operations that name no data.

/// A copy of the attributes a setattr asks for, for use after the callback returned.
struct StatCopy: @unchecked Sendable {
    let value: stat
}

extension FileSystem {
    func lookup(_ request: fuse_req_t, _ parentID: fuse_ino_t, _ name: UnsafePointer<CChar>) {
        do throws(Errno) {
            let parent = try node(parentID)
            if StagingName.isReserved(name: name, inRoot: parent.id == NodeTable.rootID) { throw .noSuchFileOrDirectory }
            if activity.hasPendingNames, let save = activity.pendingSave(PendingName(directory: parent.id, name: FileName(cString: name))) {
                return try replyPendingLookup(request, parent, name, save)
            }
            var entry = try lookUp(parent, name)
            showSavedAttributes(in: &entry, to: request)
            fuse_reply_entry(request, &entry)
        } catch .noSuchFileOrDirectory {
            var entry = negativeEntry()
            fuse_reply_entry(request, &entry)
        } catch {
            reply(request, error: error)
        }
    }

    /// A name with a pending save that has not committed yet: its owner sees the pending file,
    /// everyone else what the backing has. Nothing is cached, so the kernel asks again for
    /// every caller until the commit.
    private func replyPendingLookup(_ request: fuse_req_t, _ parent: Node, _ name: UnsafePointer<CChar>, _ save: Save) throws(Errno) {
        if seesPendingVersion(of: save, owner(of: request)), let node = nodes.lookUpExisting(save.node.identity, parent: parent, name: FileName(cString: name)) {
            var entry = entry(node, try save.currentStatus())
            entry.entry_timeout = 0
            entry.attr_timeout = 0
            fuse_reply_entry(request, &entry)
            return
        }
        do throws(Errno) {
            var entry = try lookUp(parent, name)
            entry.entry_timeout = 0
            entry.attr_timeout = 0
            fuse_reply_entry(request, &entry)
        } catch .noSuchFileOrDirectory {
            reply(request, error: .noSuchFileOrDirectory) // an error reply leaves no negative entry behind
        }
    }

    /// The error for a process that does not see `save`'s file, never committed yet, and
    /// reached its node through a kernel entry. Usually the name holds nothing for it
    /// (ENOENT). But when the owner renamed its new file over a committed one, the kernel
    /// moved its entry for the new file onto that name, while everyone else must find the
    /// committed file there until the close: the entry goes, and ESTALE makes the kernel look
    /// the name up again, which answers each caller with the file it sees (`replyPendingLookup`).
    func notCommittedYet(_ save: Save) -> Errno {
        let (directory, name, _) = save.target
        guard (try? Syscall.stat(at: directory.directory, name)) != nil else { return .noSuchFileOrDirectory }
        notifier.invalidateEntry(directory: directory.id, name: name)
        return .staleNFSFileHandle
    }

    func forget(_ id: fuse_ino_t, _ count: UInt64) {
        if nodes.forget(UInt64(id), count: count) {
            notifier.forgetPages(of: UInt64(id))
            selfCoordinating.forget(UInt64(id))
        }
    }

    func getattr(_ request: fuse_req_t, _ id: fuse_ino_t, _ file: UnsafeMutablePointer<fuse_file_info>?) {
        do throws(Errno) {
            let node = try node(id)
            if node.isRegularFile, let mapped = mappedSaveAttributes(of: node) {
                // Whoever asks, and for whichever handle (see `pageCacheSource`).
                var status = withShownInode(node, mapped)
                fuse_reply_attr(request, &status, 0)
                return
            }
            if let file, let handle = OpenFile.borrow(file), node.isRegularFile {
                // The kernel asks on behalf of an open file (before it reads through the page
                // cache): the size of the version that handle reads.
                var status = try handle.readableStatus()
                status = withShownInode(node, committedView(node, status, viewer: handle.save))
                fuse_reply_attr(request, &status, activity.needsFreshAttributes(node) ? 0 : options.attributeTimeout)
                return
            }
            if activity.hasSaves, let save = activity.save(of: node) {
                // While a save is pending its owner and everyone else see different attributes,
                // so the kernel must not cache either.
                var status = withShownInode(node, try savedAttributes(save, for: request))
                fuse_reply_attr(request, &status, 0)
                return
            }
            var status = withShownInode(node, try attributes(of: node))
            fuse_reply_attr(request, &status, activity.needsFreshAttributes(node) ? 0 : options.attributeTimeout)
        } catch {
            reply(request, error: error)
        }
    }

    /// An entry of a file with a pending save shows its owner the owner's version, as `getattr`
    /// does, uncached: else a lookup or a listing by the
    /// owner would set the kernel's one size of the file back to the committed one under the
    /// owner's open descriptors.
    func showSavedAttributes(in entry: inout fuse_entry_param, to request: fuse_req_t) {
        guard activity.hasSaves, entry.ino != 0, let node = try? node(entry.ino), node.isRegularFile,
              mappedSaveAttributes(of: node) == nil, let save = activity.save(of: node),
              let status = try? ownersAttributes(save, owner(of: request)) else { return }
        entry.attr = withShownInode(node, status)
        entry.attr_timeout = 0
    }

    /// Attributes of a file with a pending save: the owner's version for its owner, the
    /// committed one for everyone else (who do not see a file that was never committed).
    private func savedAttributes(_ save: Save, for request: fuse_req_t) throws(Errno) -> stat {
        let requester = owner(of: request)
        if let status = try ownersAttributes(save, requester) { return status }
        if !save.target.exists { throw notCommittedYet(save) }
        return try attributes(of: save.node)
    }

    /// The attributes of `save`'s file as `requester` sees it when that is the save's own
    /// version; nil for everyone who sees the committed file.
    private func ownersAttributes(_ save: Save, _ requester: ClaimOwner) throws(Errno) -> stat? {
        guard seesPendingVersion(of: save, requester), !save.hasFailed else { return nil }
        var status = try save.currentStatus()
        if save.target.exists, activity.hasCachedReaders(save.node, besides: requester) {
            try keepCommittedSize(of: save.node, in: &status)
        }
        return status
    }

    /// The kernel keeps one size per inode, which the reply about a save sets for everyone: while
    /// readers of the committed version read through the page cache, it must not fall below
    /// the committed size, or their mappings would die of SIGBUS beyond it. (Their reads ask
    /// for their own handle's size first; the owner's reads and writes bypass the cache.) A
    /// larger size is the owner's, which a mapping of its own needs.
    private func keepCommittedSize(of node: Node, in status: inout stat) throws(Errno) {
        let committed = try attributes(of: node)
        if committed.st_size > status.st_size {
            status.st_size = committed.st_size
            status.st_blocks = committed.st_blocks
        }
    }

    func setattr(_ request: fuse_req_t, _ id: fuse_ino_t, _ wanted: UnsafeMutablePointer<stat>, _ fields: Int32, _ file: UnsafeMutablePointer<fuse_file_info>?) {
        let node: Node
        do throws(Errno) { node = try self.node(id) } catch { return reply(request, error: error) }
        let handle = file.flatMap { OpenFile.borrow($0) }
        let wanted = StatCopy(value: wanted.pointee)
        let item = NamedPath(node, in: nodes)
        let path = item.resolved
        let pending = PendingRequest(raw: request)
        // A truncation changes the data: the set-id rule applies once the whole setattr is done
        // (the kernel's own part of it, a mode without set-user-id, comes in the same request).
        let writer = fields & FUSE_SET_ATTR_SIZE != 0 ? dataWriter(request, of: node) : nil
        // A writer changing its own file: the truncate of an O_TRUNC open, ftruncate.
        let facts = AskFacts(callerWritesItem: { [self] in
            handle?.isWriter == true || activity.save(of: node)?.owner == owner(of: request)
        })
        coordinated(request, .changeAttributes, .item(item), facts: facts) { [self] origin in
            do throws(Errno) {
                var save = handle?.save
                if save == nil, let pendingSave = activity.save(of: node), pendingSave.owner == .process(origin.pid) { save = pendingSave }
                var status: stat
                if let save {
                    try changeAttributes(through: save, wanted.value, fields)
                    if writer != nil {
                        let current = save.current
                        try withExtendedLifetime(current) { () throws(Errno) in try applySetIDRule(current.raw, for: writer) }
                    }
                    status = try save.currentStatus()
                    if save.target.exists, activity.hasCachedReaders(node, besides: save.owner) {
                        try keepCommittedSize(of: node, in: &status)
                    }
                } else {
                    try changeAttributes(of: node, handle: handle, wanted.value, fields)
                    if writer != nil {
                        let file = try reopen(node, flags: O_RDONLY)
                        try applySetIDRule(file.raw, for: writer)
                    }
                    mount.noteChangedThroughMount(node)
                    if let handle { status = try Syscall.stat(handle.readable.raw) } else { status = try attributes(of: node) }
                }
                let onlySize = fields & ~(FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_CTIME) == 0
                if save == nil {
                    mount.publish(onlySize ? .changed : .attributes, origin: origin, path: path, isDirectory: node.isDirectory,
                            size: node.isRegularFile ? Int64(status.st_size) : nil)
                }
                status = attributesForKernel(node, status)
                fuse_reply_attr(pending.raw, &status, save == nil ? options.attributeTimeout : 0)
            } catch {
                reply(pending.raw, error: error)
            }
        }
    }

    /// Applies a setattr to a file with a pending save, as its owner: the size through the save
    /// (staging it), the rest on whatever the owner reads now (they commit with it).
    private func changeAttributes(through save: Save, _ wanted: stat, _ fields: Int32) throws(Errno) {
        if fields & FUSE_SET_ATTR_SIZE != 0 {
            try save.truncate(to: wanted.st_size)
        }
        let current = save.current
        try withExtendedLifetime(current) { () throws(Errno) in
            try changeMetadata(current.raw, wanted, fields)
        }
    }

    /// Mode, owner and times on an open descriptor.
    private func changeMetadata(_ descriptor: Int32, _ wanted: stat, _ fields: Int32) throws(Errno) {
        if fields & FUSE_SET_ATTR_MODE != 0 { try Syscall.changeMode(descriptor, wanted.st_mode) }
        if fields & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID) != 0 {
            try Syscall.changeOwner(descriptor, fields & FUSE_SET_ATTR_UID != 0 ? wanted.st_uid : uid_t.max,
                                    fields & FUSE_SET_ATTR_GID != 0 ? wanted.st_gid : gid_t.max)
        }
        if fields & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME) != 0 {
            try Syscall.setTimes(descriptor, requestedTimes(wanted, fields))
        }
    }

    private func requestedTimes(_ wanted: stat, _ fields: Int32) -> (timespec, timespec) {
        let omit = timespec(tv_sec: 0, tv_nsec: Linux.UTIME_OMIT)
        let now = timespec(tv_sec: 0, tv_nsec: Linux.UTIME_NOW)
        var accessTime = omit
        var modificationTime = omit
        if fields & FUSE_SET_ATTR_ATIME_NOW != 0 { accessTime = now }
        else if fields & FUSE_SET_ATTR_ATIME != 0 { accessTime = wanted.st_atim }
        if fields & FUSE_SET_ATTR_MTIME_NOW != 0 { modificationTime = now }
        else if fields & FUSE_SET_ATTR_MTIME != 0 { modificationTime = wanted.st_mtim }
        return (accessTime, modificationTime)
    }

    /// Applies a setattr to the committed object (no save in progress for the caller).
    private func changeAttributes(of node: Node, handle: OpenFile?, _ wanted: stat, _ fields: Int32) throws(Errno) {
        if fields & FUSE_SET_ATTR_MODE != 0 {
            if let handle {
                try Syscall.changeMode(handle.readable.raw, wanted.st_mode)
            } else {
                let directory = Syscall.processDescriptors
                try withProcessName(of: node) { (name) throws(Errno) in
                    try Syscall.changeMode(at: directory, name, wanted.st_mode)
                }
            }
        }
        if fields & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID) != 0 {
            let uid = fields & FUSE_SET_ATTR_UID != 0 ? wanted.st_uid : uid_t.max
            let gid = fields & FUSE_SET_ATTR_GID != 0 ? wanted.st_gid : gid_t.max
            try node.withDescriptor { (descriptor) throws(Errno) in
                try Syscall.changeOwner(at: descriptor, "", uid, gid, flags: Linux.AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW)
            }
        }
        if fields & FUSE_SET_ATTR_SIZE != 0 {
            if let handle, handle.isWriter {
                try Syscall.truncate(handle.readable.raw, wanted.st_size)
            } else {
                let writable = try reopen(node, flags: O_WRONLY)
                try Syscall.truncate(writable.raw, wanted.st_size)
            }
        }
        if fields & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME) != 0 {
            let times = requestedTimes(wanted, fields)
            if let handle {
                try Syscall.setTimes(handle.readable.raw, times)
            } else {
                try node.withDescriptor { (descriptor) throws(Errno) in
                    try Syscall.setTimes(at: descriptor, "", times, flags: Linux.AT_EMPTY_PATH)
                }
            }
        }
    }

    func readlink(_ request: fuse_req_t, _ id: fuse_ino_t) {
        do throws(Errno) {
            let target = try Syscall.readLink(at: try node(id).backing.descriptor.raw, "") // symlinks are never replaced
            target.withUnsafeBufferPointer { _ = fuse_reply_readlink(request, $0.baseAddress) }
        } catch {
            reply(request, error: error)
        }
    }

    func access(_ request: fuse_req_t, _ id: fuse_ino_t, _ mask: Int32) {
        do throws(Errno) {
            try node(id).withDescriptor { (descriptor) throws(Errno) in
                try Syscall.access(at: descriptor, "", mask, flags: Linux.AT_EMPTY_PATH | AT_EACCESS)
            }
            replyOK(request)
        } catch {
            reply(request, error: error)
        }
    }

    func statfs(_ request: fuse_req_t, _ id: fuse_ino_t) {
        do throws(Errno) {
            var result = try node(id).withDescriptor { (descriptor) throws(Errno) in try Syscall.statfs(descriptor) }
            fuse_reply_statfs(request, &result)
        } catch {
            reply(request, error: error)
        }
    }
}
