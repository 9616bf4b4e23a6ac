import CSystemCalls
import Glibc
import SystemPackage

/// Every system call coordfs makes on the backing directory goes through here: one typed
/// wrapper per call, `Errno` as the error, `EINTR` retried where the call may be restarted.
///
/// Keeping them in one place makes every failure path reviewable in one file, and lets the
/// core's unit tests drive the real calls on a scratch directory, without a mount.
public enum Syscall {
    /// Runs `body` with the calling thread's file creation mask set to `mask`, then puts the
    /// old one back. `body` gets the mode to create with: `mode` itself, which the kernel then
    /// masks as creat(2) does on a plain disk (by the umask, or by the directory's default ACL
    /// instead); or, where threads cannot have masks of their own, `mode` less `mask`.
    ///
    /// Each thread first gets a mask of its own (`unshare(CLONE_FS)`, once per thread), so
    /// that callers served at the same time on other threads do not see each other's. The
    /// mask is set for every call, even one that clears no bit: a thread's mask is whatever
    /// the daemon started with, or one copied from another thread in the middle of a create (a
    /// thread started from an unshared one shares its mask until it unshares itself), never
    /// known to be 0.
    public static func withCreationMask<R: ~Copyable>(_ mask: mode_t, mode: mode_t,
                                                      _ body: (mode_t) throws(Errno) -> R) throws(Errno) -> R {
        guard csys_unshare_fs_once() == 0 else { return try body(mode & ~mask) }
        let previous = umask(mask)
        defer { umask(previous) }
        return try body(mode)
    }

    /// Whether threads can have creation masks of their own (see `withCreationMask`); asks
    /// for one for the calling thread. False under a seccomp filter that refuses unshare(2).
    public static func threadsHaveOwnCreationMasks() -> Bool {
        csys_unshare_fs_once() == 0
    }

    @inline(__always)
    public static func check(_ result: Int32) throws(Errno) -> Int32 {
        if result < 0 { throw Errno.current }
        return result
    }

    @inline(__always)
    public static func check(_ result: Int) throws(Errno) -> Int {
        if result < 0 { throw Errno.current }
        return result
    }

    /// Repeats a call interrupted by a signal before it did anything.
    @inline(__always)
    @usableFromInline
    static func retrying(_ body: () -> Int32) throws(Errno) -> Int32 {
        while true {
            let result = body()
            if result >= 0 { return result }
            let error = Errno.current
            if error != .interrupted { throw error }
        }
    }

    @inline(__always)
    @usableFromInline
    static func retrying(_ body: () -> Int) throws(Errno) -> Int {
        while true {
            let result = body()
            if result >= 0 { return result }
            let error = Errno.current
            if error != .interrupted { throw error }
        }
    }

    // MARK: Opening and closing

    public static func openAt(_ directory: Int32, _ name: UnsafePointer<CChar>, _ flags: Int32, _ mode: mode_t = 0) throws(Errno) -> OwnedDescriptor {
        let fd = try retrying { Glibc.openat(directory, name, flags | O_CLOEXEC, mode) }
        return OwnedDescriptor(adopting: fd)
    }


    /// Opens a new regular file without a name on `directory`'s filesystem (O_TMPFILE),
    /// read-write and linkable (no O_EXCL): it lives while a descriptor of it is open, and
    /// appears only when `link(descriptor:to:_:)` names it. Its mode is masked as creat(2)'s
    /// (the umask, or the directory's default ACL), and it inherits the default ACL.
    /// Filesystems without unnamed files refuse with EOPNOTSUPP (older kernels: EISDIR or EINVAL).
    public static func openUnnamed(in directory: Int32, mode: mode_t) throws(Errno) -> OwnedDescriptor {
        try openAt(directory, ".", Linux.O_TMPFILE | O_RDWR, mode)
    }

    /// An `O_PATH` descriptor of `/proc/self/fd`, open for the process's life: opening "N" in
    /// it reopens descriptor N with new flags (`reopen`), and "N" names N's object for calls
    /// that take a directory and a name. -1 when /proc is not mounted (then nothing reopens).
    public static let processDescriptors: Int32 = Glibc.open("/proc/self/fd", Linux.O_PATH | O_DIRECTORY | O_CLOEXEC)

