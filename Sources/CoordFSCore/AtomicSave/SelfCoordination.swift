import Glibc
import Synchronization

/// The files whose programs coordinate themselves: a file its writer holds a lock on (`flock`,
/// POSIX or OFD locks) while another program wants to write it, or a database (SQLite writes
/// its header to the first page). Their writers go in place, with claims per operation, so
/// that the lock, not a claim held from open to close, decides who waits: a second process
/// must reach its lock call at once. Kept by node for the node's life (the kernel's inode, on
/// which the kernel keeps the locks).
///
/// Sendable: the set is behind a mutex; the rest is Sendable.
public final class SelfCoordinatingFiles: Sendable {
    /// Node ids. Guards nothing else; a leaf lock, never held across a system call.
    private let nodes = Mutex<Set<UInt64>>([])
    /// Lets the common case (none) skip the lock.
    private let count = Atomic<Int>(0)
    /// The mount's device, as lock lines name the files locked on it.
    private let mount: KernelMountIdentity

    public init(mount: KernelMountIdentity) {
        self.mount = mount
    }

    public func contains(_ node: Node) -> Bool {
        guard count.load(ordering: .relaxed) > 0 else { return false }
        return nodes.withLock { $0.contains(node.id) }
    }

    public func insert(_ node: Node) {
        nodes.withLock { set in
            set.insert(node.id)
            count.store(set.count, ordering: .relaxed)
        }
    }

    /// The kernel forgot the node.
    public func forget(_ id: UInt64) {
        guard count.load(ordering: .relaxed) > 0 else { return }
        nodes.withLock { set in
            set.remove(id)
            count.store(set.count, ordering: .relaxed)
        }
    }

    /// Whether process `pid` holds a lock (flock, POSIX or OFD) on the file the kernel shows as
    /// `inode` on this mount, as its /proc/PID/fdinfo lists the locks taken through each of its
    /// descriptors. Only the save's own writer counts: a lock anyone may take with a read-only
    /// descriptor must not change how another user's save commits (a user holds back only what
    /// it may change). False while the device is unknown.
    public func isLocked(inode: UInt64, byProcess pid: Int32) -> Bool {
        guard let (major, minor) = mount.device else { return false }
        let file = KernelLocks.LockedFile(major: major, minor: minor, inode: inode)
        return ProcessFacts.anyDescriptor(of: pid) { text in KernelLocks.lockedFiles(in: Array(text)).contains(file) }
    }
}

/// Lock lines as the kernel writes them in /proc/locks and, after `lock:`, in /proc/PID/fdinfo:
/// `1: POSIX  ADVISORY  WRITE 1234 00:2f:123456 0 EOF` (a waiter's line has `->` after the
/// number); the file is `major:minor:inode`, the first two in hex.
public enum KernelLocks {
    public struct LockedFile: Equatable, Sendable {
        public let major: UInt32
        public let minor: UInt32
        public let inode: UInt64
    }

    /// The files named in lock lines, in order (a file appears once per lock or waiter);
    /// fdinfo's other lines (`pos:`, `mnt_id:`, `ino:`...) name none.
    public static func lockedFiles(in text: [UInt8]) -> [LockedFile] {
        var files: [LockedFile] = []
        for line in text.split(separator: UInt8(ascii: "\n")) {
            for field in line.split(separator: UInt8(ascii: " ")) {
                let parts = field.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false)
                guard parts.count == 3, let major = number(parts[0], radix: 16), let minor = number(parts[1], radix: 16),
                      let inode = number(parts[2], radix: 10) else { continue }
                files.append(LockedFile(major: UInt32(truncatingIfNeeded: major), minor: UInt32(truncatingIfNeeded: minor), inode: inode))
                break
            }
        }
        return files
    }

    private static func number(_ digits: ArraySlice<UInt8>, radix: UInt64) -> UInt64? {
        guard !digits.isEmpty else { return nil }
        var value: UInt64 = 0
        for byte in digits {
            let digit: UInt64
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt64(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f") where radix == 16: digit = UInt64(byte - UInt8(ascii: "a") + 10)
            default: return nil
            }
            let (times, overflow) = value.multipliedReportingOverflow(by: radix)
            if overflow { return nil }
            value = times + digit
        }
        return value
    }
}

/// SQLite's database header: a file whose first page starts so is a database, which SQLite
/// coordinates itself with POSIX locks and its journal.
public enum DatabaseHeader {
    public static let sqlite: [UInt8] = Array("SQLite format 3".utf8) + [0]
}
