import Glibc
import SystemPackage

/// Gives a temp file the metadata its target has (or a new file the metadata it was asked for),
/// so that the commit changes the contents and nothing else: owner, extended attributes
/// (POSIX ACLs and `security.*` included) and mode with its set-id bits.
///
/// Order matters, and is the one below: the contents are copied before any of this (writing
/// to a file drops `security.capability`, and set-id bits for writers without CAP_FSETID);
/// the owner goes first (chown clears set-id bits); the attributes next (setting an access ACL
/// rewrites the group permission bits); the mode last, which puts every bit where the target
/// had it (chmod sets the ACL mask from the group bits, which on the target match its mask).
/// Times are not carried over: a save is a modification.
enum MetadataCopy {
    static let accessACL = "system.posix_acl_access"

    /// Carries owner, extended attributes and mode from `source` (the committed file, with
    /// `status` its fstat) to `temp`.
    static func carryOver(from source: Int32, status: stat, to temp: Int32) throws(Errno) {
        try carryOverOwner(status, to: temp)
        try carryOverExtendedAttributes(from: source, to: temp)
        try Syscall.changeMode(temp, status.st_mode & 0o7777)
    }

    /// Sets owner and set-id bits of a new file's temp. Its permission bits are the ones its
    /// creation gave it (the mode asked, less the creating thread's umask, or as the
    /// directory's default ACL has them instead): as on a plain disk, they stay.
    static func apply(owner: (uid_t, gid_t)?, mode: mode_t, to temp: Int32) throws(Errno) {
        if let owner, geteuid() == 0 {
            try Syscall.changeOwner(temp, owner.0, owner.1)
        }
        try addSpecialModeBits(of: mode, to: temp)
    }

    /// Adds `mode`'s set-id and sticky bits, which creation leaves out, to what `file` has.
    static func addSpecialModeBits(of mode: mode_t, to file: Int32) throws(Errno) {
        let setID = mode & 0o7000
        guard setID != 0 else { return }
        let current = try Syscall.stat(file).st_mode & 0o7777
        if current | setID != current { try Syscall.changeMode(file, current | setID) }
    }

    /// Root gives the temp the target's owner and group. Others cannot give files away; they
    /// try the group alone (allowed when they belong to it, as `cp -p` does) and let it go if refused.
    static func carryOverOwner(_ status: stat, to temp: Int32) throws(Errno) {
        let current = try Syscall.stat(temp)
        if current.st_uid == status.st_uid && current.st_gid == status.st_gid { return }
        if geteuid() == 0 {
            try Syscall.changeOwner(temp, status.st_uid, status.st_gid)
        } else if current.st_gid != status.st_gid {
            do throws(Errno) {
                try Syscall.changeOwner(temp, uid_t.max, status.st_gid) // -1: keep the owner
            } catch where error.rawValue == EPERM {
                // not a member of that group: the temp keeps the daemon's
            }
        }
    }

    /// Copies every extended attribute the source has. Attributes the temp's filesystem or
    /// security module refuses (ENOTSUP, EPERM, EACCES: a namespace it does not support, a
    /// label the policy will not assign) are skipped, the save is worth more than they are;
    /// any other failure (ENOSPC, EDQUOT, EIO) fails the staging.
    static func carryOverExtendedAttributes(from source: Int32, to temp: Int32) throws(Errno) {
        let names = try listedNames(source)
        var sourceHasAccessACL = false
        for name in names {
            let isAccessACL = name.dropLast().elementsEqual(accessACL.utf8) { UInt8(bitPattern: $0) == $1 } // names are bytes
            let value: [UInt8]
            do throws(Errno) {
                value = try ExtendedAttributes.value(of: source, name)
            } catch where error.rawValue == ENODATA || error.rawValue == ENOTSUP {
                continue // removed meanwhile, or unreadable here
            }
            if isAccessACL { sourceHasAccessACL = true }
            do throws(Errno) {
                try value.withUnsafeBytes { bytes in
                    Result { () throws(Errno) in try Syscall.setExtendedAttribute(temp, name, bytes, flags: 0) }
                }.get()
            } catch where isRefusal(error) {
                continue
            }
        }
        // A directory with a default ACL gave the temp an access ACL at creation; a target
        // without one must not gain it on commit.
        if !sourceHasAccessACL && hasAttribute(temp, accessACL) {
            do throws(Errno) {
                try Syscall.removeExtendedAttribute(temp, accessACL)
            } catch where error.rawValue == ENODATA || isRefusal(error) {
            }
        }
    }

