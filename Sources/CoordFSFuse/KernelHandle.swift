import CFuse

/// An object whose address travels in `fuse_file_info.fh`: retained when the kernel gets it
/// (open, create, opendir), borrowed by each request on the handle, released at release.
protocol KernelHandle: AnyObject {}

extension KernelHandle {
    /// Stores a retained reference in the request's file info.
    func attach(to file: UnsafeMutablePointer<fuse_file_info>) {
        file.pointee.fh = UInt64(UInt(bitPattern: Unmanaged.passRetained(self).toOpaque()))
    }

    /// The handle the kernel refers to, without taking ownership.
    @inline(__always)
    static func borrow(_ file: UnsafePointer<fuse_file_info>) -> Self? {
        guard let pointer = UnsafeRawPointer(bitPattern: UInt(file.pointee.fh)) else { return nil }
        return Unmanaged<Self>.fromOpaque(pointer).takeUnretainedValue()
    }

    /// Gives back the reference taken at attach; the handle goes when its last user is done.
    static func detach(_ file: UnsafeMutablePointer<fuse_file_info>) {
        _ = take(file)
    }

    /// Takes back the reference taken at attach, for a last use before it goes.
    static func take(_ file: UnsafeMutablePointer<fuse_file_info>) -> Self? {
        guard let pointer = UnsafeRawPointer(bitPattern: UInt(file.pointee.fh)) else { return nil }
        file.pointee.fh = 0
        return Unmanaged<Self>.fromOpaque(pointer).takeRetainedValue()
    }
}
