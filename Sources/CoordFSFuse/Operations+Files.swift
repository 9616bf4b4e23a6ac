import CFuse
import Glibc
import Synchronization
import CoordFSCore
import SystemPackage

/// A file opened through the mount.
///
/// Readers of the committed version read through `own`, the descriptor of the version that was
/// committed when they opened. Writers (and the owner's readers while its save lasts) go
/// through `save`. In-place writers and special files write through `own` directly.
/// Sendable: immutable but for an atomic flag.
final class OpenFile: KernelHandle, Sendable {
    let node: Node
    let own: SharedDescriptor?
    let save: Save?
    let isWriter: Bool
    let appends: Bool
    let usesPageCache: Bool
    /// Held until release: a writer's write claim, or a strict reader's read claim.
    let grant: ClaimGrant?
    /// Set when an in-place handle wrote: its release is a `changed` event.
    let wroteInPlace = Atomic<Bool>(false)
    /// The owner, for a reader of the committed version counted among the page-cache readers.
    let cachedReader: ClaimOwner?
    /// Set when a reader around the page cache mapped the file and was counted among the
    /// page-cache readers from then on (see `pageCacheSource`).
    let joinedCachedReaders = Atomic<Bool>(false)
    /// Who opened it: the origin of changes that land at its release.
    let origin: ChangeOrigin
    /// Presenters that stepped aside for this open, told to reacquire at its release.
    let consent: PresenterConsent

    init(node: Node, own: SharedDescriptor?, save: Save?, isWriter: Bool, appends: Bool, usesPageCache: Bool, grant: ClaimGrant?,
         origin: ChangeOrigin, consent: PresenterConsent = .nobodyAsked, cachedReader: ClaimOwner? = nil) {
        self.node = node
        self.cachedReader = cachedReader
        self.origin = origin
        self.consent = consent
        self.own = own
        self.save = save
        self.isWriter = isWriter
        self.appends = appends
        self.usesPageCache = usesPageCache
        self.grant = grant
    }

    /// The descriptor reads go to now; hold it for the read's duration.
    var readable: SharedDescriptor { save?.current ?? own! }

    /// The attributes of the version this handle reads (see `Save.currentStatus`).
    func readableStatus() throws(Errno) -> stat {
        if let save { return try save.currentStatus() }
        return try Syscall.stat(own!.raw)
    }
}

