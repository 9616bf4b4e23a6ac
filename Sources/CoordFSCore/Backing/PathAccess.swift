import Glibc
import Synchronization

/// What a user may learn about a path.
public enum ReadAccess: Sendable, Hashable {
    /// Every directory on the way may be searched and the item itself read.
    case readable
    /// The path does not exist from its `missingComponents`-th last component on, and the
    /// deepest directory of it that does exist may be read: the user may see that it is absent.
    case missing(missingComponents: Int)
    /// Something on the way may not be searched, or the item (or, when it is missing, the
    /// directory that would hold it) may not be read.
    case notPermitted
}

/// The control socket's question about each client: could it read this path itself?
/// A client gets no event, claim or presenter registration for a path it could not read.
public protocol PathAccess: Sendable {
    /// True when `uid` (with primary group `gid` and the supplementary groups of `pid`) may
    /// search every directory above `path` and read `path` itself.
    func canRead(_ path: MountPath, uid: UInt32, gid: UInt32, pid: Int32) -> Bool

    /// `canRead`, telling a missing path apart from a forbidden one.
    func readAccess(_ path: MountPath, uid: UInt32, gid: UInt32, pid: Int32) -> ReadAccess

    /// True when the user may search every directory above `path` and write `path` itself,
    /// or, where it does not exist, write the existing directory that would hold it (create
    /// it): what a claim that holds back others' changes of `path` needs.
    func canWrite(_ path: MountPath, uid: UInt32, gid: UInt32, pid: Int32) -> Bool

    /// True when the user may remove or replace the name `path` (or, where it does not exist,
    /// make it): search every directory above it and write the one that holds it, and in a
    /// sticky directory own the item or the directory, as the kernel's unlink and rename check.
    func canRemove(_ path: MountPath, uid: UInt32, gid: UInt32, pid: Int32) -> Bool

    /// True when the user may read an object with these attributes (owner, group, mode):
    /// a kept version, which has no path of its own.
    func canRead(_ status: stat, uid: UInt32, gid: UInt32, pid: Int32) -> Bool
}

extension PathAccess {
    public func readAccess(_ path: MountPath, uid: UInt32, gid: UInt32, pid: Int32) -> ReadAccess {
        canRead(path, uid: uid, gid: gid, pid: pid) ? .readable : .notPermitted
    }

    /// Only root, unless the conformer knows better.
    public func canWrite(_ path: MountPath, uid: UInt32, gid: UInt32, pid: Int32) -> Bool {
        uid == 0
    }

    /// Only root, unless the conformer knows better.
    public func canRead(_ status: stat, uid: UInt32, gid: UInt32, pid: Int32) -> Bool {
        uid == 0
    }

    /// Only root, unless the conformer knows better.
    public func canRemove(_ path: MountPath, uid: UInt32, gid: UInt32, pid: Int32) -> Bool {
        uid == 0
    }

    /// Whether the user could make `change` to `path` itself.
    public func canMake(_ change: PresentedChange, _ path: MountPath, uid: UInt32, gid: UInt32, pid: Int32) -> Bool {
        switch change {
        case .write: canWrite(path, uid: uid, gid: gid, pid: pid)
        case .removal: canRemove(path, uid: uid, gid: gid, pid: pid)
        }
    }
}

/// `PathAccess` against the backing directory, by the permission bits `stat` reports: owner,
/// then group (primary or supplementary), then other, as the kernel checks them; uid 0
/// passes. POSIX ACLs are not consulted: the mode bits alone decide.
///
/// The walk opens each directory `O_PATH | O_NOFOLLOW` from the one above it, so a symbolic
/// link on the way is never followed out of the backing: a path through one does not exist.
public final class BackingPathAccess: PathAccess {
    /// Borrowed: whoever created this keeps the descriptor open for as long as it is used.
    private let root: Int32
    private let groupsLifetime: Duration
    /// Guards the cache of supplementary groups by pid (read from /proc, kept briefly).
    private let groups = Mutex<[Int32: (groups: [UInt32], read: ContinuousClock.Instant)]>([:])

    /// - Parameter rootDescriptor: the backing root (an `O_PATH` descriptor will do).
    public init(rootDescriptor: Int32, groupsLifetime: Duration = .seconds(2)) {
        self.root = rootDescriptor
        self.groupsLifetime = groupsLifetime
    }

    public func canRead(_ path: MountPath, uid: UInt32, gid: UInt32, pid: Int32) -> Bool {
        readAccess(path, uid: uid, gid: gid, pid: pid) == .readable
    }

