import CFuse
import Glibc
import CoordFSCore
import SystemPackage

/// An open directory stream. The kernel serialises readdir calls on one open directory,
/// so the stream position and the entry held over between calls need no lock of their own.
final class DirectoryHandle: KernelHandle, @unchecked Sendable {
    let stream: OpaquePointer
    /// The offset the stream stands at, as the kernel counts it (telldir cookies).
    var offset: off_t = 0
    /// An entry read but not yet sent, because the last reply buffer was full.
    var heldOver: UnsafeMutablePointer<dirent>?
    /// The caller's own files created and not committed yet (the backing has no name for them),
    /// listed after the backing's entries: taken when the stream first reaches its end, and
    /// how many of them were sent.
    var pendingTail: [(name: FileName, save: Save)]?
    var pendingSent = 0

    /// The offset of the pending entry at `index`: far above a small directory's cookies and
    /// below ext4's end-of-directory cookie (Int64.max); only this handle ever reads it back.
    static func pendingOffset(_ index: Int) -> off_t { off_t.max - 1 - off_t(index) }

    init(stream: OpaquePointer) {
        self.stream = stream
    }

    deinit {
        closedir(stream)
    }
}

extension FileSystem {
    func opendir(_ request: fuse_req_t, _ id: fuse_ino_t, _ file: UnsafeMutablePointer<fuse_file_info>) {
        do throws(Errno) {
            let stream = try Syscall.openDirectoryStream(try node(id).directory)
            DirectoryHandle(stream: stream).attach(to: file)
            // A listing with files only their creators see yet must not be cached for everyone.
            if options.keepPageCache && !activity.hasPendingNames(in: UInt64(id)) {
                cfuse_fi_set_cache_readdir(file, 1)
                cfuse_fi_set_keep_cache(file, 1)
            }
            if fuse_reply_open(request, file) != 0 { DirectoryHandle.detach(file) }
        } catch {
            reply(request, error: error)
        }
    }

    /// Fills one reply of at most `size` bytes with entries from `offset` on. With `plus`, each
    /// entry carries its attributes and counts as a kernel lookup (except `.` and `..`).
    func readdir(_ request: fuse_req_t, _ id: fuse_ino_t, _ size: Int, _ offset: off_t,
                 _ file: UnsafeMutablePointer<fuse_file_info>, plus: Bool) {
        guard let directory = DirectoryHandle.borrow(file) else { return reply(request, error: .badFileDescriptor) }
        let parent: Node
        do throws(Errno) { parent = try node(id) } catch { return reply(request, error: error) }

        if offset != directory.offset {
            seekdir(directory.stream, offset)
            directory.heldOver = nil
            directory.offset = offset
            directory.pendingTail = nil
            directory.pendingSent = 0
        }
        let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: max(size, 1))
        defer { buffer.deallocate() }
        var used = 0
        var failure: Errno?
        // Entries are on the directory's own filesystem: their inode numbers are shown as the
        // node table shows that identity's (`NodeTable.shownInode`).
        let device = parent.identity.device
        let pendingTail = pendingEntries(request, parent, directory)

