import CFuse
import Glibc
import CoordFSCore
import SystemPackage

// The four xattr calls. O_PATH descriptors cannot carry xattr calls, so they go to the
// node's `/proc/self/fd/N` path, which names the very object the node holds.
// Symlinks: that path would follow the link, and Linux allows no user xattrs on symlinks;
// they report no attributes and refuse new ones, as the bare disk does for user.*.

extension FileSystem {
    func getxattr(_ request: fuse_req_t, _ id: fuse_ino_t, _ name: UnsafePointer<CChar>, _ size: Int) {
        do throws(Errno) {
            let node = try node(id)
            if node.isSymlink { throw Errno.noData }
            if size == 0 {
                let needed = try withProcessPath(of: node) { (path) throws(Errno) -> Int in
                    try Syscall.getExtendedAttribute(path, name, into: UnsafeMutableRawBufferPointer(start: nil, count: 0), followLinks: true)
                }
                fuse_reply_xattr(request, needed)
                return
            }
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 1)
            defer { buffer.deallocate() }
            let length = try withProcessPath(of: node) { (path) throws(Errno) -> Int in
                try Syscall.getExtendedAttribute(path, name, into: buffer, followLinks: true)
            }
            fuse_reply_buf(request, buffer.baseAddress?.assumingMemoryBound(to: CChar.self), length)
        } catch {
            reply(request, error: error)
        }
    }

    func listxattr(_ request: fuse_req_t, _ id: fuse_ino_t, _ size: Int) {
        do throws(Errno) {
            let node = try node(id)
            if node.isSymlink {
                if size == 0 { fuse_reply_xattr(request, 0) } else { fuse_reply_buf(request, nil, 0) }
                return
            }
            if size == 0 {
                let needed = try withProcessPath(of: node) { (path) throws(Errno) -> Int in
                    try Syscall.listExtendedAttributes(path, into: UnsafeMutableRawBufferPointer(start: nil, count: 0), followLinks: true)
                }
                fuse_reply_xattr(request, needed)
                return
            }
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 1)
            defer { buffer.deallocate() }
            let length = try withProcessPath(of: node) { (path) throws(Errno) -> Int in
                try Syscall.listExtendedAttributes(path, into: buffer, followLinks: true)
            }
            fuse_reply_buf(request, buffer.baseAddress?.assumingMemoryBound(to: CChar.self), length)
        } catch {
            reply(request, error: error)
        }
    }

    func setxattr(_ request: fuse_req_t, _ id: fuse_ino_t, _ name: UnsafePointer<CChar>, _ value: UnsafePointer<CChar>?, _ size: Int, _ flags: Int32) {
        do throws(Errno) {
            let node = try node(id)
            if node.isSymlink { throw Errno.notPermitted }
            try withProcessPath(of: node) { (path) throws(Errno) in
                try Syscall.setExtendedAttribute(path, name, UnsafeRawBufferPointer(start: value, count: size), flags: flags, followLinks: true)
            }
            replyOK(request)
        } catch {
            reply(request, error: error)
        }
    }

    func removexattr(_ request: fuse_req_t, _ id: fuse_ino_t, _ name: UnsafePointer<CChar>) {
        do throws(Errno) {
            let node = try node(id)
            if node.isSymlink { throw Errno.noData }
            try withProcessPath(of: node) { (path) throws(Errno) in
                try Syscall.removeExtendedAttribute(path, name, followLinks: true)
            }
            replyOK(request)
        } catch {
            reply(request, error: error)
        }
    }
}
