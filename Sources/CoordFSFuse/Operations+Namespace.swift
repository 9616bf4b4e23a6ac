import CFuse
import Glibc
import CoordFSCore
import SystemPackage

// Operations that add, remove or move names: mknod, mkdir, symlink, link, unlink, rmdir, rename.

extension FileSystem {
    /// Creates something at `parent`/`name` with `make`, hands it to the caller, and replies with its entry.
    private func replyWithNewEntry(_ request: fuse_req_t, _ parentID: fuse_ino_t, _ name: UnsafePointer<CChar>, mode: mode_t,
                                   _ make: (_ parent: Node) throws(Errno) -> Void) {
        do throws(Errno) {
            let parent = try node(parentID)
            try make(parent)
            try giveToCaller(request, parent: parent, name: name, mode: mode)
            var entry = try lookUp(parent, name)
            fuse_reply_entry(request, &entry)
        } catch {
            reply(request, error: error)
        }
    }

    func mknod(_ request: fuse_req_t, _ parent: fuse_ino_t, _ name: UnsafePointer<CChar>, _ mode: mode_t, _ device: dev_t) {
        replyWithNewEntry(request, parent, name, mode: mode) { (parent) throws(Errno) in
            try Syscall.makeNode(at: parent.descriptor.raw, name, mode, device)
        }
    }

    func mkdir(_ request: fuse_req_t, _ parent: fuse_ino_t, _ name: UnsafePointer<CChar>, _ mode: mode_t) {
        replyWithNewEntry(request, parent, name, mode: mode | S_IFDIR) { (parent) throws(Errno) in
            try Syscall.makeDirectory(at: parent.descriptor.raw, name, mode)
        }
    }

    func symlink(_ request: fuse_req_t, _ target: UnsafePointer<CChar>, _ parent: fuse_ino_t, _ name: UnsafePointer<CChar>) {
        replyWithNewEntry(request, parent, name, mode: S_IFLNK) { (parent) throws(Errno) in
            try Syscall.makeSymlink(target: target, at: parent.descriptor.raw, name)
        }
    }

    func link(_ request: fuse_req_t, _ id: fuse_ino_t, _ newParent: fuse_ino_t, _ newName: UnsafePointer<CChar>) {
        do throws(Errno) {
            let node = try node(id)
            let parent = try self.node(newParent)
            let directory = processDescriptors.raw
            try withProcessName(of: node) { (source) throws(Errno) in
                try Syscall.link(directory, source, to: parent.descriptor.raw, newName, flags: AT_SYMLINK_FOLLOW)
            }
            var entry = try lookUp(parent, newName)
            fuse_reply_entry(request, &entry)
        } catch {
            reply(request, error: error)
        }
    }

    func unlink(_ request: fuse_req_t, _ parent: fuse_ino_t, _ name: UnsafePointer<CChar>, flags: Int32) {
        do throws(Errno) {
            let parent = try node(parent)
            let status = try Syscall.stat(at: parent.descriptor.raw, name)
            try Syscall.unlink(at: parent.descriptor.raw, name, flags: flags)
            let remaining = (status.st_mode & S_IFMT) == S_IFDIR ? 0 : UInt64(status.st_nlink) - 1
            nodes.removedName(FileIdentity(status), parent: parent, name: String(cString: name), remainingLinks: remaining)
            replyOK(request)
        } catch {
            reply(request, error: error)
        }
    }

    func rename(_ request: fuse_req_t, _ parent: fuse_ino_t, _ name: UnsafePointer<CChar>,
                _ newParent: fuse_ino_t, _ newName: UnsafePointer<CChar>, _ flags: UInt32) {
        do throws(Errno) {
            let source = try node(parent)
            let destination = try node(newParent)
            let moving = try Syscall.stat(at: source.descriptor.raw, name)
            let replaced: stat? = try? Syscall.stat(at: destination.descriptor.raw, newName)
            try Syscall.rename(source.descriptor.raw, name, to: destination.descriptor.raw, newName, flags: flags)

            let sourceName = String(cString: name)
            let destinationName = String(cString: newName)
            if let replaced, FileIdentity(replaced) != FileIdentity(moving) {
                if flags & Linux.RENAME_EXCHANGE != 0 {
                    nodes.moved(FileIdentity(replaced), to: source, name: sourceName)
                } else {
                    let remaining = (replaced.st_mode & S_IFMT) == S_IFDIR ? 0 : UInt64(replaced.st_nlink) - 1
                    nodes.removedName(FileIdentity(replaced), parent: destination, name: destinationName, remainingLinks: remaining)
                }
            }
            nodes.moved(FileIdentity(moving), to: destination, name: destinationName)
            replyOK(request)
        } catch {
            reply(request, error: error)
        }
    }
}
