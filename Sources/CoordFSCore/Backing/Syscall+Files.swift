import CSystemCalls
import Glibc
import SystemPackage

// Files and descriptors: opening (named, unnamed, afresh through /proc/self/fd), duplicating,
// and the data calls on an open file.
extension Syscall {
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

    /// A second descriptor of the same open file (shared offset and flags), close-on-exec.
    public static func duplicate(_ fd: Int32) throws(Errno) -> OwnedDescriptor {
        OwnedDescriptor(adopting: try check(Glibc.fcntl(fd, F_DUPFD_CLOEXEC, 0)))
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
}
