import CFuse
import Glibc
import CoordFSCore
import SystemPackage

// Data on open handles: reads, writes, copies, allocation, seeks and syncs, through a
// handle's save or straight to an in-place file.
extension FileSystem {
    func read(_ request: fuse_req_t, _ size: Int, _ offset: off_t, _ file: UnsafeMutablePointer<fuse_file_info>) {
        guard let handle = OpenFile.borrow(file) else { return reply(request, error: .badFileDescriptor) }
        // The kernel names the reader's files table in a read(2) that goes around the page
        // cache, and nobody in a read that fills it (a cached handle's read, a mapping's fault).
        let source = file.pointee.lock_owner == 0 ? pageCacheSource(for: handle) : handle.readable
        notifier.notePages(of: handle.node.id) // whatever the handle, the reply may fill a page (see `KernelNotifier`)
        _ = withExtendedLifetime(source) {
            let length = readsCommittedVersion(handle, source) ? committedLength(size, at: offset, in: source, of: handle) : size
            return cfuse_reply_data_from_fd(request, source.raw, length, offset, options.spliceReads ? 1 : 0)
        }
    }

    func writeBuffer(_ request: fuse_req_t, _ buffers: UnsafeMutablePointer<fuse_bufvec>, _ offset: off_t, _ file: UnsafeMutablePointer<fuse_file_info>) {
        guard let handle = OpenFile.borrow(file) else { return reply(request, error: .badFileDescriptor) }
        if handle.usesPageCache { notifier.notePages(of: handle.node.id) } // the data is in a page already
        do throws(Errno) {
            let writer = dataWriter(request, of: handle.node)
            // Pages written back from a shared mapping go where they belong, as on a disk.
            let appends = handle.appends && cfuse_fi_writepage(file) == 0
            let written = try changeContents(of: handle, at: appends ? .atEnd : .from(offset)) { (descriptor) throws(Errno) -> Int in
                try applySetIDRule(descriptor, for: writer)
                // A save's descriptor is shared and never O_APPEND: appends go to its end here.
                let at = appends ? off_t(try Syscall.stat(descriptor).st_size) : offset
                let written = cfuse_write_bufvec_to_fd(buffers, descriptor, at)
                if written < 0 { throw Errno(rawValue: Int32(-written)) }
                return Int(written)
            }
            // A database's first page: SQLite coordinates the file itself from now on.
            if offset == 0, written >= DatabaseHeader.sqlite.count, let save = handle.save, !save.writesInPlace,
               DatabaseHeader.sqlite.withUnsafeBytes({ cfuse_bufvec_starts_with(buffers, $0.baseAddress, $0.count) }) != 0 {
                turnInPlace(save)
            }
            fuse_reply_write(request, written)
        } catch {
            reply(request, error: error)
        }
    }

    /// Runs a change of a handle's contents: through its save (staging it first), or on its own
    /// descriptor for in-place files.
    private func changeContents<R>(of handle: OpenFile, at range: ChangeRange = .anywhere,
                                   _ body: (Int32) throws(Errno) -> R) throws(Errno) -> R {
        if let save = handle.save {
            // A change that may be an append writes the file itself, which a watch of the backing
            // sees (one that names no process must take it for the mount's own).
            if mount.notesOwnChanges, !range.isAnywhere || save.writesInPlace { mount.noteOwnChange(nodes.path(of: handle.node)) }
            let result = try save.change(at: range, body)
            if save.writesInPlace { handle.wroteInPlace.store(true, ordering: .relaxed) }
            return result
        }
        // The handle's first change: with versions, the file as it was is kept first (a clone).
        if !handle.wroteInPlace.exchange(true, ordering: .relaxed), mount.versions != nil {
            mount.keepBeforeInPlaceChange(of: handle.node, origin: handle.origin)
        }
        if mount.notesOwnChanges { mount.noteOwnChange(nodes.path(of: handle.node)) }
        return try body(handle.own!.raw)
    }

    /// Whether reads through `handle` from `source` may have to stop at a committed end: reads
    /// of a file, but not the pages of a mapped save (see `pageCacheSource`).
    private func readsCommittedVersion(_ handle: OpenFile, _ source: SharedDescriptor) -> Bool {
        handle.node.isRegularFile && source !== activity.mappedSave(of: handle.node)?.current
    }

    /// How many of `size` bytes at `offset` of `source` a read through `handle` may return:
    /// while the file's owner appends to it, none past the committed end unless `handle` is
    /// one of that very save's. The size is
    /// taken before the boundary is asked (see `committedView`), so an append that begins
    /// meanwhile shows neither in the size nor in the read (which is why the fstat comes
    /// first, even when no save is pending at all: one may start right after).
    private func committedLength(_ size: Int, at offset: off_t, in source: SharedDescriptor, of handle: OpenFile) -> Int {
        guard let status = try? Syscall.stat(source.raw) else { return size }
        let end = Int64(committedView(handle.node, status, viewer: handle.save).st_size)
        return Int(max(0, min(Int64(size), end - Int64(offset))))
    }

    func fsync(_ request: fuse_req_t, _ dataOnly: Bool, _ file: UnsafeMutablePointer<fuse_file_info>) {
        guard let handle = OpenFile.borrow(file) else { return reply(request, error: .badFileDescriptor) }
        do throws(Errno) {
            if let save = handle.save {
                try save.synchronize(dataOnly: dataOnly)
            } else {
                let target = handle.readable
                try withExtendedLifetime(target) { () throws(Errno) in try Syscall.synchronize(target.raw, dataOnly: dataOnly) }
            }
            replyOK(request)
        } catch {
            reply(request, error: error)
        }
    }

    func fallocate(_ request: fuse_req_t, _ mode: Int32, _ offset: off_t, _ length: off_t, _ file: UnsafeMutablePointer<fuse_file_info>) {
        guard let handle = OpenFile.borrow(file) else { return reply(request, error: .badFileDescriptor) }
        do throws(Errno) {
            if !handle.isWriter { throw .badFileDescriptor }
            let writer = dataWriter(request, of: handle.node)
            try changeContents(of: handle) { (descriptor) throws(Errno) in
                try Syscall.allocate(descriptor, mode: mode, offset: offset, length: length)
                try applySetIDRule(descriptor, for: writer)
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
            let writer = dataWriter(request, of: output.node)
            let copied = try withExtendedLifetime(from) { () throws(Errno) -> Int in
                let readable = readsCommittedVersion(input, from) ? committedLength(length, at: sourceOffset, in: from, of: input) : length
                return try changeContents(of: output, at: .from(destinationOffset)) { (descriptor) throws(Errno) -> Int in
                    let copied = try Syscall.copyRange(from: from.raw, at: sourceOffset, to: descriptor, at: destinationOffset,
                                                       length: readable, flags: UInt32(bitPattern: flags))
                    try applySetIDRule(descriptor, for: writer)
                    return copied
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
}
