import CFuse
import Glibc
import CoordFSCore
import SystemPackage

// Lookups, forgets and attributes: the operations that name no data.

extension FileSystem {
    func lookup(_ request: fuse_req_t, _ parent: fuse_ino_t, _ name: UnsafePointer<CChar>) {
        do throws(Errno) {
            var entry = try lookUp(try node(parent), name)
            fuse_reply_entry(request, &entry)
        } catch .noSuchFileOrDirectory {
            var entry = negativeEntry()
            fuse_reply_entry(request, &entry)
        } catch {
            reply(request, error: error)
        }
    }

    func forget(_ id: fuse_ino_t, _ count: UInt64) {
        nodes.forget(UInt64(id), count: count)
    }

    func getattr(_ request: fuse_req_t, _ id: fuse_ino_t, _ file: UnsafeMutablePointer<fuse_file_info>?) {
        do throws(Errno) {
            var status: stat
            if let file, let handle = OpenFile.borrow(file) {
                status = try Syscall.stat(handle.descriptor.raw)
            } else {
                status = try attributes(of: try node(id))
            }
            fuse_reply_attr(request, &status, options.attributeTimeout)
        } catch {
            reply(request, error: error)
        }
    }

    func setattr(_ request: fuse_req_t, _ id: fuse_ino_t, _ wanted: UnsafeMutablePointer<stat>, _ fields: Int32, _ file: UnsafeMutablePointer<fuse_file_info>?) {
        do throws(Errno) {
            let node = try node(id)
            let handle = file.flatMap { OpenFile.borrow($0) }
            let wanted = wanted.pointee

            if fields & FUSE_SET_ATTR_MODE != 0 {
                if let handle {
                    try Syscall.changeMode(handle.descriptor.raw, wanted.st_mode)
                } else {
                    let directory = processDescriptors.raw
                    try withProcessName(of: node) { (name) throws(Errno) in
                        try Syscall.changeMode(at: directory, name, wanted.st_mode)
                    }
                }
            }
            if fields & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID) != 0 {
                let uid = fields & FUSE_SET_ATTR_UID != 0 ? wanted.st_uid : uid_t.max
                let gid = fields & FUSE_SET_ATTR_GID != 0 ? wanted.st_gid : gid_t.max
                try Syscall.changeOwner(at: node.descriptor.raw, "", uid, gid, flags: Linux.AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW)
            }
            if fields & FUSE_SET_ATTR_SIZE != 0 {
                if let handle {
                    try Syscall.truncate(handle.descriptor.raw, wanted.st_size)
                } else {
                    let writable = try reopen(node, flags: O_WRONLY)
                    try Syscall.truncate(writable.raw, wanted.st_size)
                }
            }
            if fields & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME) != 0 {
                let omit = timespec(tv_sec: 0, tv_nsec: Linux.UTIME_OMIT)
                let now = timespec(tv_sec: 0, tv_nsec: Linux.UTIME_NOW)
                var accessTime = omit
                var modificationTime = omit
                if fields & FUSE_SET_ATTR_ATIME_NOW != 0 { accessTime = now }
                else if fields & FUSE_SET_ATTR_ATIME != 0 { accessTime = wanted.st_atim }
                if fields & FUSE_SET_ATTR_MTIME_NOW != 0 { modificationTime = now }
                else if fields & FUSE_SET_ATTR_MTIME != 0 { modificationTime = wanted.st_mtim }
                if let handle {
                    try Syscall.setTimes(handle.descriptor.raw, (accessTime, modificationTime))
                } else {
                    try Syscall.setTimes(at: node.descriptor.raw, "", (accessTime, modificationTime), flags: Linux.AT_EMPTY_PATH)
                }
            }

            var status: stat
            if let handle {
                status = try Syscall.stat(handle.descriptor.raw)
            } else {
                status = try attributes(of: node)
            }
            fuse_reply_attr(request, &status, options.attributeTimeout)
        } catch {
            reply(request, error: error)
        }
    }

    func readlink(_ request: fuse_req_t, _ id: fuse_ino_t) {
        do throws(Errno) {
            let target = try Syscall.readLink(at: try node(id).descriptor.raw, "")
            target.withUnsafeBufferPointer { _ = fuse_reply_readlink(request, $0.baseAddress) }
        } catch {
            reply(request, error: error)
        }
    }

    func access(_ request: fuse_req_t, _ id: fuse_ino_t, _ mask: Int32) {
        do throws(Errno) {
            try Syscall.access(at: try node(id).descriptor.raw, "", mask, flags: Linux.AT_EMPTY_PATH | AT_EACCESS)
            replyOK(request)
        } catch {
            reply(request, error: error)
        }
    }

    func statfs(_ request: fuse_req_t, _ id: fuse_ino_t) {
        do throws(Errno) {
            var result = try Syscall.statfs(try node(id).descriptor.raw)
            fuse_reply_statfs(request, &result)
        } catch {
            reply(request, error: error)
        }
    }
}