        while true {
            let entry: UnsafeMutablePointer<dirent>
            if let held = directory.heldOver {
                entry = held
            } else {
                Glibc.errno = 0
                guard let next = Glibc.readdir(directory.stream) else {
                    if Glibc.errno != 0 { failure = Errno.current } else { used += addPendingEntries(request, parent, directory, buffer + used, size - used, plus: plus) }
                    break
                }
                entry = next
            }
            directory.heldOver = entry
            let nextOffset = entry.pointee.d_off
            let hidden = withUnsafePointer(to: &entry.pointee.d_name) { namePointer in
                namePointer.withMemoryRebound(to: CChar.self, capacity: 256) { name in
                    StagingName.isReserved(name: name, inRoot: parent.id == NodeTable.rootID)
                        || (!pendingTail.isEmpty && pendingTail.contains { $0.name == FileName(cString: name) })
                }
            }
            // The mount's own temps and recovery folder are not part of the view; nor is a
            // committed file the caller's own new file is to replace (it is listed once, below).
            if hidden {
                directory.heldOver = nil
                directory.offset = nextOffset
                continue
            }
            let added: Int = withUnsafePointer(to: &entry.pointee.d_name) { namePointer in
                namePointer.withMemoryRebound(to: CChar.self, capacity: 256) { name in
                    if plus {
                        return addEntryPlus(request, parent, device, name, entry.pointee, buffer + used, size - used, nextOffset)
                    }
                    var status = stat()
                    status.st_ino = ino_t(nodes.shownInode(of: FileIdentity(device: device, inode: UInt64(entry.pointee.d_ino))))
                    status.st_mode = mode_t(entry.pointee.d_type) << 12
                    let needed = fuse_add_direntry(request, buffer + used, size - used, name, &status, nextOffset)
                    return needed <= size - used ? needed : -1
                }
            }
            if added < 0 { break } // full: the entry waits for the next call
            used += added
            directory.heldOver = nil
            directory.offset = nextOffset
        }
        if used == 0, let failure { return reply(request, error: failure) }
        fuse_reply_buf(request, buffer, used)
    }

    /// Adds one readdirplus entry; returns its size, 0 when the entry vanished meanwhile,
    /// or -1 when it does not fit (then no lookup is left counted for it). `device`: the
    /// directory's filesystem.
    private func addEntryPlus(_ request: fuse_req_t, _ parent: Node, _ device: UInt64, _ name: UnsafePointer<CChar>, _ entry: dirent,
                              _ buffer: UnsafeMutablePointer<CChar>, _ room: Int, _ nextOffset: off_t) -> Int {
        let isDotOrDotDot = name[0] == 0x2E && (name[1] == 0 || (name[1] == 0x2E && name[2] == 0))
        var parameters: fuse_entry_param
        if isDotOrDotDot {
            parameters = fuse_entry_param()
            parameters.attr.st_ino = ino_t(nodes.shownInode(of: FileIdentity(device: device, inode: UInt64(entry.d_ino))))
            parameters.attr.st_mode = mode_t(entry.d_type) << 12
        } else {
            do throws(Errno) { parameters = try lookUp(parent, name) } catch { return 0 }
            showSavedAttributes(in: &parameters, to: request)
        }
        let needed = fuse_add_direntry_plus(request, buffer, room, name, &parameters, nextOffset)
        if needed > room {
            if !isDotOrDotDot { forget(parameters.ino, 1) }
            return -1
        }
        return needed
    }

    /// The caller's files in `parent` that are created and not committed yet, found once per
    /// pass over the directory (a rewind looks again).
    private func pendingEntries(_ request: fuse_req_t, _ parent: Node, _ directory: DirectoryHandle) -> [(name: FileName, save: Save)] {
        if let tail = directory.pendingTail { return tail }
        let pending = activity.pendingSaves(in: parent.id)
        let tail = pending.isEmpty ? [] : pending.filter { [requester = owner(of: request)] in seesPendingVersion(of: $0.save, requester) }
        directory.pendingTail = tail
        return tail
    }

    /// Lists the caller's files that are created and not committed yet after the backing's
    /// entries, as a plain disk lists a file from its creation on (the caller's children too:
    /// `seesPendingVersion`); nobody else sees them.
    /// Returns the bytes added.
    private func addPendingEntries(_ request: fuse_req_t, _ parent: Node, _ directory: DirectoryHandle,
                                   _ buffer: UnsafeMutablePointer<CChar>, _ room: Int, plus: Bool) -> Int {
        let tail = pendingEntries(request, parent, directory)
        var used = 0
        while directory.pendingSent < tail.count {
            let (name, save) = tail[directory.pendingSent]
            let nextOffset = DirectoryHandle.pendingOffset(directory.pendingSent)
            let added: Int = name.withCString { cName in
                if plus {
                    guard let node = nodes.lookUpExisting(save.node.identity, parent: parent, name: name),
                          let status = try? save.currentStatus() else { return 0 }
                    var parameters = entry(node, status)
                    parameters.entry_timeout = 0
                    parameters.attr_timeout = 0
                    let needed = fuse_add_direntry_plus(request, buffer + used, room - used, cName, &parameters, nextOffset)
                    if needed > room - used {
                        forget(parameters.ino, 1)
                        return -1
                    }
                    return needed
                }
                var status = stat()
                status.st_ino = ino_t(save.node.shownInode)
                status.st_mode = S_IFREG
                let needed = fuse_add_direntry(request, buffer + used, room - used, cName, &status, nextOffset)
                return needed <= room - used ? needed : -1
            }
            if added < 0 { break }
            used += added
            directory.pendingSent += 1
            directory.offset = nextOffset
        }
        return used
    }

    func releasedir(_ request: fuse_req_t, _ file: UnsafeMutablePointer<fuse_file_info>) {
        DirectoryHandle.detach(file)
        replyOK(request)
    }

    func fsyncdir(_ request: fuse_req_t, _ dataOnly: Bool, _ file: UnsafeMutablePointer<fuse_file_info>) {
        guard let directory = DirectoryHandle.borrow(file) else { return reply(request, error: .badFileDescriptor) }
        do throws(Errno) {
            try Syscall.synchronize(dirfd(directory.stream), dataOnly: dataOnly)
            replyOK(request)
        } catch {
            reply(request, error: error)
        }
    }
}