    /// The attribute names `fd` has, each NUL-terminated; none where attributes are not supported.
    static func listedNames(_ fd: Int32) throws(Errno) -> [[CChar]] {
        let list: [CChar]
        do throws(Errno) {
            list = try ExtendedAttributes.list(fd)
        } catch where error.rawValue == ENOTSUP {
            return []
        }
        return list.split(separator: 0).map { Array($0) + [0] }
    }

    static func isRefusal(_ error: Errno) -> Bool {
        switch error.rawValue {
        case ENOTSUP, EPERM, EACCES: return true
        default: return false
        }
    }

    static func hasAttribute(_ fd: Int32, _ name: String) -> Bool {
        ((try? ExtendedAttributes.size(of: fd, name)) ?? 0) > 0
    }
}

/// Whole extended attribute lists and values read from a descriptor, sized by asking first
/// and growing when the attribute grew in between (ERANGE).
///
/// Descriptors opened `O_PATH` (how the node table holds directories) carry no extended
/// attributes (EBADF); for those the calls go to `/proc/self/fd/N`, which names the same object.
enum ExtendedAttributes {
    /// The NUL-separated list of attribute names, as flistxattr returns it.
    static func list(_ fd: Int32) throws(Errno) -> [CChar] {
        let bytes = try readWhole { (buffer) throws(Errno) -> Int in
            do throws(Errno) {
                return try Syscall.listExtendedAttributes(fd, into: buffer)
            } catch where error.rawValue == EBADF {
                return try withProcessPath(fd) { (path) throws(Errno) -> Int in
                    try Syscall.listExtendedAttributes(path, into: buffer, followLinks: true)
                }
            }
        }
        return bytes.map { CChar(bitPattern: $0) }
    }

    /// The value of the attribute `name` (NUL-terminated).
    static func value(of fd: Int32, _ name: [CChar]) throws(Errno) -> [UInt8] {
        try readWhole { (buffer) throws(Errno) -> Int in try get(fd, name, into: buffer) }
    }

    /// The size of one attribute's value; ENODATA when it is absent.
    static func size(of fd: Int32, _ name: String) throws(Errno) -> Int {
        try get(fd, name, into: UnsafeMutableRawBufferPointer(start: nil, count: 0))
    }

    private static func get(_ fd: Int32, _ name: UnsafePointer<CChar>, into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int {
        do throws(Errno) {
            return try Syscall.getExtendedAttribute(fd, name, into: buffer)
        } catch where error.rawValue == EBADF {
            return try withProcessPath(fd) { (path) throws(Errno) -> Int in
                try Syscall.getExtendedAttribute(path, name, into: buffer, followLinks: true)
            }
        }
    }

    /// Asks for the size, then reads; retries while the value keeps outgrowing the buffer.
    private static func readWhole(_ call: (UnsafeMutableRawBufferPointer) throws(Errno) -> Int) throws(Errno) -> [UInt8] {
        while true {
            let size = try call(UnsafeMutableRawBufferPointer(start: nil, count: 0))
            if size == 0 { return [] }
            var bytes = [UInt8](repeating: 0, count: size)
            do throws(Errno) {
                let count = try bytes.withUnsafeMutableBytes { buffer in
                    Result { () throws(Errno) -> Int in try call(buffer) }
                }.get()
                bytes.removeSubrange(count...)
                return bytes
            } catch where error.rawValue == ERANGE {
                continue // grew between the two calls
            }
        }
    }

    private static func withProcessPath<R>(_ fd: Int32, _ body: (UnsafePointer<CChar>) throws(Errno) -> R) throws(Errno) -> R {
        try Syscall.withDescriptorPath(fd, prefix: "/proc/self/fd/", body)
    }
}
