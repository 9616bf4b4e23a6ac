import Glibc
import SystemPackage

/// A file descriptor this process owns: closed exactly once, when the value goes away.
///
/// Noncopyable so that ownership is visible in the types: whoever holds it closes it,
/// and a `borrowing` use can never outlive it.
public struct OwnedDescriptor: ~Copyable, @unchecked Sendable {
    /// The raw descriptor, valid for as long as this value lives.
    public let raw: Int32

    public init(adopting raw: Int32) {
        self.raw = raw
    }

    /// Hands the raw descriptor to a new owner without closing it.
    public consuming func release() -> Int32 {
        let raw = self.raw
        discard self
        return raw
    }

    deinit {
        Glibc.close(raw)
    }
}

/// The identity of a backing object: device and inode, as `stat` reports them.
public struct FileIdentity: Hashable, Sendable {
    public let device: UInt64
    public let inode: UInt64

    public init(device: UInt64, inode: UInt64) {
        self.device = device
        self.inode = inode
    }

    public init(_ status: stat) {
        self.init(device: UInt64(status.st_dev), inode: UInt64(status.st_ino))
    }
}

extension Errno {
    /// The calling thread's current `errno`, typed.
    @inlinable public static var current: Errno { Errno(rawValue: Glibc.errno) }
}