/// The parts of a `fuse_file_info` an operation needs after the callback returned (libfuse's
/// copy lives on the worker's stack).
struct FileInfoCopy: @unchecked Sendable {
    var info: fuse_file_info
}

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

    /// Whether a file is written in place rather than through a staged save: the policy's
    /// patterns and size threshold, plus SQLite databases whatever their name (recognised by
    /// their header) and their journal, WAL and shared-memory files, which SQLite maps and
    /// locks across processes. SQLite opens a database read-write, never write-only and never
    /// with O_TRUNC, so the header is read only for such opens: every `>` redirection and
    /// editor save skips one open, read and close.
    func writesInPlace(_ node: Node?, path: MountPath, flags: Int32) -> Bool {
        let truncating = flags & O_TRUNC != 0
        let size = truncating ? 0 : node.flatMap { try? attributes(of: $0).st_size }.map(Int64.init) ?? 0
        if options.inPlace.isInPlace(path, size: size) { return true }
        // O_NOATIME: looking must not count as reading (the daemon is root or the owner).
        if !truncating, flags & O_ACCMODE == O_RDWR, let node,
           let file = try? reopen(node, flags: O_RDONLY | Linux.O_NOATIME), Self.hasSQLiteHeader(file.raw) {
            return true
        }
        // SQLite's companions: mapped and locked by every connection, whatever the database's name.
        if let name = path.name, name.hasSuffix("-journal") || name.hasSuffix("-wal") || name.hasSuffix("-shm") { return true }
        return false
    }

    private static func hasSQLiteHeader(_ descriptor: Int32) -> Bool {
        var header = (UInt64(0), UInt64(0))
        let read = withUnsafeMutableBytes(of: &header) { pread(descriptor, $0.baseAddress, 16, 0) }
        // "SQLite format 3" and a NUL, as the file format specifies.
        return read == 16 && withUnsafeBytes(of: &header) { Array($0) } == Array("SQLite format 3\0".utf8)
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
        let item = node.isRegularFile ? NamedPath(node, in: nodes) : nil
        guard let item, let path = item.resolved else {
            // Special files, and files reachable only through an open descriptor: no one else can
            // name them, so there is nothing to coordinate.
            return openInPlace(pending, node, copy, grant: nil, consent: .nobodyAsked)
        }
        let nonblocking = flags & O_NONBLOCK != 0
        if opensForChange(flags) {
            let inPlace = writesInPlace(node, path: path, flags: flags)
            coordinatedOpen(request, .openForWriting, item, inPlace: inPlace, nonblocking: nonblocking) { [self] grant, consent in
                // In-place files took their claim for the open only (grant is nil), as for each operation.
                if inPlace {
                    openInPlace(pending, node, copy, grant: nil, consent: consent)
                } else {
                    openForSave(pending, node, copy, grant: grant, consent: consent)
                }
            }
        } else {
            // The grant is nil unless reads are strict: a snapshot read claims for the open only.
            coordinatedOpen(request, .openForReading, item, nonblocking: nonblocking) { [self] grant, _ in
                openForReading(pending, node, copy, grant: grant)
            }
        }
    }

    /// Opens the backing object itself: reads and writes go straight to it.
    private func openInPlace(_ request: PendingRequest, _ node: Node, _ copy: FileInfoCopy, grant: ClaimGrant?, consent: PresenterConsent) {
        let flags = copy.info.flags
        replyOpen(request, copy, grant: grant, consent: consent) { () throws(Errno) -> OpenFile in
            let descriptor = try reopen(node, flags: backingFlags(flags))
            if flags & O_TRUNC != 0 { try clearSetIDBitsOnTruncatingOpen(request.raw, descriptor.raw) }
            return OpenFile(node: node, own: SharedDescriptor(descriptor), save: nil, isWriter: opensForChange(flags),
                            appends: false, usesPageCache: true, grant: grant, origin: origin(of: request.raw), consent: consent)
        }
    }

    /// Opens for reading: the owner of a pending save reads it; everyone else reads the
    /// version committed now, through the page cache unless an older version may be in it.
    private func openForReading(_ request: PendingRequest, _ node: Node, _ copy: FileInfoCopy, grant: ClaimGrant?) {
        let flags = copy.info.flags
        let origin = origin(of: request.raw)
        let reader = ClaimOwner.process(origin.pid)
        replyOpen(request, copy, grant: grant, consent: .nobodyAsked) { () throws(Errno) -> OpenFile in
            if let save = activity.save(of: node) {
                if save.owner == reader, !save.hasFailed {
                    return OpenFile(node: node, own: nil, save: save, isWriter: false, appends: false, usesPageCache: false,
                                    grant: grant, origin: origin)
                }
                if !save.target.exists { throw .noSuchFileOrDirectory } // created, not committed yet
            }
            let descriptor = SharedDescriptor(try reopen(node, flags: backingFlags(flags)))
            let cached = activity.openReader(of: node, owner: reader, version: descriptor, identity: node.identity)
            return OpenFile(node: node, own: descriptor, save: nil, isWriter: false, appends: false,
                            usesPageCache: cached, grant: grant, origin: origin, cachedReader: cached ? reader : nil)
        }
    }

    /// Opens for writing through the owner's save of the file, starting one if needed.
    private func openForSave(_ request: PendingRequest, _ node: Node, _ copy: FileInfoCopy, grant: ClaimGrant?, consent: PresenterConsent) {
        let flags = copy.info.flags
        let origin = origin(of: request.raw)
        replyOpen(request, copy, grant: grant, consent: consent) { () throws(Errno) -> OpenFile in
            let save = try saveForWriting(node, owner: .process(origin.pid))
            if flags & O_TRUNC != 0 {
                let dropsSetID = canChangeOwners && fuse_req_ctx(request.raw)!.pointee.uid != 0
                do throws(Errno) {
                    try save.truncate(to: 0, reopen: reopen(descriptor:flags:)) { (descriptor) throws(Errno) in
                        if dropsSetID { try clearSetIDBits(descriptor) }
                    }
                } catch {
                    endWriter(of: save, origin: origin)
                    throw error
                }
            }
            return OpenFile(node: node, own: nil, save: save, isWriter: true, appends: flags & O_APPEND != 0,
                            usesPageCache: false, grant: grant, origin: origin, consent: consent)
        }
    }

    /// The node's save with one more writer: the owner's own if it has one, else a new one.
    private func saveForWriting(_ node: Node, owner: ClaimOwner) throws(Errno) -> Save {
        if let existing = activity.joinSave(of: node) { return existing }
        guard let (directory, name) = nodes.location(of: node) else { throw .noSuchFileOrDirectory }
        let candidate = Save(node: node, owner: owner, committed: try reopen(node, flags: O_RDONLY), directory: directory, name: name,
                             staging: staging)
        return activity.installSave(candidate)
    }

    /// Builds the handle with `make` and sends the open reply; when that fails, the claim
    /// taken for the open goes, the presenters that stepped aside are told so, and the error
    /// is the reply.
    private func replyOpen(_ request: PendingRequest, _ copy: FileInfoCopy, grant: ClaimGrant?, consent: PresenterConsent,
                           _ make: () throws(Errno) -> OpenFile) {
        var info = copy.info
        do throws(Errno) {
            let handle = try make()
            configureCaching(&info, handle)
            handle.attach(to: &info)
            if fuse_reply_open(request.raw, &info) != 0, let handle = OpenFile.take(&info) { releaseHandle(handle) }
        } catch {
            if let grant { claims.release(grant) }
            reacquire(consent)
            reply(request.raw, error: error)
        }
    }

    func configureCaching(_ info: UnsafeMutablePointer<fuse_file_info>, _ handle: OpenFile) {
        if handle.usesPageCache {
            if options.keepPageCache { cfuse_fi_set_keep_cache(info, 1) }
            // A writer through the page cache may fill pages without a READ (see `KernelNotifier`).
            if handle.isWriter { notifier?.notePages(of: handle.node.id) }
        } else {
            cfuse_fi_set_direct_io(info, 1)
        }
        // Only a save commits at close; other handles need no FLUSH round trip.
        if handle.save == nil || !handle.isWriter { cfuse_fi_set_noflush(info, 1) }
    }

    /// A truncating open clears set-user-id, and set-group-id with group execute, when the
    /// caller lacks CAP_FSETID, as on the bare disk. With atomic O_TRUNC the kernel drops the
    /// setattr that would ask for it, and the daemon's own truncate keeps the bits (it is root),
    /// so the daemon clears them itself; a caller with uid 0 counts as having CAP_FSETID.
    func clearSetIDBitsOnTruncatingOpen(_ request: fuse_req_t, _ descriptor: Int32) throws(Errno) {
        guard canChangeOwners, fuse_req_ctx(request)!.pointee.uid != 0 else { return }
        try clearSetIDBits(descriptor)
    }

    /// Clears set-user-id, and set-group-id with group execute, as a write by an unprivileged caller does.
    func clearSetIDBits(_ descriptor: Int32) throws(Errno) {
        let status = try Syscall.stat(descriptor)
        guard (status.st_mode & S_IFMT) == S_IFREG else { return }
        var mode = status.st_mode & 0o7777 & ~S_ISUID
        if mode & (S_ISGID | S_IXGRP) == (S_ISGID | S_IXGRP) { mode &= ~S_ISGID }
        if mode != status.st_mode & 0o7777 { try Syscall.changeMode(descriptor, mode) }
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
        let inPlace = writesInPlace(nil, path: path, flags: O_TRUNC)
        coordinatedOpen(request, .openForWriting, item, inPlace: inPlace, nonblocking: copy.info.flags & O_NONBLOCK != 0) { [self] grant, consent in
            if inPlace {
                createInPlace(pending, parent, fileName, mode, copy, consent: consent)
            } else {
                createStaged(pending, parent, fileName, mode, copy, grant: grant, consent: consent)
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
    private func createInPlace(_ request: PendingRequest, _ parent: Node, _ name: FileName, _ mode: mode_t, _ copy: FileInfoCopy,
                               consent: PresenterConsent) {
        var info = copy.info
        let origin = origin(of: request.raw)
        do throws(Errno) {
            let descriptor = try creatingForCaller(request.raw, mode: mode) { (creationMode) throws(Errno) in
                try createExclusively(parent, name, flags: backingFlags(info.flags), mode: creationMode)
            }
            try giveToCaller(request.raw, parent: parent, name: name, descriptor: descriptor.raw, mode: mode)
            var entry = try lookUpMade(parent, name)
            publish(.created, origin: origin, path: nodes.path(of: parent)?.appending(name), isDirectory: false, size: 0)
            let handle = OpenFile(node: try node(entry.ino), own: SharedDescriptor(descriptor), save: nil, isWriter: true,
                                  appends: false, usesPageCache: true, grant: nil, origin: origin, consent: consent)
            replyCreate(request, &entry, &info, handle)
        } catch {
            reacquire(consent)
            reply(request.raw, error: error)
        }
    }

    /// Creates the file as a staged temp (unnamed where the backing allows) that only its
    /// creator sees until the first commit gives it its name (the node stands for the temp from
    /// the start, so it keeps its identity through that commit).
    private func createStaged(_ request: PendingRequest, _ parent: Node, _ name: FileName, _ mode: mode_t, _ copy: FileInfoCopy,
                              grant: ClaimGrant?, consent: PresenterConsent) {
        var info = copy.info
        let origin = origin(of: request.raw)
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
            var entry = try adopt(reopen(descriptor: temp, flags: Linux.O_PATH), parent, name)
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
                                  usesPageCache: false, grant: grant, origin: origin, consent: consent)
            replyCreate(request, &entry, &info, handle)
        } catch {
            if let leftover = staged.take() { leftover.discard(in: parent.directory) }
            if let grant { claims.release(grant) }
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

    // MARK: Data

    func read(_ request: fuse_req_t, _ size: Int, _ offset: off_t, _ file: UnsafeMutablePointer<fuse_file_info>) {
        guard let handle = OpenFile.borrow(file) else { return reply(request, error: .badFileDescriptor) }
        // The kernel names the reader's files table in a read(2) that goes around the page
        // cache, and nobody in a read that fills it (a cached handle's read, a mapping's fault).
        let source = file.pointee.lock_owner == 0 ? pageCacheSource(for: handle) : handle.readable
        notifier?.notePages(of: handle.node.id) // whatever the handle, the reply may fill a page (see `KernelNotifier`)
        _ = withExtendedLifetime(source) {
            cfuse_reply_data_from_fd(request, source.raw, size, offset, options.spliceReads ? 1 : 0)
        }
    }

    func writeBuffer(_ request: fuse_req_t, _ buffers: UnsafeMutablePointer<fuse_bufvec>, _ offset: off_t, _ file: UnsafeMutablePointer<fuse_file_info>) {
        guard let handle = OpenFile.borrow(file) else { return reply(request, error: .badFileDescriptor) }
        if handle.usesPageCache { notifier?.notePages(of: handle.node.id) } // the data is in a page already
        do throws(Errno) {
            let dropsSetID = handle.save != nil && canChangeOwners && fuse_req_ctx(request)!.pointee.uid != 0
            // Pages written back from a shared mapping go where they belong, as on a disk.
            let appends = handle.appends && cfuse_fi_writepage(file) == 0
            let written = try changeContents(of: handle) { (descriptor) throws(Errno) -> Int in
                // Direct writes leave clearing set-id bits to the filesystem, as the kernel does
                // for writers without CAP_FSETID; the temp carries the cleared mode to the commit.
                if dropsSetID { try clearSetIDBits(descriptor) }
                // A save's descriptor is shared and never O_APPEND: appends go to its end here.
                let at = appends ? off_t(try Syscall.stat(descriptor).st_size) : offset
                let written = cfuse_write_bufvec_to_fd(buffers, descriptor, at)
                if written < 0 { throw Errno(rawValue: Int32(-written)) }
                return Int(written)
            }
            fuse_reply_write(request, written)
        } catch {
            reply(request, error: error)
        }
    }

    /// Runs a change of a handle's contents: through its save (staging it first), or on its own
    /// descriptor for in-place files.
    private func changeContents<R>(of handle: OpenFile, _ body: (Int32) throws(Errno) -> R) throws(Errno) -> R {
        if let save = handle.save {
            return try save.change(reopen: reopen(descriptor:flags:), body)
        }
        handle.wroteInPlace.store(true, ordering: .relaxed)
        return try body(handle.own!.raw)
    }

    func fsync(_ request: fuse_req_t, _ dataOnly: Bool, _ file: UnsafeMutablePointer<fuse_file_info>) {
        guard let handle = OpenFile.borrow(file) else { return reply(request, error: .badFileDescriptor) }
        do throws(Errno) {
            let target = handle.readable
            try withExtendedLifetime(target) { () throws(Errno) in try Syscall.synchronize(target.raw, dataOnly: dataOnly) }
            replyOK(request)
        } catch {
            reply(request, error: error)
        }
    }

    func fallocate(_ request: fuse_req_t, _ mode: Int32, _ offset: off_t, _ length: off_t, _ file: UnsafeMutablePointer<fuse_file_info>) {
        guard let handle = OpenFile.borrow(file) else { return reply(request, error: .badFileDescriptor) }
        do throws(Errno) {
            if !handle.isWriter { throw .badFileDescriptor }
            try changeContents(of: handle) { (descriptor) throws(Errno) in
                try Syscall.allocate(descriptor, mode: mode, offset: offset, length: length)
            }
            replyOK(request)
        } catch {
            reply(request, error: error)
        }
    }

    func copyFileRange(_ request: fuse_req_t, _ sourceOffset: off_t, _ source: UnsafeMutablePointer<fuse_file_info>,
                       _ destinationOffset: off_t, _ destination: UnsafeMutablePointer<fuse_file_info>, _ length: Int, _ flags: Int32) {
        guard let input = OpenFile.borrow(source), let output = OpenFile.borrow(destination) else {
            return reply(request, error: .badFileDescriptor)
        }
        do throws(Errno) {
            let from = input.readable
            let copied = try withExtendedLifetime(from) { () throws(Errno) -> Int in
                try changeContents(of: output) { (descriptor) throws(Errno) -> Int in
                    try Syscall.copyRange(from: from.raw, at: sourceOffset, to: descriptor, at: destinationOffset,
                                          length: length, flags: UInt32(bitPattern: flags))
                }
            }
            fuse_reply_write(request, copied)
        } catch {
            reply(request, error: error)
        }
    }

    func lseek(_ request: fuse_req_t, _ offset: off_t, _ whence: Int32, _ file: UnsafeMutablePointer<fuse_file_info>) {
        guard let handle = OpenFile.borrow(file) else { return reply(request, error: .badFileDescriptor) }
        do throws(Errno) {
            let target = handle.readable
            let position = try withExtendedLifetime(target) { () throws(Errno) -> off_t in try Syscall.seek(target.raw, offset, whence: whence) }
            fuse_reply_lseek(request, position)
        } catch {
            reply(request, error: error)
        }
    }

    // MARK: Commit and release

    /// close(2): a writer's save commits here, so the program's close returns once everyone
    /// sees its work, and a failed save (ENOSPC, EIO) fails its close.
    func flush(_ request: fuse_req_t, _ file: UnsafeMutablePointer<fuse_file_info>) {
        guard let handle = OpenFile.borrow(file) else { return reply(request, error: .badFileDescriptor) }
        guard let save = handle.save, handle.isWriter else { return replyOK(request) }
        // Every close of every copy of the descriptor flushes. A child that inherited it
        // (fork, then exec or exit) closes its copy while the owner may still be writing, so
        // only the owner's closes commit; a save whose owner closed first commits at release.
        guard owner(of: request) == save.owner else { return replyOK(request) }
        do throws(Errno) {
            let report = try commit(save, origin: origin(of: request))
            replyOK(request)
            withExtendedLifetime(report) {} // the replaced file goes only now, after the program's close returned
        } catch {
            reply(request, error: error)
        }
    }

    /// Commits a save's changes and tells the kernel and subscribers. Returns the report, for
    /// the caller to drop (and with it the replaced file's descriptor) once it has replied.
    @discardableResult
    func commit(_ save: Save, origin: ChangeOrigin, onlyWithoutWriters: Bool = false) throws(Errno) -> CommitReport? {
        guard let report = try save.commit(durability: commitDurability, nodes: nodes, onlyWithoutWriters: onlyWithoutWriters,
                                           reopen: reopen(descriptor:flags:)) else { return nil }
        if report.created { activity.clearPendingName(of: save) }
        let node = save.node
        // With no page of the node in the kernel and no open reader that could fill one with
        // the replaced version, there is nothing to drop: readers of the new version may use
        // the page cache at once. (Attributes need no invalidation either: every change of a
        // save makes the kernel's copy stale, and nothing replied during a save is cached.)
        if let notifier, notifier.mayHoldPages(of: node.id) || activity.hasCachedReaders(node) {
            activity.noteCommit(of: node)
            notifier.invalidateContents(of: node.id) { [activity] in activity.cacheDropped(of: node) }
        }
        publish(report.created ? .created : .changed, origin: origin, path: report.path, isDirectory: false, size: report.size)
        return report
    }

    func release(_ request: fuse_req_t, _ file: UnsafeMutablePointer<fuse_file_info>) {
        if let handle = OpenFile.take(file) { releaseHandle(handle) }
        replyOK(request)
    }

    /// Everything a handle's end entails: the save's last writer commits what is left and ends
    /// the save; claims go only after that, so the next writer sees the commit.
    func releaseHandle(_ handle: OpenFile) {
        if let save = handle.save, handle.isWriter {
            endWriter(of: save, origin: handle.origin)
        } else if let reader = handle.cachedReader ?? (handle.joinedCachedReaders.load(ordering: .relaxed) ? .process(handle.origin.pid) : nil) {
            if activity.closeReader(of: handle.node, owner: reader) {
                let node = handle.node
                notifier?.invalidateContents(of: node.id) { [activity] in activity.cacheDropped(of: node) }
            }
        }
        if handle.wroteInPlace.load(ordering: .relaxed) {
            publish(.changed, origin: handle.origin, path: nodes.path(of: handle.node), isDirectory: false,
                    size: (try? attributes(of: handle.node).st_size).map(Int64.init))
        }
        if let grant = handle.grant { claims.release(grant) }
        reacquire(handle.consent)
    }

    /// One writer of a save is done; the last one commits what is left and ends the save.
    /// `origin`: who opened the writer's handle, as the commit's origin.
    func endWriter(of save: Save, origin: ChangeOrigin) {
        guard save.removeWriter() else { return }
        do throws(Errno) {
            try commit(save, origin: origin, onlyWithoutWriters: true)
        } catch {
            logger.error("commit failed; the committed file is unchanged", metadata: ["path": "\(nodes.path(of: save.node)?.description ?? "?")", "error": "\(error)"])
        }
        save.discardIfFailed()
        activity.endSave(save)
    }
}
