import Glibc

/// What coordfs reads about other processes from /proc: their parent (for process trees),
/// supplementary groups (for permission checks on their behalf) and command name (for event
/// origins). Every read is of a small file, with no allocation beyond the result.
public enum Processes {
    /// Reads up to `capacity` bytes of a /proc file. /proc files report size 0, so read until
    /// end of file.
    static func read(_ path: String, capacity: Int = 4096) -> [UInt8]? {
        let fd = path.withCString { Glibc.open($0, O_RDONLY | O_CLOEXEC) }
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        var bytes = [UInt8](repeating: 0, count: capacity)
        var filled = 0
        while filled < capacity {
            let count = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + filled, capacity - filled) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            filled += count
        }
        bytes.removeSubrange(filled...)
        return bytes
    }

    /// The parent of `pid`, from the fourth field of /proc/PID/stat (the command name in the
    /// second may hold spaces and parentheses, so parsing starts after its last ')').
    public static func parent(of pid: Int32) -> Int32? {
        guard pid > 0, let bytes = read("/proc/\(pid)/stat", capacity: 512),
              let close = bytes.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = bytes[(close + 1)...].split(separator: UInt8(ascii: " "))
        guard fields.count >= 2 else { return nil }
        return Int32(String(decoding: fields[1], as: UTF8.self))
    }

    /// True when `pid` is `root` or descends from it. A process that has exited (or that we
    /// cannot see) belongs to no tree but its own.
    public static func isInTree(_ pid: Int32, root: Int32) -> Bool {
        if pid == root { return true }
        guard root > 0 else { return false }
        var current = pid
        // Trees are shallow; the bound only guards against a /proc that lies.
        for _ in 0..<1024 {
            guard let parent = parent(of: current), parent > 0 else { return false }
            if parent == root { return true }
            if parent == 1 && root != 1 { return false }
            current = parent
        }
        return false
    }

    /// `isInTree` in the shape the presenter registry and the claim table take.
    public static let isInTree: @Sendable (Int32, Int32) -> Bool = { pid, root in isInTree(pid, root: root) }

    /// The supplementary groups of `pid` (the `Groups:` line of /proc/PID/status), or nil when
    /// the process is gone.
    public static func supplementaryGroups(of pid: Int32) -> [UInt32]? {
        guard pid > 0, let bytes = read("/proc/\(pid)/status", capacity: 16_384) else { return nil }
        for line in bytes.split(separator: UInt8(ascii: "\n")) where line.starts(with: "Groups:".utf8) {
            return line.dropFirst(7).split { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
                .compactMap { UInt32(String(decoding: $0, as: UTF8.self)) }
        }
        return nil
    }

    /// The command name of `pid` (/proc/PID/comm, at most 15 bytes), or "?" when it is gone.
    public static func commandName(of pid: Int32) -> String {
        guard pid > 0, var bytes = read("/proc/\(pid)/comm", capacity: 64), !bytes.isEmpty else { return "?" }
        if bytes.last == UInt8(ascii: "\n") { bytes.removeLast() }
        return String(decoding: bytes, as: UTF8.self)
    }
}
