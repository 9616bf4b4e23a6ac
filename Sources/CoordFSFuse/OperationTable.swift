import CFuse
import Glibc
import CoordFSCore

// The low-level operations table: thin C-callable trampolines from libfuse into FileSystem.
// They live in this library (not in main.swift) so they are nonisolated: libfuse calls
// them on its worker threads. Locks are left out on purpose: without getlk/setlk/flock the
// kernel keeps POSIX, OFD and flock locks itself, on the inode the mount shows, for every
// process using the mount, and a blocked locker never holds one of our worker threads. The
// daemon learns of them from /proc/PID/fdinfo where it must (SelfCoordinatingFiles.swift).

extension FileSystem {
    static func makeOperations() -> fuse_lowlevel_ops {
        var ops = fuse_lowlevel_ops()
        ops.`init` = { userdata, connection in
            guard let userdata, let connection else { return }
            Unmanaged<FileSystem>.fromOpaque(userdata).takeUnretainedValue().negotiate(connection)
        }
        ops.lookup = { request, parent, name in FileSystem.serve(request, .lookup) { $0.lookup($1, parent, name!) } }
        ops.forget = { request, id, count in
            FileSystem.serve(request, .forget) { fileSystem, request in
                fileSystem.forget(id, count)
                fuse_reply_none(request)
            }
        }
        ops.forget_multi = { request, count, forgets in
            FileSystem.serve(request, .batchForget) { fileSystem, request in
                for index in 0..<count { fileSystem.forget(forgets![index].ino, forgets![index].nlookup) }
                fuse_reply_none(request)
            }
        }
        ops.getattr = { request, id, file in FileSystem.serve(request, .getattr) { $0.getattr($1, id, file) } }
        ops.setattr = { request, id, attributes, fields, file in FileSystem.serve(request, .setattr) { $0.setattr($1, id, attributes!, fields, file) } }
        ops.readlink = { request, id in FileSystem.serve(request, .readlink) { $0.readlink($1, id) } }
        ops.mknod = { request, parent, name, mode, device in FileSystem.serve(request, .mknod) { $0.mknod($1, parent, name!, mode, device) } }
        ops.mkdir = { request, parent, name, mode in FileSystem.serve(request, .mkdir) { $0.mkdir($1, parent, name!, mode) } }
        ops.unlink = { request, parent, name in FileSystem.serve(request, .unlink) { $0.unlink($1, parent, name!, flags: 0) } }
        ops.rmdir = { request, parent, name in FileSystem.serve(request, .rmdir) { $0.unlink($1, parent, name!, flags: AT_REMOVEDIR) } }
        ops.symlink = { request, target, parent, name in FileSystem.serve(request, .symlink) { $0.symlink($1, target!, parent, name!) } }
        ops.rename = { request, parent, name, newParent, newName, flags in
            FileSystem.serve(request, .rename) { $0.rename($1, parent, name!, newParent, newName!, flags) }
        }
        ops.link = { request, id, newParent, newName in FileSystem.serve(request, .link) { $0.link($1, id, newParent, newName!) } }
        ops.open = { request, id, file in FileSystem.serve(request, .open) { $0.open($1, id, file!) } }
        ops.read = { request, _, size, offset, file in FileSystem.serve(request, .read) { $0.read($1, size, offset, file!) } }
        ops.write_buf = { request, _, buffers, offset, file in FileSystem.serve(request, .write) { $0.writeBuffer($1, buffers!, offset, file!) } }
        ops.flush = { request, _, file in FileSystem.serve(request, .flush) { $0.flush($1, file!) } }
        ops.release = { request, _, file in FileSystem.serve(request, .release) { $0.release($1, file!) } }
        ops.fsync = { request, _, dataOnly, file in FileSystem.serve(request, .fsync) { $0.fsync($1, dataOnly != 0, file!) } }
        ops.opendir = { request, id, file in FileSystem.serve(request, .opendir) { $0.opendir($1, id, file!) } }
        ops.readdir = { request, id, size, offset, file in FileSystem.serve(request, .readdir) { $0.readdir($1, id, size, offset, file!, plus: false) } }
        ops.readdirplus = { request, id, size, offset, file in FileSystem.serve(request, .readdirplus) { $0.readdir($1, id, size, offset, file!, plus: true) } }
        ops.releasedir = { request, _, file in FileSystem.serve(request, .releasedir) { $0.releasedir($1, file!) } }
        ops.fsyncdir = { request, _, dataOnly, file in FileSystem.serve(request, .fsyncdir) { $0.fsyncdir($1, dataOnly != 0, file!) } }
        ops.statfs = { request, id in FileSystem.serve(request, .statfs) { $0.statfs($1, id) } }
        ops.setxattr = { request, id, name, value, size, flags in FileSystem.serve(request, .setxattr) { $0.setxattr($1, id, name!, value, size, flags) } }
        ops.getxattr = { request, id, name, size in FileSystem.serve(request, .getxattr) { $0.getxattr($1, id, name!, size) } }
        ops.listxattr = { request, id, size in FileSystem.serve(request, .listxattr) { $0.listxattr($1, id, size) } }
        ops.removexattr = { request, id, name in FileSystem.serve(request, .removexattr) { $0.removexattr($1, id, name!) } }
        ops.access = { request, id, mask in FileSystem.serve(request, .access) { $0.access($1, id, mask) } }
        ops.create = { request, parent, name, mode, file in FileSystem.serve(request, .create) { $0.create($1, parent, name!, mode, file!) } }
        ops.fallocate = { request, _, mode, offset, length, file in FileSystem.serve(request, .fallocate) { $0.fallocate($1, mode, offset, length, file!) } }
        ops.copy_file_range = { request, _, sourceOffset, source, _, destinationOffset, destination, length, flags in
            FileSystem.serve(request, .copyFileRange) { $0.copyFileRange($1, sourceOffset, source!, destinationOffset, destination!, length, flags) }
        }
        ops.lseek = { request, _, offset, whence, file in FileSystem.serve(request, .lseek) { $0.lseek($1, offset, whence, file!) } }
        return ops
    }

