import CFuse
import Glibc
import CoordFSCore
import SystemPackage

// Open and create: whether the file is written in place or through a save, the claims and
// presenter asks of each, and the handle the kernel gets.
extension FileSystem {
    /// Flags for the backing open: the kernel already handled creation; O_DIRECT stays on the
    /// FUSE side (libfuse's buffers are not aligned for it); the writeback cache needs to read
    /// pages of write-only files and computes append offsets itself.
    func backingFlags(_ flags: Int32) -> Int32 {
        var flags = flags & ~(O_NOFOLLOW | Linux.O_DIRECT | O_CREAT | O_EXCL)
        if options.writebackCache {
            if flags & O_ACCMODE == O_WRONLY { flags = (flags & ~O_ACCMODE) | O_RDWR }
            flags &= ~O_APPEND
        }
        return flags
    }

    /// Whether an open changes the file: it writes, or it truncates.
    private func opensForChange(_ flags: Int32) -> Bool {
        flags & O_ACCMODE != O_RDONLY || flags & O_TRUNC != 0
    }

    // MARK: open

    func open(_ request: fuse_req_t, _ id: fuse_ino_t, _ file: UnsafeMutablePointer<fuse_file_info>) {
        let node: Node
        do throws(Errno) { node = try self.node(id) } catch { return reply(request, error: error) }
        let flags = file.pointee.flags
        let copy = FileInfoCopy(info: file.pointee)
        let pending = PendingRequest(raw: request)
        var item = node.isRegularFile ? NamedPath(node, in: nodes, keepsStartingPath: authority.hosts != nil) : nil
        // A kernel entry that outlived the name (a change behind the mount or another host's
        // commit replaced the file, and the kernel has not dropped the entry yet) still
        // names the file: the open claims the name and then follows it
        // (`checkNotReplacedElsewhere`), never writes the replaced file unclaimed. When a
        // lookup has found the new file already (another node is known by the name), an open
        // for writing fails with ESTALE, on which the kernel looks the name up again and
        // opens that node: its writes would be lost in the replaced file (a read of it is
        // left to read the old version, as on a plain disk). (A file deleted behind the mount
        // has no name to follow: it is opened as before.)
        if item != nil, item?.resolved == nil, let former = nodes.formerName(of: node) {
            switch former {
            case .free(let path):
                if let now = mount.backingStatus(of: path), now.st_mode & S_IFMT == S_IFREG { item = NamedPath(node, formerPath: path) }
            case .taken(let directory, let name) where opensForChange(flags):
                notifier.invalidateEntry(directory: directory.id, name: name)
                return reply(request, error: .staleNFSFileHandle)
            case .taken:
                break
            }
        }
        guard let item, let path = item.resolved else {
            // Special files, and files reachable only through an open descriptor: no one else can
            // name them, so there is nothing to coordinate.
            return openInPlace(pending, origin(of: request), node, copy, claims: nil, consent: .nobodyAsked)
        }
        let nonblocking = flags & O_NONBLOCK != 0
        let caller = origin(of: request)
        if opensForChange(flags) {
            let byPolicy = coordinatesItself(node)
                || mount.writesInPlace(path, flags: flags, existing: node)
            // Another owner's save of a locked file goes in place rather than keep this open from its lock call.
            let (inPlace, lockWatch) = meetLocks(node, requester: .process(caller.pid), inPlace: byPolicy)
            coordinatedOpen(request, .openForWriting, item, inPlace: inPlace, nonblocking: nonblocking, caller: caller) { [self] held, consent in
                lockWatch?.stop()
                // In-place files took their claim for the open only (no claims held), as for each operation.
                if inPlace {
                    openInPlace(pending, caller, node, copy, claims: nil, consent: consent, startedAt: path)
                } else if coordinatesItself(node) {
                    // It turned out to coordinate itself while this open waited.
                    if let held { authority.release(held) }
                    openInPlace(pending, caller, node, copy, claims: nil, consent: consent, startedAt: path)
                } else {
                    openForSave(pending, caller, node, copy, claims: held, consent: consent, startedAt: path)
                }
            }
        } else {
            // No claims are held unless reads are strict: a snapshot read claims for the open only.
            coordinatedOpen(request, .openForReading, item, nonblocking: nonblocking, caller: caller) { [self] held, _ in
                openForReading(pending, caller, node, copy, claims: held, startedAt: path)
            }
        }
    }

