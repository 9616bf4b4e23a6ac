import CFuse
import Glibc
import CoordFSCore
import CoordFSProtocol
import SystemPackage

// The four xattr calls. O_PATH descriptors cannot carry xattr calls, so they go to the
// node's `/proc/self/fd/N` path, which names the very object the node holds. A symlink's
// own path would follow the link: its calls go to its name in its directory
// (`/proc/self/fd/DIR/NAME`) without following it, so the backing decides as it does on a
// plain disk (ext4 refuses user.* on symlinks, and takes trusted.* and security.*).

// Every item also answers `user.coordfs.control` (not listed, not settable): the mount's
// control socket and the item's path inside the mount, which is how clients find the socket
// from nothing but a path (Docs/PROTOCOL.md, "Finding the socket").

/// Whether a NUL-terminated attribute name is exactly `ControlLocation.attributeName`.
/// Attribute names are bytes: compared byte for byte, never decoded.
@inline(__always)
func isControlAttribute(_ name: UnsafePointer<CChar>) -> Bool {
    ControlLocation.attributeName.withCString { strcmp(name, $0) == 0 }
}

extension FileSystem {
    func getxattr(_ request: fuse_req_t, _ id: fuse_ino_t, _ name: UnsafePointer<CChar>, _ size: Int) {
        do throws(Errno) {
            let node = try node(id)
            if !node.isSymlink, let location = try controlLocation(of: node, asked: name) {
                if size == 0 {
                    fuse_reply_xattr(request, location.count)
                } else if size < location.count {
                    throw Errno.outOfRange
                } else {
                    location.withUnsafeBufferPointer { bytes in
                        _ = bytes.withMemoryRebound(to: CChar.self) { fuse_reply_buf(request, $0.baseAddress, $0.count) }
                    }
                }
                return
            }
            // The owner of a save reads its own version's attributes, as it sets them there.
            let reader = activity.hasSaves ? owner(of: request) : nil
            if size == 0 {
                let needed = try withAttributePath(of: node, owner: reader) { (path, follow) throws(Errno) -> Int in
                    try Syscall.getExtendedAttribute(path, name, into: UnsafeMutableRawBufferPointer(start: nil, count: 0), followLinks: follow)
                }
                fuse_reply_xattr(request, needed)
                return
            }
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 1)
            defer { buffer.deallocate() }
            let length = try withAttributePath(of: node, owner: reader) { (path, follow) throws(Errno) -> Int in
                try Syscall.getExtendedAttribute(path, name, into: buffer, followLinks: follow)
            }
            fuse_reply_buf(request, buffer.baseAddress?.assumingMemoryBound(to: CChar.self), length)
        } catch {
            reply(request, error: error)
        }
    }

    func listxattr(_ request: fuse_req_t, _ id: fuse_ino_t, _ size: Int) {
        do throws(Errno) {
            let node = try node(id)
            let reader = activity.hasSaves ? owner(of: request) : nil
            if size == 0 {
                let needed = try withAttributePath(of: node, owner: reader) { (path, follow) throws(Errno) -> Int in
                    try Syscall.listExtendedAttributes(path, into: UnsafeMutableRawBufferPointer(start: nil, count: 0), followLinks: follow)
                }
                fuse_reply_xattr(request, needed)
                return
            }
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 1)
            defer { buffer.deallocate() }
            let length = try withAttributePath(of: node, owner: reader) { (path, follow) throws(Errno) -> Int in
                try Syscall.listExtendedAttributes(path, into: buffer, followLinks: follow)
            }
            fuse_reply_buf(request, buffer.baseAddress?.assumingMemoryBound(to: CChar.self), length)
        } catch {
            reply(request, error: error)
        }
    }

    func setxattr(_ request: fuse_req_t, _ id: fuse_ino_t, _ name: UnsafePointer<CChar>, _ value: UnsafePointer<CChar>?, _ size: Int, _ flags: Int32) {
        if isControlAttribute(name) { return reply(request, error: .notPermitted) }
        // Name and value as bytes, for when the claim is granted (after this returns).
        let attribute = copyCString(name)
        let bytes = Array(UnsafeRawBufferPointer(start: value, count: size))
        changeExtendedAttributes(request, id) { [self] (node, owner) throws(Errno) in
            try withAttributePath(of: node, owner: owner) { (path, follow) throws(Errno) in
                try attribute.withUnsafeBufferPointer { (attribute) -> Result<Void, Errno> in
                    bytes.withUnsafeBytes { (raw) -> Result<Void, Errno> in
                        Result { () throws(Errno) in
                            try Syscall.setExtendedAttribute(path, attribute.baseAddress!, raw, flags: flags, followLinks: follow)
                        }
                    }
                }.get()
            }
        }
    }

    func removexattr(_ request: fuse_req_t, _ id: fuse_ino_t, _ name: UnsafePointer<CChar>) {
        if isControlAttribute(name) { return reply(request, error: .notPermitted) }
        let attribute = copyCString(name)
        changeExtendedAttributes(request, id) { [self] (node, owner) throws(Errno) in
            try withAttributePath(of: node, owner: owner) { (path, follow) throws(Errno) in
                try attribute.withUnsafeBufferPointer { (attribute) -> Result<Void, Errno> in
                    Result { () throws(Errno) in try Syscall.removeExtendedAttribute(path, attribute.baseAddress!, followLinks: follow) }
                }.get()
            }
        }
    }

    /// Runs an xattr change coordinated as the operation table says, then reports it.
    private func changeExtendedAttributes(_ request: fuse_req_t, _ id: fuse_ino_t, _ change: @escaping @Sendable (Node, ClaimOwner) throws(Errno) -> Void) {
        let node: Node
        do throws(Errno) { node = try self.node(id) } catch { return reply(request, error: error) }
        let item = NamedPath(node, in: nodes)
        let path = item.resolved
        let pending = PendingRequest(raw: request)
        coordinated(request, .changeExtendedAttributes, .item(item)) { [self] origin in
            do throws(Errno) {
                let requester = ClaimOwner.process(origin.pid)
                try change(node, requester)
                // The owner's change went to its save; anyone else's (by another name) to the committed file.
                if let save = activity.save(of: node), save.owner != requester { save.committedFileChangedThroughMount() }
                mount.publish(.attributes, origin: origin, path: path, isDirectory: node.isDirectory, size: nil)
                replyOK(pending.raw)
            } catch {
                reply(pending.raw, error: error)
            }
        }
    }

    /// The path xattr calls of `owner` go to: the owner's pending version of a file it is
    /// saving (changes commit with it, reads see them), else the node's backing object.
    private func withAttributePath<R>(of node: Node, owner: ClaimOwner?,
                                      _ body: (UnsafePointer<CChar>, _ followLinks: Bool) throws(Errno) -> R) throws(Errno) -> R {
        if let owner, activity.hasSaves, let save = activity.save(of: node), save.owner == owner {
            let current = save.current
            return try withExtendedLifetime(current) { () throws(Errno) -> R in
                try Syscall.withDescriptorPath(current.raw, prefix: "/proc/self/fd/") { (path) throws(Errno) -> R in try body(path, true) }
            }
        }
        return try withAttributeTarget(of: node, body)
    }

    /// The path xattr calls on `node` go to, and whether they follow a link there: the node's
    /// `/proc/self/fd/N` for everything but symlinks, a symlink's name in its directory (not followed).
    private func withAttributeTarget<R>(of node: Node, _ body: (UnsafePointer<CChar>, _ followLinks: Bool) throws(Errno) -> R) throws(Errno) -> R {
        guard node.isSymlink else { return try withProcessPath(of: node) { (path) throws(Errno) -> R in try body(path, true) } }
        guard let (directory, name) = nodes.location(of: node) else { throw .noSuchFileOrDirectory }
        var path = Array("/proc/self/fd/\(directory.directory)/".utf8)
        path += name.bytes
        path.append(0)
        return try withExtendedLifetime(directory) { () throws(Errno) -> R in
            try path.withUnsafeBytes { (raw) -> Result<R, Errno> in
                Result { () throws(Errno) -> R in try body(raw.baseAddress!.assumingMemoryBound(to: CChar.self), false) }
            }.get()
        }
    }
}

extension FileSystem {
    /// The value of `user.coordfs.control` for `node` when that is the attribute asked for
    /// and the mount serves a socket: a `ControlLocation`'s value (the path's bytes exact, as
    /// on the wire). An item that has no name any more (unlinked) is ENOENT, as a path to it would be.
    fileprivate func controlLocation(of node: Node, asked name: UnsafePointer<CChar>) throws(Errno) -> [UInt8]? {
        guard let socket = options.controlSocket, isControlAttribute(name) else { return nil }
        guard let path = nodes.path(of: node) else { throw .noSuchFileOrDirectory }
        guard let value = try? ControlLocation(socket: socket, path: path.filePath).attributeValue() else { throw .ioError }
        return value
    }
}