    /// Opens the object behind `descriptor` afresh with `flags`: another open file of the same
    /// object, with its own flags and offset (it works for unlinked files too). The way a save
    /// gets a writable descriptor of a file it holds read-only, and the mount a file's data
    /// from a node's `O_PATH` descriptor.
    public static func reopen(_ descriptor: Int32, _ flags: Int32) throws(Errno) -> OwnedDescriptor {
        try withDescriptorPath(descriptor, prefix: "") { (name) throws(Errno) -> OwnedDescriptor in
            try openAt(processDescriptors, name, flags & ~O_NOFOLLOW)
        }
    }

    /// Runs `body` with `prefix` and the decimal number of `descriptor` written on the stack
    /// (no allocation: this runs on every open and every save). With "/proc/self/fd/" as the
    /// prefix it names the descriptor's object for calls that take only paths; with "" it is
    /// the name of the descriptor inside a descriptor of `/proc/self/fd`.
    @inline(__always)
    public static func withDescriptorPath<R: ~Copyable>(_ descriptor: Int32, prefix: StaticString,
                                                        _ body: (UnsafePointer<CChar>) throws(Errno) -> R) throws(Errno) -> R {
        var storage: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0) // 32 bytes: "/proc/self/fd/" + 10 digits + NUL
        return try withUnsafeMutableBytes(of: &storage) { (raw) throws(Errno) -> R in
            let buffer = raw.bindMemory(to: CChar.self)
            var length = 0
            prefix.withUTF8Buffer { bytes in
                for byte in bytes { buffer[length] = CChar(bitPattern: byte); length += 1 }
            }
            var digits = 0
            var rest = descriptor
            repeat { digits += 1; rest /= 10 } while rest > 0
            var value = descriptor
            var index = length + digits - 1
            repeat { buffer[index] = CChar(48 + value % 10); value /= 10; index -= 1 } while value > 0
            buffer[length + digits] = 0
            return try body(buffer.baseAddress!)
        }
    }

    /// Remounts the mount at `path` with `flags` (MS_REMOUNT is added): read-only or
    /// read-write, keeping the mount's other flags only if `flags` names them.
    public static func remount(_ path: String, flags: UInt) throws(Errno) {
        _ = try check(Glibc.mount(nil, path, nil, flags | UInt(MS_REMOUNT), nil))
    }

    // MARK: Metadata

    public static func stat(_ fd: Int32) throws(Errno) -> stat {
        var status = Glibc.stat()
        _ = try check(Glibc.fstat(fd, &status))
        return status
    }

    /// `fstatat` without following a final symlink; an empty name stats `directory` itself.
    public static func stat(at directory: Int32, _ name: UnsafePointer<CChar>) throws(Errno) -> stat {
        var status = Glibc.stat()
        let flags = AT_SYMLINK_NOFOLLOW | (name.pointee == 0 ? Linux.AT_EMPTY_PATH : 0)
        _ = try check(Glibc.fstatat(directory, name, &status, flags))
        return status
    }

    public static func statOfPathDescriptor(_ fd: Int32) throws(Errno) -> stat {
        var status = Glibc.stat()
        _ = try check(Glibc.fstatat(fd, "", &status, Linux.AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW))
        return status
    }

    /// A second descriptor of the same open file (shared offset and flags), close-on-exec.
    public static func duplicate(_ fd: Int32) throws(Errno) -> OwnedDescriptor {
        OwnedDescriptor(adopting: try check(Glibc.fcntl(fd, F_DUPFD_CLOEXEC, 0)))
    }

    public static func statfs(_ fd: Int32) throws(Errno) -> statvfs {
        var result = statvfs()
        _ = try check(Glibc.fstatvfs(fd, &result))
        return result
    }

    public static func changeMode(_ fd: Int32, _ mode: mode_t) throws(Errno) {
        _ = try check(Glibc.fchmod(fd, mode))
    }

    /// `fchmodat` on a path; used for objects reached through `/proc/self/fd`.
    public static func changeMode(at directory: Int32, _ name: UnsafePointer<CChar>, _ mode: mode_t) throws(Errno) {
        _ = try check(Glibc.fchmodat(directory, name, mode, 0))
    }

    public static func changeOwner(at directory: Int32, _ name: UnsafePointer<CChar>, _ uid: uid_t, _ gid: gid_t, flags: Int32) throws(Errno) {
        _ = try check(Glibc.fchownat(directory, name, uid, gid, flags))
    }

    public static func changeOwner(_ fd: Int32, _ uid: uid_t, _ gid: gid_t) throws(Errno) {
        _ = try check(Glibc.fchown(fd, uid, gid))
    }

    public static func truncate(_ fd: Int32, _ length: off_t) throws(Errno) {
        _ = try retrying { Glibc.ftruncate(fd, length) }
    }

    public static func setTimes(at directory: Int32, _ name: UnsafePointer<CChar>, _ times: (timespec, timespec), flags: Int32) throws(Errno) {
        var times = times
        let result = withUnsafePointer(to: &times) { pointer in
            pointer.withMemoryRebound(to: timespec.self, capacity: 2) { Glibc.utimensat(directory, name, $0, flags) }
        }
        _ = try check(result)
    }

    public static func setTimes(_ fd: Int32, _ times: (timespec, timespec)) throws(Errno) {
        var times = times
        let result = withUnsafePointer(to: &times) { pointer in
            pointer.withMemoryRebound(to: timespec.self, capacity: 2) { Glibc.futimens(fd, $0) }
        }
        _ = try check(result)
    }

    public static func access(at directory: Int32, _ name: UnsafePointer<CChar>, _ mode: Int32, flags: Int32) throws(Errno) {
        _ = try check(Glibc.faccessat(directory, name, mode, flags))
    }

    // MARK: Namespace changes

    public static func makeDirectory(at directory: Int32, _ name: UnsafePointer<CChar>, _ mode: mode_t) throws(Errno) {
        _ = try check(Glibc.mkdirat(directory, name, mode))
    }

    public static func makeNode(at directory: Int32, _ name: UnsafePointer<CChar>, _ mode: mode_t, _ device: dev_t) throws(Errno) {
        _ = try check(Glibc.mknodat(directory, name, mode, device))
    }

    public static func makeSymlink(target: UnsafePointer<CChar>, at directory: Int32, _ name: UnsafePointer<CChar>) throws(Errno) {
        _ = try check(Glibc.symlinkat(target, directory, name))
    }

    public static func link(_ sourceDirectory: Int32, _ sourceName: UnsafePointer<CChar>, to directory: Int32, _ name: UnsafePointer<CChar>, flags: Int32) throws(Errno) {
        _ = try check(Glibc.linkat(sourceDirectory, sourceName, directory, name, flags))
    }

    /// Names the file open as `fd` `name` in `directory`: how a file from `openUnnamed`
    /// appears. Through `/proc/self/fd/N`, followed, rather than `linkat(fd, "", AT_EMPTY_PATH)`,
    /// which kernels before 6.10 allow only with CAP_DAC_READ_SEARCH: this works for a daemon
    /// run by any user, and costs the same. EEXIST when the name is taken (nothing changed).
    public static func link(descriptor fd: Int32, to directory: Int32, _ name: UnsafePointer<CChar>) throws(Errno) {
        try withDescriptorPath(fd, prefix: "/proc/self/fd/") { (path) throws(Errno) in
            try link(AT_FDCWD, path, to: directory, name, flags: AT_SYMLINK_FOLLOW)
        }
    }

    public static func unlink(at directory: Int32, _ name: UnsafePointer<CChar>, flags: Int32) throws(Errno) {
        _ = try check(Glibc.unlinkat(directory, name, flags))
    }

    public static func rename(_ sourceDirectory: Int32, _ sourceName: UnsafePointer<CChar>, to directory: Int32, _ name: UnsafePointer<CChar>, flags: UInt32) throws(Errno) {
        _ = try check(csys_renameat2(sourceDirectory, sourceName, directory, name, flags))
    }

    public static func readLink(at directory: Int32, _ name: UnsafePointer<CChar>) throws(Errno) -> [CChar] {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = try check(buffer.withUnsafeMutableBufferPointer { Glibc.readlinkat(directory, name, $0.baseAddress!, $0.count) })
        if count >= buffer.count { throw Errno.fileNameTooLong }
        buffer[count] = 0
        buffer.removeSubrange((count + 1)...)
        return buffer
    }

    // MARK: The same calls on a name in a directory (its bytes as they are, see `FileName`)

    public static func openAt(_ directory: Int32, _ name: FileName, _ flags: Int32, _ mode: mode_t = 0) throws(Errno) -> OwnedDescriptor {
        try name.withCString { (name) throws(Errno) in try openAt(directory, name, flags, mode) }
    }

    public static func stat(at directory: Int32, _ name: FileName) throws(Errno) -> stat {
        try name.withCString { (name) throws(Errno) in try stat(at: directory, name) }
    }

    public static func changeMode(at directory: Int32, _ name: FileName, _ mode: mode_t) throws(Errno) {
        try name.withCString { (name) throws(Errno) in try changeMode(at: directory, name, mode) }
    }

    public static func changeOwner(at directory: Int32, _ name: FileName, _ uid: uid_t, _ gid: gid_t, flags: Int32) throws(Errno) {
        try name.withCString { (name) throws(Errno) in try changeOwner(at: directory, name, uid, gid, flags: flags) }
    }

    public static func makeDirectory(at directory: Int32, _ name: FileName, _ mode: mode_t) throws(Errno) {
        try name.withCString { (name) throws(Errno) in try makeDirectory(at: directory, name, mode) }
    }

    public static func makeNode(at directory: Int32, _ name: FileName, _ mode: mode_t, _ device: dev_t) throws(Errno) {
        try name.withCString { (name) throws(Errno) in try makeNode(at: directory, name, mode, device) }
    }

    /// `target` is any bytes, `/` included (a symlink's target is a path, not a name).
    public static func makeSymlink(target: [CChar], at directory: Int32, _ name: FileName) throws(Errno) {
        precondition(target.last == 0, "a symlink target is passed NUL-terminated")
        try name.withCString { (name) throws(Errno) in
            try target.withUnsafeBufferPointer { (target) throws(Errno) in try makeSymlink(target: target.baseAddress!, at: directory, name) }
        }
    }

    public static func link(_ sourceDirectory: Int32, _ sourceName: UnsafePointer<CChar>, to directory: Int32, _ name: FileName, flags: Int32) throws(Errno) {
        try name.withCString { (name) throws(Errno) in try link(sourceDirectory, sourceName, to: directory, name, flags: flags) }
    }

    public static func link(descriptor fd: Int32, to directory: Int32, _ name: FileName) throws(Errno) {
        try name.withCString { (name) throws(Errno) in try link(descriptor: fd, to: directory, name) }
    }

    public static func unlink(at directory: Int32, _ name: FileName, flags: Int32) throws(Errno) {
        try name.withCString { (name) throws(Errno) in try unlink(at: directory, name, flags: flags) }
    }

    public static func rename(_ sourceDirectory: Int32, _ sourceName: FileName, to directory: Int32, _ name: FileName, flags: UInt32) throws(Errno) {
        try sourceName.withCString { (sourceName) throws(Errno) in
            try name.withCString { (name) throws(Errno) in try rename(sourceDirectory, sourceName, to: directory, name, flags: flags) }
        }
    }

    // MARK: Data

    public static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: off_t) throws(Errno) -> Int {
        try retrying { Glibc.pread(fd, buffer.baseAddress, buffer.count, offset) }
    }

    public static func write(_ fd: Int32, from buffer: UnsafeRawBufferPointer, at offset: off_t) throws(Errno) -> Int {
        try retrying { Glibc.pwrite(fd, buffer.baseAddress, buffer.count, offset) }
    }

    public static func synchronize(_ fd: Int32, dataOnly: Bool) throws(Errno) {
        _ = try retrying { dataOnly ? Glibc.fdatasync(fd) : Glibc.fsync(fd) }
    }

    /// flock(2) with LOCK_EX | LOCK_NB: true when taken, false when another open file holds it.
    /// The lock goes with the last descriptor of the open file (a killed process's included).
    public static func lockExclusivelyIfFree(_ fd: Int32) throws(Errno) -> Bool {
        do throws(Errno) {
            _ = try retrying { csys_lock_exclusively_if_free(fd) }
            return true
        } catch .wouldBlock {
            return false
        }
    }

    public static func allocate(_ fd: Int32, mode: Int32, offset: off_t, length: off_t) throws(Errno) {
        _ = try retrying { csys_fallocate(fd, mode, offset, length) }
    }

    public static func copyRange(from source: Int32, at sourceOffset: off_t, to destination: Int32, at destinationOffset: off_t, length: Int, flags: UInt32) throws(Errno) -> Int {
        var sourceOffset = sourceOffset
        var destinationOffset = destinationOffset
        return try retrying { csys_copy_file_range(source, &sourceOffset, destination, &destinationOffset, length, flags) }
    }

    /// Makes `destination` share `source`'s data extents (`ioctl(FICLONE)`, a reflink): a whole
    /// copy in one call that costs no data blocks until either side is written. Filesystems
    /// without reflinks refuse with EOPNOTSUPP (some with ENOTTY or EINVAL); across
    /// filesystems it is EXDEV.
    public static func cloneContents(of source: Int32, into destination: Int32) throws(Errno) {
        _ = try retrying { csys_ficlone(destination, source) }
    }

    public static func seek(_ fd: Int32, _ offset: off_t, whence: Int32) throws(Errno) -> off_t {
        let result = Glibc.lseek(fd, offset, whence)
        if result < 0 { throw Errno.current }
        return result
    }

    // MARK: Extended attributes (on paths: O_PATH descriptors cannot carry them)

    public static func getExtendedAttribute(_ path: UnsafePointer<CChar>, _ name: UnsafePointer<CChar>, into buffer: UnsafeMutableRawBufferPointer, followLinks: Bool) throws(Errno) -> Int {
        try check(csys_getxattr(path, name, buffer.baseAddress, buffer.count, followLinks ? 1 : 0))
    }

    public static func setExtendedAttribute(_ path: UnsafePointer<CChar>, _ name: UnsafePointer<CChar>, _ value: UnsafeRawBufferPointer, flags: Int32, followLinks: Bool) throws(Errno) {
        _ = try check(csys_setxattr(path, name, value.baseAddress, value.count, flags, followLinks ? 1 : 0))
    }

    public static func listExtendedAttributes(_ path: UnsafePointer<CChar>, into buffer: UnsafeMutableRawBufferPointer, followLinks: Bool) throws(Errno) -> Int {
        let base = buffer.baseAddress?.assumingMemoryBound(to: CChar.self)
        return try check(csys_listxattr(path, base, buffer.count, followLinks ? 1 : 0))
    }

    public static func removeExtendedAttribute(_ path: UnsafePointer<CChar>, _ name: UnsafePointer<CChar>, followLinks: Bool) throws(Errno) {
        _ = try check(csys_removexattr(path, name, followLinks ? 1 : 0))
    }

    // MARK: Extended attributes on open descriptors (copying a file's attributes to its temp)

    public static func getExtendedAttribute(_ fd: Int32, _ name: UnsafePointer<CChar>, into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int {
        try check(csys_fgetxattr(fd, name, buffer.baseAddress, buffer.count))
    }

    public static func setExtendedAttribute(_ fd: Int32, _ name: UnsafePointer<CChar>, _ value: UnsafeRawBufferPointer, flags: Int32) throws(Errno) {
        _ = try check(csys_fsetxattr(fd, name, value.baseAddress, value.count, flags))
    }

    public static func listExtendedAttributes(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int {
        let base = buffer.baseAddress?.assumingMemoryBound(to: CChar.self)
        return try check(csys_flistxattr(fd, base, buffer.count))
    }

    public static func removeExtendedAttribute(_ fd: Int32, _ name: UnsafePointer<CChar>) throws(Errno) {
        _ = try check(csys_fremovexattr(fd, name))
    }

    // MARK: Directories

    /// Opens a directory stream on a fresh descriptor for `directory` (so each stream has its own offset).
    public static func openDirectoryStream(_ directory: Int32) throws(Errno) -> OpaquePointer {
        let fd = try openAt(directory, ".", O_RDONLY | O_DIRECTORY)
        guard let stream = Glibc.fdopendir(fd.raw) else { throw Errno.current }
        _ = fd.release() // the stream owns it now
        return stream
    }

    /// The next entry of a directory stream, nil at its end. The entry stays valid until the
    /// next read from, or the close of, the same stream.
    public static func readDirectory(_ stream: OpaquePointer) throws(Errno) -> UnsafeMutablePointer<dirent>? {
        Glibc.errno = 0
        if let entry = Glibc.readdir(stream) { return entry }
        if Glibc.errno != 0 { throw Errno.current }
        return nil
    }

    private static let dot = FileName(".".utf8)!
    private static let dotDot = FileName("..".utf8)!

    /// The names in a directory, without "." and "..", bytes exact.
    public static func directoryNames(_ directory: Int32) throws(Errno) -> [FileName] {
        let stream = try openDirectoryStream(directory)
        defer { closeDirectoryStream(stream) }
        var names: [FileName] = []
        while let entry = try readDirectory(stream) {
            let name = withUnsafePointer(to: &entry.pointee.d_name) { $0.withMemoryRebound(to: CChar.self, capacity: 256) { FileName(cString: $0) } }
            if name != dot && name != dotDot { names.append(name) }
        }
        return names
    }

    /// Closes a stream from `openDirectoryStream`, and with it its descriptor.
    public static func closeDirectoryStream(_ stream: OpaquePointer) {
        Glibc.closedir(stream)
    }

    // MARK: Process

    /// Names the calling thread, and the threads it starts from now on, as `ps`, `top` and
    /// `pgrep` show them. A daemon started through /proc/self/exe would otherwise be "exe".
    public static func nameThisThread(_ name: String) {
        _ = csys_set_thread_name(name)
    }

    /// Closes every descriptor numbered `first` or above: a daemon must not keep its
    /// starter's pipes and sockets open (whoever waits for their end would wait forever).
    public static func closeDescriptors(from first: Int32) {
        _ = csys_close_from(UInt32(first))
    }

    /// The soft limit on open descriptors.
    public static func descriptorLimit() -> Int {
        var limit = rlimit()
        guard Glibc.getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        return Int(min(limit.rlim_cur, rlim_t(Int32.max)))
    }

    /// The decimal number at the start of a small file (a /proc or /sys setting).
    static func readNumber(_ path: String) -> UInt64? {
        guard let descriptor = try? openAt(AT_FDCWD, path, O_RDONLY) else { return nil }
        var bytes = [UInt8](repeating: 0, count: 32)
        let count = bytes.withUnsafeMutableBytes { Glibc.read(descriptor.raw, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        return UInt64(String(decoding: bytes[0..<count].prefix { $0 >= 48 && $0 <= 57 }, as: UTF8.self))
    }

    /// Raises the descriptor limit as far as the process may: every node the kernel remembers
    /// holds one, so a tree of a million files needs a million. Root may lift the hard limit up
    /// to the kernel's nr_open; others get their hard limit.
    public static func raiseDescriptorLimit() {
        var limit = rlimit()
        guard Glibc.getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
        if Glibc.geteuid() == 0, let ceiling = readNumber("/proc/sys/fs/nr_open") {
            limit.rlim_max = max(limit.rlim_max, rlim_t(ceiling))
        }
        limit.rlim_cur = limit.rlim_max
        if Glibc.setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) != 0 {
            _ = Glibc.getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            limit.rlim_cur = limit.rlim_max
            _ = Glibc.setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
    }
}