    /// Opens the backing object itself: reads and writes go straight to it.
    private func openInPlace(_ request: PendingRequest, _ origin: ChangeOrigin, _ node: Node, _ copy: FileInfoCopy, claims held: HeldClaims?, consent: PresenterConsent,
                             startedAt path: MountPath? = nil) {
        let flags = copy.info.flags
        replyOpen(request, copy, claims: held, consent: consent) { () throws(Errno) -> OpenFile in
            try checkNotReplacedElsewhere(node, startedAt: path)
            let descriptor = try reopen(node, flags: backingFlags(flags))
            if flags & O_TRUNC != 0 { try applySetIDRule(descriptor.raw, for: dataWriter(request.raw, of: node)) }
            return OpenFile(node: node, own: SharedDescriptor(descriptor), save: nil, isWriter: opensForChange(flags),
                            appends: false, usesPageCache: true, claims: held, origin: origin, consent: consent)
        }
    }

    /// Opens for reading: the owner of a pending save reads it; everyone else reads the
    /// version committed now, through the page cache unless an older version may be in it.
    private func openForReading(_ request: PendingRequest, _ origin: ChangeOrigin, _ node: Node, _ copy: FileInfoCopy, claims held: HeldClaims?,
                                startedAt path: MountPath?) {
        let flags = copy.info.flags
        let reader = ClaimOwner.process(origin.pid)
        replyOpen(request, copy, claims: held, consent: .nobodyAsked) { () throws(Errno) -> OpenFile in
            if let save = activity.save(of: node) {
                // The owner reads its own version; so does a child holding a descriptor of a
                // file that exists only as that version yet (a new file).
                if save.owner == reader || (!save.target.exists && seesPendingVersion(of: save, reader)), !save.hasFailed {
                    return OpenFile(node: node, own: nil, save: save, isWriter: false, appends: false, usesPageCache: false,
                                    claims: held, origin: origin)
                }
                if !save.target.exists { throw notCommittedYet(save) } // created, not committed yet
            } else {
                try checkNotReplacedElsewhere(node, startedAt: path)
            }
            // The version opened and the identity registered are one backing's: the node may
            // follow a newer file at any moment (see `ActivityRegistry.openReader`).
            let backing = node.backing
            let descriptor = SharedDescriptor(try withExtendedLifetime(backing) { () throws(Errno) -> OwnedDescriptor in
                try Syscall.reopen(backing.descriptor.raw, backingFlags(flags))
            })
            let cached = activity.openReader(of: node, owner: reader, version: descriptor, identity: backing.identity)
            return OpenFile(node: node, own: descriptor, save: nil, isWriter: false, appends: false,
                            usesPageCache: cached, claims: held, origin: origin, cachedReader: cached ? reader : nil)
        }
    }

    /// Opens for writing through the owner's save of the file, starting one if needed.
    private func openForSave(_ request: PendingRequest, _ origin: ChangeOrigin, _ node: Node, _ copy: FileInfoCopy, claims held: HeldClaims?,
                             consent: PresenterConsent, startedAt path: MountPath?) {
        let flags = copy.info.flags
        replyOpen(request, copy, claims: held, consent: consent) { () throws(Errno) -> OpenFile in
            let save = try saveForWriting(node, owner: .process(origin.pid), startedAt: path)
            if flags & O_TRUNC != 0 {
                let writer = dataWriter(request.raw, of: node)
                do throws(Errno) {
                    try save.truncate(to: 0) { (descriptor) throws(Errno) in
                        try applySetIDRule(descriptor, for: writer)
                    }
                } catch {
                    endWriter(of: save, origin: origin, under: held)
                    throw error
                }
            }
            return OpenFile(node: node, own: nil, save: save, isWriter: true, appends: flags & O_APPEND != 0,
                            usesPageCache: false, claims: held, origin: origin, consent: consent)
        }
    }

