import CSystemCalls
import Glibc
import SystemPackage

// Names and directories: making, linking, removing and renaming names (by C string or by
// `FileName`), reading symlinks, and listing directories.
extension Syscall {
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
}
