import Glibc
import SystemPackage

/// Copies a committed file's contents into its temp, the cheapest way the filesystem allows:
/// a reflink (`FICLONE`: no data is copied at all), else `copy_file_range` (the kernel copies,
/// and may offload to the device or server; on a filesystem with reflinks it clones too), else
/// plain reads and writes.
///
/// Holes may be filled in (a sparse file can come out dense); huge sparse files belong to the
/// in-place policy anyway. Offsets are always explicit, so neither descriptor's file position moves.
enum ContentCopy {
    enum Method: String, Sendable {
        case clone
        case copyRange
        case readWrite
    }

    /// Copies all of `source` into the empty `destination`; returns the method that did it.
    @discardableResult
    static func copy(from source: Int32, to destination: Int32) throws(Errno) -> Method {
        do throws(Errno) {
            try Syscall.cloneContents(of: source, into: destination)
            return .clone
        } catch where cannotClone(error) {
            // fall through to copy_file_range
        }
        var offset: off_t = 0
        do throws(Errno) {
            try copyByRanges(from: source, to: destination, offset: &offset)
            // Some filesystems (and older kernels on special files) answer 0 before the end;
            // what is left, if anything, goes the plain way.
            if offset >= (try Syscall.stat(source).st_size) { return .copyRange }
        } catch where cannotCopyRange(error) {
            // fall through to reading and writing, from where copy_file_range stopped
        }
        try copyByReading(from: source, to: destination, offset: offset)
        return .readWrite
    }

    /// `copy_file_range` from `offset` until it reports the end; `offset` tells how far it got.
    static func copyByRanges(from source: Int32, to destination: Int32, offset: inout off_t) throws(Errno) {
        let chunk = 1 << 30 // large calls: the kernel copies in its own units and returns early if it must
        while true {
            let copied = try Syscall.copyRange(from: source, at: offset, to: destination, at: offset, length: chunk, flags: 0)
            if copied == 0 { return }
            offset += off_t(copied)
        }
    }

    /// `pread`/`pwrite` from `offset` to the end, through one 1 MiB buffer.
    static func copyByReading(from source: Int32, to destination: Int32, offset start: off_t) throws(Errno) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 4096)
        defer { buffer.deallocate() }
        var offset = start
        while true {
            let count = try Syscall.read(source, into: buffer, at: offset)
            if count == 0 { return }
            var written = 0
            while written < count {
                let chunk = UnsafeRawBufferPointer(rebasing: buffer[written..<count])
                written += try Syscall.write(destination, from: chunk, at: offset + off_t(written))
            }
            offset += off_t(count)
        }
    }

    /// Errors by which FICLONE says "not here" rather than "failed": no reflinks on this
    /// filesystem (EOPNOTSUPP; ENOTTY where the ioctl is unknown; EINVAL on some), two
    /// filesystems (EXDEV), no such call (ENOSYS).
    static func cannotClone(_ error: Errno) -> Bool {
        cannotCopyRange(error) || error.rawValue == ENOTTY
    }

    /// Errors by which copy_file_range says "not here": unsupported for these files or this
    /// kernel, or across filesystems (kernels from 5.19 refuse most cross-filesystem copies).
    static func cannotCopyRange(_ error: Errno) -> Bool {
        switch error.rawValue {
        case EOPNOTSUPP, EXDEV, EINVAL, ENOSYS: return true
        default: return false
        }
    }
}