    /// With other hosts, one of them may have committed the node's file meanwhile (its
    /// commit is a rename in the shared backing) while this kernel still holds the node it
    /// looked up before, and their report of it may still be on its way. Once an open holds
    /// its claims nobody changes the name any more, so the open checks it: a regular file put
    /// in its place becomes the node's backing, as this host's own commit would make it (the
    /// kernel's inode carries on, its pages and attributes are dropped, and readers go around
    /// the page cache until then). Anything else (the name gone, or another node standing for
    /// the new file) lets go of the name and fails the open with ESTALE, on which the kernel
    /// looks the name up again (LOOKUP_REVAL). One fstatat, with --cluster only (on a mount of
    /// one host, only for a node whose name went away behind the mount, reached through a
    /// kernel entry that outlived it); a node with a save of this host's in progress is this
    /// host's to change.
    /// `path`: where the open found the node; a node that lost its name while the open waited
    /// (the report of the commit came first) is checked there, and gets the name back.
    private func checkNotReplacedElsewhere(_ node: Node, startedAt path: MountPath?) throws(Errno) {
        // Special files, and files reachable only through a descriptor, were not coordinated.
        // On a mount of one host, only a node whose name went away behind the mount is checked.
        guard node.isRegularFile, let path else { return }
        let location = nodes.location(of: node)
        guard authority.hosts != nil || (location == nil && nodes.lostNameBehind(node)) else { return }
        let startedIn = path.parent.flatMap(nodes.node(at:)).flatMap { directory in path.name.map { (directory, $0) } }
        guard let (directory, name) = location ?? startedIn else { throw .staleNFSFileHandle }
        let found = try? Syscall.stat(at: directory.directory, name)
        if found.map(FileIdentity.init) == node.identity {
            // The name was taken from the node and given back since (a report came late).
            if location == nil, nodes.node(named: name, in: directory) == nil { nodes.moved(node, to: directory, name: name) }
            return
        }
        if found != nil, mount.followReplacement(of: node, in: directory, named: name) { return }
        if nodes.node(named: name, in: directory) === node { nodes.removedNameBehind(name, in: directory) }
        notifier.invalidateEntry(directory: directory.id, name: name)
        throw .staleNFSFileHandle
    }

    /// The node's save with one more writer: the owner's own if it has one, else a new one,
    /// from the file the name holds (`checkNotReplacedElsewhere`, only here: a save in
    /// progress is this host's, and the last release may end it between a look and the join).
    private func saveForWriting(_ node: Node, owner: ClaimOwner, startedAt path: MountPath?) throws(Errno) -> Save {
        if let existing = activity.joinSave(of: node, by: owner) { return existing }
        try checkNotReplacedElsewhere(node, startedAt: path)
        guard let (directory, name) = nodes.location(of: node) else { throw .noSuchFileOrDirectory }
        // With other hosts, no append goes to the shared file ahead of its commit: they would
        // read it before the commit, and a commit refused by fencing could not take it back.
        let candidate = Save(node: node, owner: owner, committed: try reopen(node, flags: O_RDONLY), directory: directory, name: name,
                             staging: staging, journal: authority.hosts == nil ? appendJournal : nil)
        return activity.installSave(candidate)
    }

    /// Builds the handle with `make` and sends the open reply; when that fails, the claim
    /// taken for the open goes, the presenters that stepped aside are told so, and the error
    /// is the reply.
    private func replyOpen(_ request: PendingRequest, _ copy: FileInfoCopy, claims held: HeldClaims?, consent: PresenterConsent,
                           _ make: () throws(Errno) -> OpenFile) {
        var info = copy.info
        do throws(Errno) {
            let handle = try make()
            noteWriter(handle)
            configureCaching(&info, handle)
            handle.attach(to: &info)
            if fuse_reply_open(request.raw, &info) != 0, let handle = OpenFile.take(&info) { releaseHandle(handle) }
        } catch {
            if let held { authority.release(held) }
            reacquire(consent)
            reply(request.raw, error: error)
        }
    }

    func configureCaching(_ info: UnsafeMutablePointer<fuse_file_info>, _ handle: OpenFile) {
        if handle.usesPageCache {
            if options.keepPageCache { cfuse_fi_set_keep_cache(info, 1) }
            // A writer through the page cache may fill pages without a READ (see `KernelNotifier`).
            if handle.isWriter { notifier.notePages(of: handle.node.id) }
        } else {
            cfuse_fi_set_direct_io(info, 1)
        }
        // Only a save commits at close; other handles need no FLUSH round trip.
        if handle.save == nil || !handle.isWriter { cfuse_fi_set_noflush(info, 1) }
    }

    /// Who changes a file's data, for the set-id rule (`SetIDRule`): nil when the daemon is not
    /// root, since the backing then applies the rule to the daemon's own writes, and when the
    /// file showed no set-id bit (`Node.mayCarrySetIDBits`).
    func dataWriter(_ request: fuse_req_t, of node: Node) -> DataWriter? {
        guard canChangeOwners, node.mayCarrySetIDBits else { return nil }
        let context = fuse_req_ctx(request)!.pointee
        return DataWriter(thread: context.pid, group: context.gid, node: node.id)
    }

