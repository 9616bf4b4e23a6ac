import CFuse
import Glibc
import CoordFSCore
import SystemPackage

/// A file opened through the mount: the backing descriptor its reads and writes go to.
///
/// Sendable: immutable.
final class OpenFile: KernelHandle, Sendable {
    let descriptor: OwnedDescriptor

    init(_ descriptor: consuming OwnedDescriptor) {
        self.descriptor = descriptor
    }
}

extension FileSystem {
    /// Flags for the backing open: the kernel already handled creation; O_DIRECT stays on the
    /// FUSE side (libfuse's buffers are not aligned for it); the writeback cache needs to read
    /// pages of write-only files and computes append offsets itself.
    func backingFlags(_ flags: Int32) -> Int32 {
        var flags = flags & ~(O_NOFOLLOW | Linux.O_DIRECT)
        if options.writebackCache {
            if flags & O_ACCMODE == O_WRONLY { flags = (flags & ~O_ACCMODE) | O_RDWR }
            flags &= ~O_APPEND
        }
        return flags
    }

    func configureCaching(_ file: UnsafeMutablePointer<fuse_file_info>) {
        if options.keepPageCache { cfuse_fi_set_keep_cache(file, 1) }
    }

    func open(_ request: fuse_req_t, _ id: fuse_ino_t, _ file: UnsafeMutablePointer<fuse_file_info>) {
        do throws(Errno) {
            let node = try node(id)
            let descriptor = try reopen(node, flags: backingFlags(file.pointee.flags))
            if file.pointee.flags & O_TRUNC != 0 { try clearSetIDBitsOnTruncatingOpen(request, descriptor.raw) }
            OpenFile(descriptor).attach(to: file)
            configureCaching(file)
            if fuse_reply_open(request, file) != 0 { OpenFile.detach(file) }
        } catch {
            reply(request, error: error)
        }
    }

    /// A truncating open clears set-user-id, and set-group-id with group execute, when the
    /// caller lacks CAP_FSETID, as on the bare disk. With atomic O_TRUNC the kernel drops the
    /// setattr that would ask for it, and the daemon's own truncate keeps the bits (it is root),
    /// so the daemon clears them itself; a caller with uid 0 counts as having CAP_FSETID.
    private func clearSetIDBitsOnTruncatingOpen(_ request: fuse_req_t, _ descriptor: Int32) throws(Errno) {
        guard canChangeOwners, fuse_req_ctx(request)!.pointee.uid != 0 else { return }
        let status = try Syscall.stat(descriptor)
        guard (status.st_mode & S_IFMT) == S_IFREG else { return }
        var mode = status.st_mode & 0o7777 & ~S_ISUID
        if mode & (S_ISGID | S_IXGRP) == (S_ISGID | S_IXGRP) { mode &= ~S_ISGID }
        if mode != status.st_mode & 0o7777 { try Syscall.changeMode(descriptor, mode) }
    }

    func create(_ request: fuse_req_t, _ parentID: fuse_ino_t, _ name: UnsafePointer<CChar>, _ mode: mode_t, _ file: UnsafeMutablePointer<fuse_file_info>) {
        do throws(Errno) {
            let parent = try node(parentID)
            let descriptor = try createExclusively(parent, name, flags: backingFlags(file.pointee.flags), mode: mode)
            try giveToCaller(request, parent: parent, name: name, descriptor: descriptor.raw, mode: mode)
            var entry = try lookUp(parent, name)
            OpenFile(descriptor).attach(to: file)
            configureCaching(file)
            if fuse_reply_create(request, &entry, file) != 0 {
                OpenFile.detach(file)
                forget(entry.ino, 1)
            }
        } catch {
            reply(request, error: error)
        }
    }

    /// Creates the file with O_EXCL even when the caller did not ask for it: only a file the
    /// daemon made here may be given to the caller. When the name exists after all (the kernel
    /// trusted a negative entry while the backing changed behind the mount), ESTALE makes the
    /// kernel look the name up again and open what is there with its own permission checks,
    /// instead of the daemon (root) opening, and giving away, someone else's file.
    private func createExclusively(_ parent: Node, _ name: UnsafePointer<CChar>, flags: Int32, mode: mode_t) throws(Errno) -> OwnedDescriptor {
        do throws(Errno) {
            return try Syscall.openAt(parent.descriptor.raw, name, flags | O_CREAT | O_EXCL, mode)
        } catch .fileExists where flags & O_EXCL == 0 {
            throw .staleNFSFileHandle
        }
    }

    func read(_ request: fuse_req_t, _ size: Int, _ offset: off_t, _ file: UnsafeMutablePointer<fuse_file_info>) {
        guard let handle = OpenFile.borrow(file) else { return reply(request, error: .badFileDescriptor) }
        cfuse_reply_data_from_fd(request, handle.descriptor.raw, size, offset, options.splice ? 1 : 0)
    }

    func writeBuffer(_ request: fuse_req_t, _ buffers: UnsafeMutablePointer<fuse_bufvec>, _ offset: off_t, _ file: UnsafeMutablePointer<fuse_file_info>) {
        guard let handle = OpenFile.borrow(file) else { return reply(request, error: .badFileDescriptor) }
        let written = cfuse_write_bufvec_to_fd(buffers, handle.descriptor.raw, offset)
        if written < 0 {
            fuse_reply_err(request, Int32(-written))
        } else {
            fuse_reply_write(request, Int(written))
        }
    }

    func release(_ request: fuse_req_t, _ file: UnsafeMutablePointer<fuse_file_info>) {
        OpenFile.detach(file)
        replyOK(request)
    }

    func fsync(_ request: fuse_req_t, _ dataOnly: Bool, _ file: UnsafeMutablePointer<fuse_file_info>) {
        guard let handle = OpenFile.borrow(file) else { return reply(request, error: .badFileDescriptor) }
        do throws(Errno) {
            try Syscall.synchronize(handle.descriptor.raw, dataOnly: dataOnly)
            replyOK(request)
        } catch {
            reply(request, error: error)
        }
    }

    func fallocate(_ request: fuse_req_t, _ mode: Int32, _ offset: off_t, _ length: off_t, _ file: UnsafeMutablePointer<fuse_file_info>) {
        guard let handle = OpenFile.borrow(file) else { return reply(request, error: .badFileDescriptor) }
        do throws(Errno) {
            try Syscall.allocate(handle.descriptor.raw, mode: mode, offset: offset, length: length)
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
            let copied = try Syscall.copyRange(from: input.descriptor.raw, at: sourceOffset, to: output.descriptor.raw,
                                               at: destinationOffset, length: length, flags: UInt32(bitPattern: flags))
            fuse_reply_write(request, copied)
        } catch {
            reply(request, error: error)
        }
    }

    func lseek(_ request: fuse_req_t, _ offset: off_t, _ whence: Int32, _ file: UnsafeMutablePointer<fuse_file_info>) {
        guard let handle = OpenFile.borrow(file) else { return reply(request, error: .badFileDescriptor) }
        do throws(Errno) {
            fuse_reply_lseek(request, try Syscall.seek(handle.descriptor.raw, offset, whence: whence))
        } catch {
            reply(request, error: error)
        }
    }
}
