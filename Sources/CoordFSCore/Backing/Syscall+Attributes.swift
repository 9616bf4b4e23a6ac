import CSystemCalls
import Glibc
import SystemPackage

// Attributes: stat, mode, owner, size, times and access of an object, and its extended
// attributes by path or by descriptor.
extension Syscall {
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
}