    /// Applies the set-id rule after `writer` changed the data of the file behind `descriptor`
    /// (a write, truncation, allocation or copy; the whole file for a save's temp, which
    /// carries its mode to the commit). A write through the page cache has the kernel ask for
    /// part of it; writes that go around it (a save's handles, O_DIRECT), truncations the
    /// daemon makes itself and allocations do not, and the daemon writes as root.
    func applySetIDRule(_ descriptor: Int32, for writer: DataWriter?) throws(Errno) {
        guard let writer else { return }
        let status = try Syscall.stat(descriptor)
        guard SetIDRule.mayDrop(status.st_mode),
              !ProcessFacts.hasEffectiveCapability(writer.thread, SetIDRule.fsetidCapability) else { return }
        let kept = SetIDRule.bitsAfterDataChange(status.st_mode) {
            writer.group == status.st_gid || (ProcessFacts.supplementaryGroups(of: writer.thread) ?? []).contains(status.st_gid)
        }
        guard kept != status.st_mode & 0o7777 else { return }
        try Syscall.changeMode(descriptor, kept)
        // The kernel asked for none of it (or not all of it): its copy of the mode is stale.
        notifier.invalidateAttributes(of: writer.node)
    }

    // MARK: create

    func create(_ request: fuse_req_t, _ parentID: fuse_ino_t, _ name: UnsafePointer<CChar>, _ mode: mode_t, _ file: UnsafeMutablePointer<fuse_file_info>) {
        let entry: DirectoryEntry
        do throws(Errno) { entry = try newEntry(parentID, name) } catch { return reply(request, error: error) }
        let (parent, fileName) = (entry.directory, entry.name)
        let copy = FileInfoCopy(info: file.pointee)
        let pending = PendingRequest(raw: request)
        let item = NamedPath(entry, in: nodes)
        guard let path = item.resolved else { return reply(request, error: .noSuchFileOrDirectory) }
        // A new file has nothing to copy: whether copies clone does not matter.
        let inPlace = mount.writesInPlace(path, flags: copy.info.flags, existing: nil)
        // Another process's new file, not committed yet and locked (a lock file): it goes in
        // place, which gives it its name, and the kernel looks the name up again (ESTALE) to open it.
        var lockWatch: LockWatch?
        let caller = origin(of: request)
        if activity.hasPendingNames, let other = activity.pendingSave(PendingName(directory: parent.id, name: fileName)) {
            let requester = ClaimOwner.process(caller.pid)
            if yieldsToLocks(other, requester: requester) { return reply(request, error: .staleNFSFileHandle) }
            lockWatch = watchLocks(of: other.node, requester: requester)
        }
        coordinatedOpen(request, .openForWriting, item, inPlace: inPlace, nonblocking: copy.info.flags & O_NONBLOCK != 0,
                        caller: caller) { [self, lockWatch] held, consent in
            lockWatch?.stop()
            if inPlace {
                createInPlace(pending, caller, parent, fileName, mode, copy, consent: consent)
            } else {
                createStaged(pending, caller, parent, fileName, mode, copy, claims: held, consent: consent)
            }
        }
    }

    /// Sends a create's reply with its new handle; when the kernel is gone (the caller was
    /// interrupted), the handle ends and the lookup the reply would have counted is undone.
    private func replyCreate(_ request: PendingRequest, _ entry: inout fuse_entry_param, _ info: inout fuse_file_info, _ handle: OpenFile) {
        configureCaching(&info, handle)
        handle.attach(to: &info)
        if fuse_reply_create(request.raw, &entry, &info) != 0 {
            if let handle = OpenFile.take(&info) { releaseHandle(handle) }
            forget(entry.ino, 1)
        }
    }