    public func readAccess(_ path: MountPath, uid: UInt32, gid: UInt32, pid: Int32) -> ReadAccess {
        walk(path, User(uid: uid, gid: gid, groups: uid == 0 ? [] : supplementaryGroups(of: pid)), finally: .read)
    }

    public func canWrite(_ path: MountPath, uid: UInt32, gid: UInt32, pid: Int32) -> Bool {
        switch walk(path, User(uid: uid, gid: gid, groups: uid == 0 ? [] : supplementaryGroups(of: pid)), finally: .write) {
        case .readable, .missing: true
        case .notPermitted: false
        }
    }

    public func canRead(_ status: stat, uid: UInt32, gid: UInt32, pid: Int32) -> Bool {
        User(uid: uid, gid: gid, groups: uid == 0 ? [] : supplementaryGroups(of: pid)).may(.read, status)
    }

    public func canRemove(_ path: MountPath, uid: UInt32, gid: UInt32, pid: Int32) -> Bool {
        if path.components.isEmpty { return false } // the root has no name to remove
        switch walk(path, User(uid: uid, gid: gid, groups: uid == 0 ? [] : supplementaryGroups(of: pid)), finally: .removal) {
        case .readable, .missing: return true
        case .notPermitted: return false
        }
    }

    /// Searches every directory down to `path` as `user`, then checks `final` on the item, or
    /// on the directory that would hold the first missing component (reading it tells that the
    /// name is missing; writing it would make the name). `.readable` means allowed.
    private func walk(_ path: MountPath, _ user: User, finally final: User.Access) -> ReadAccess {
        guard var status = try? Syscall.statOfPathDescriptor(root) else { return .notPermitted }
        var directory: OwnedDescriptor? = nil
        let components = path.components
        for (index, name) in components.enumerated() {
            guard user.may(.search, status) else { return .notPermitted }
            let isLast = index == components.count - 1
            let parent = directory?.raw ?? root
            let child: OwnedDescriptor
            do {
                child = try Syscall.openAt(parent, name, Linux.O_PATH | O_NOFOLLOW)
            } catch {
                if error == .noSuchFileOrDirectory {
                    return user.may(final, status) ? .missing(missingComponents: components.count - index) : .notPermitted
                }
                return .notPermitted
            }
            guard let childStatus = try? Syscall.statOfPathDescriptor(child.raw) else { return .notPermitted }
            if isLast {
                if final == .removal {
                    return user.mayRemove(childStatus, from: status) ? .readable : .notPermitted
                }
                return user.may(final, childStatus) ? .readable : .notPermitted
            }
            if (childStatus.st_mode & S_IFMT) != S_IFDIR {
                // A file or link where a directory would be: nothing beneath it exists (and
                // nothing can be made there).
                guard final == .read else { return .notPermitted }
                return user.may(.read, status) ? .missing(missingComponents: components.count - index - 1) : .notPermitted
            }
            status = childStatus
            directory = consume child
        }
        return user.may(final, status) ? .readable : .notPermitted
    }

    private func supplementaryGroups(of pid: Int32) -> [UInt32] {
        let now = ContinuousClock.now
        if let cached = groups.withLock({ $0[pid] }), now - cached.read < groupsLifetime {
            return cached.groups
        }
        let fresh = ProcessFacts.supplementaryGroups(of: pid) ?? []
        groups.withLock { cache in
            if cache.count >= 256 { cache.removeAll() }
            cache[pid] = (fresh, now)
        }
        return fresh
    }

    private struct User {
        enum Access {
            case read, write, search
            /// Of a name: judged on its directory and the item together (`mayRemove`); where
            /// the name is missing, as a write of the directory that would hold it.
            case removal
        }
        let uid: UInt32
        let gid: UInt32
        let groups: [UInt32]

        func may(_ access: Access, _ status: stat) -> Bool {
            if uid == 0 { return true }
            let bits: mode_t
            if status.st_uid == uid {
                bits = (status.st_mode >> 6) & 7
            } else if status.st_gid == gid || groups.contains(status.st_gid) {
                bits = (status.st_mode >> 3) & 7
            } else {
                bits = status.st_mode & 7
            }
            let wanted: mode_t = switch access {
            case .read: 4
            case .write, .removal: 2
            case .search: 1
            }
            return bits & wanted != 0
        }

        /// Write on the directory (its search was checked on the way), and under a sticky
        /// directory, owning the item or the directory.
        func mayRemove(_ item: stat, from directory: stat) -> Bool {
            guard may(.write, directory) else { return false }
            if uid == 0 || directory.st_mode & S_ISVTX == 0 { return true }
            return item.st_uid == uid || directory.st_uid == uid
        }
    }
}
