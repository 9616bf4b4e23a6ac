import CSystemCalls
import Glibc
import SystemPackage

/// The system calls of the watch of the backing (inotify, fanotify, the wake-up eventfd),
/// typed as the rest of `Syscall`.
extension Syscall {
    public static func inotifyInit() throws(Errno) -> OwnedDescriptor {
        OwnedDescriptor(adopting: try check(csys_inotify_init1(Int32(CSYS_IN_CLOEXEC | CSYS_IN_NONBLOCK))))
    }

    /// The watch descriptor for the directory open as `directory` (named through /proc, so no
    /// path is looked up twice); the same one again for a directory watched already.
    public static func inotifyWatch(_ inotify: Int32, directory: Int32, mask: UInt32) throws(Errno) -> Int32 {
        try withDescriptorPath(directory, prefix: "/proc/self/fd/") { (path) throws(Errno) -> Int32 in
            try check(csys_inotify_add_watch(inotify, path, mask))
        }
    }

    public static func inotifyRemoveWatch(_ inotify: Int32, _ watch: Int32) {
        _ = csys_inotify_rm_watch(inotify, watch)
    }

    public static func fanotifyInit(flags: UInt32, eventFlags: UInt32) throws(Errno) -> OwnedDescriptor {
        OwnedDescriptor(adopting: try check(csys_fanotify_init(flags, eventFlags)))
    }

    /// Adds `mask` to (or removes it from) the inode mark of the object open as `object`.
    public static func fanotifyMark(_ fanotify: Int32, flags: UInt32, mask: UInt64, object: Int32) throws(Errno) {
        _ = try check(csys_fanotify_mark(fanotify, flags, mask, object, nil))
    }

    /// The file handle of the object open as `object` (name_to_handle_at with AT_EMPTY_PATH):
    /// its type (4 bytes, native order) then its bytes, as fanotify's records carry them.
    public static func fileHandle(of object: Int32) throws(Errno) -> [UInt8] {
        var storage = [UInt8](repeating: 0, count: 8 + Int(CSYS_MAX_HANDLE_SZ))
        var mountID: Int32 = 0
        let result = storage.withUnsafeMutableBytes { raw in
            csys_name_to_handle_at(object, "", raw.baseAddress, &mountID, Linux.AT_EMPTY_PATH)
        }
        _ = try check(result)
        let count = storage.withUnsafeBytes { Int($0.loadUnaligned(as: UInt32.self)) }
        return Array(storage[4..<(8 + count)])
    }

    /// Opens the object a handle from `fileHandle(of:)` names, on the filesystem of `mount`
    /// (needs CAP_DAC_READ_SEARCH); ESTALE once the object is gone.
    public static func open(handle: [UInt8], on mount: Int32, flags: Int32) throws(Errno) -> OwnedDescriptor {
        var storage = [UInt8](repeating: 0, count: 4) + handle
        storage.withUnsafeMutableBytes { $0.storeBytes(of: UInt32(handle.count - 4), as: UInt32.self) }
        let fd = storage.withUnsafeMutableBytes { csys_open_by_handle_at(mount, $0.baseAddress, flags | O_CLOEXEC) }
        return OwnedDescriptor(adopting: try check(fd))
    }

    /// The filesystem id of the object open as `object`, as fanotify's records carry it.
    public static func filesystemID(of object: Int32) throws(Errno) -> UInt64 {
        var id: UInt64 = 0
        _ = try check(csys_filesystem_id(object, &id))
        return id
    }

    public static func eventCounter() throws(Errno) -> OwnedDescriptor {
        OwnedDescriptor(adopting: try check(csys_eventfd(0, Int32(CSYS_EFD_CLOEXEC | CSYS_EFD_NONBLOCK))))
    }

    /// Waits until one of `descriptors` is readable (or hung up); returns which, by index.
    /// `timeout` in milliseconds, -1 for none.
    public static func waitReadable(_ descriptors: [Int32], timeout: Int32) throws(Errno) -> [Int] {
        var polled = descriptors.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        _ = try retrying { Int32(Glibc.poll(&polled, nfds_t(polled.count), timeout)) }
        return polled.indices.filter { polled[$0].revents != 0 }
    }

    /// One read into `buffer`; 0 when nothing is ready (EAGAIN) and at end of file.
    public static func readAvailable(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int {
        do {
            return try retrying { Glibc.read(fd, buffer.baseAddress, buffer.count) }
        } catch .resourceTemporarilyUnavailable {
            return 0
        }
    }
}