    /// Creates the file itself in the backing (in-place files).
    private func createInPlace(_ request: PendingRequest, _ origin: ChangeOrigin, _ parent: Node, _ name: FileName, _ mode: mode_t,
                               _ copy: FileInfoCopy, consent: PresenterConsent) {
        var info = copy.info
        do throws(Errno) {
            let descriptor = try creatingForCaller(request.raw, mode: mode) { (creationMode) throws(Errno) in
                try createExclusively(parent, name, flags: backingFlags(info.flags), mode: creationMode)
            }
            try giveToCaller(request.raw, parent: parent, name: name, descriptor: descriptor.raw, mode: mode)
            var entry = try lookUpMade(parent, name)
            mount.publish(.created, origin: origin, path: nodes.path(of: parent)?.appending(name), isDirectory: false, size: 0)
            let handle = OpenFile(node: try node(entry.ino), own: SharedDescriptor(descriptor), save: nil, isWriter: true,
                                  appends: false, usesPageCache: true, claims: nil, origin: origin, consent: consent)
            replyCreate(request, &entry, &info, handle)
        } catch {
            reacquire(consent)
            reply(request.raw, error: error)
        }
    }

    /// Creates the file as a staged temp (unnamed where the backing allows) that only its
    /// creator sees until the first commit gives it its name (the node stands for the temp from
    /// the start, so it keeps its identity through that commit).
    private func createStaged(_ request: PendingRequest, _ origin: ChangeOrigin, _ parent: Node, _ name: FileName, _ mode: mode_t,
                              _ copy: FileInfoCopy, claims held: HeldClaims?, consent: PresenterConsent) {
        var info = copy.info
        let owner = ClaimOwner.process(origin.pid)
        var staged: StagedFile?
        do throws(Errno) {
            if let existing = activity.pendingSave(PendingName(directory: parent.id, name: name)) {
                // Our own pending file, which the kernel forgot: O_EXCL still means it exists.
                if info.flags & O_EXCL != 0 || existing.owner != owner { throw .fileExists }
                throw .staleNFSFileHandle
            }
            if (try? Syscall.stat(at: parent.directory, name)) != nil {
                // The kernel trusted a negative entry while the backing changed behind the mount:
                // ESTALE makes it look again and open what is there with its own checks.
                throw info.flags & O_EXCL != 0 ? .fileExists : .staleNFSFileHandle
            }
            let made = try creatingForCaller(request.raw, mode: mode & 0o7777) { (creationMode) throws(Errno) in
                try staging.stage(in: parent, replacing: nil, copyContents: false, owner: nil, mode: creationMode)
            }
            let temp = made.descriptor.raw
            staged = consume made
            try giveToCaller(request.raw, parent: parent, name: name, descriptor: temp, mode: mode)
            var entry = try adopt(Syscall.reopen(temp, Linux.O_PATH), parent, name)
            let node = try self.node(entry.ino)
            let current = try Syscall.duplicate(temp)
            let save = Save(node: node, owner: owner, creating: staged.take()!, current: current, directory: parent, name: name,
                            staging: staging)
            entry.attr = Save.shownToOwner(entry.attr)
            _ = activity.installSave(save, pendingName: PendingName(directory: parent.id, name: name))
            // Only the creator may see the file: others reach the same cached name, so the kernel
            // must ask for attributes each time (getattr and open answer others ENOENT).
            entry.attr_timeout = 0
            let handle = OpenFile(node: node, own: nil, save: save, isWriter: true, appends: info.flags & O_APPEND != 0,
                                  usesPageCache: false, claims: held, origin: origin, consent: consent)
            noteWriter(handle)
            replyCreate(request, &entry, &info, handle)
        } catch {
            if let leftover = staged.take() { leftover.discard(in: parent.directory) }
            if let held { authority.release(held) }
            reacquire(consent)
            reply(request.raw, error: error)
        }
    }

    /// Creates the file with O_EXCL even when the caller did not ask for it: only a file the
    /// daemon made here may be given to the caller. When the name exists after all (the kernel
    /// trusted a negative entry while the backing changed behind the mount), ESTALE makes the
    /// kernel look the name up again and open what is there with its own permission checks,
    /// instead of the daemon (root) opening, and giving away, someone else's file.
    private func createExclusively(_ parent: Node, _ name: FileName, flags: Int32, mode: mode_t) throws(Errno) -> OwnedDescriptor {
        do throws(Errno) {
            return try Syscall.openAt(parent.directory, name, flags | O_CREAT | O_EXCL, mode)
        } catch .fileExists where flags & O_EXCL == 0 {
            throw .staleNFSFileHandle
        }
    }
}

/// The caller of a request that changes a file's data, as the set-id rule needs it: its
/// thread (whose capabilities and groups /proc tells) and its fsgid.
struct DataWriter: Sendable {
    let thread: Int32
    let group: gid_t
    /// The node whose file it changes.
    let node: UInt64
}