    /// Chooses the kernel features the mount asks for (libfuse applies only what init asks).
    func negotiate(_ connection: UnsafeMutablePointer<fuse_conn_info>) {
        let offered = connection.pointee.capable
        var wanted = connection.pointee.want
        func ask(_ capability: Int32, _ on: Bool) {
            let bit = UInt32(capability)
            if on && offered & bit != 0 { wanted |= bit } else if !on { wanted &= ~bit }
        }
        // The kernel clears set-id bits on write and chown itself; the daemon (root) would not.
        ask(FUSE_CAP_HANDLE_KILLPRIV, false)
        ask(FUSE_CAP_WRITEBACK_CACHE, options.writebackCache)
        // libfuse's names are the daemon's view: SPLICE_READ reads requests (written data),
        // SPLICE_WRITE writes replies (read data).
        ask(FUSE_CAP_SPLICE_READ, options.spliceWrites)
        ask(FUSE_CAP_SPLICE_WRITE, options.spliceReads)
        ask(FUSE_CAP_SPLICE_MOVE, options.spliceReads)
        ask(FUSE_CAP_READDIRPLUS, true)
        ask(FUSE_CAP_READDIRPLUS_AUTO, true)
        ask(FUSE_CAP_PARALLEL_DIROPS, true)
        ask(FUSE_CAP_AUTO_INVAL_DATA, true)
        ask(FUSE_CAP_ASYNC_READ, true)
        // Off: with it the kernel zeroes the inode's size for every reader when a writer opens
        // with O_TRUNC; without it the truncation comes as a setattr whose reply we control,
        // so readers of the committed version keep its size while the owner's save is pending.
        ask(FUSE_CAP_ATOMIC_O_TRUNC, false)
        ask(FUSE_CAP_CACHE_SYMLINKS, options.keepPageCache)
        // Modes of new objects come unmasked, with the caller's umask beside them: a default
        // ACL on the directory must take the umask's place, as on a plain disk (`creatingForCaller`).
        ask(FUSE_CAP_DONT_MASK, true)
        let leftToUs = wanted & UInt32(FUSE_CAP_DONT_MASK) != 0
        masksCreatedModes.store(leftToUs, ordering: .relaxed)
        if leftToUs && !Syscall.threadsHaveOwnCreationMasks() {
            logger.warning("this system refuses unshare(CLONE_FS): new files get the creator's umask even in directories with a default ACL")
        }
        if cfuse_kernel_offers_shared_mmap() == 0 {
            // Before Linux 6.6: the INIT reply cannot allow it (see Sources/CFuse/cfuse.c).
            logger.notice("this kernel refuses shared mappings of files served with direct I/O: mmap(MAP_SHARED) of a file during a save fails with ENODEV")
        }
        connection.pointee.want = wanted
        connection.pointee.time_gran = 1
        logger.debug("negotiated kernel features", metadata: ["offered": "\(String(offered, radix: 16))", "wanted": "\(String(wanted, radix: 16))"])
    }
}
