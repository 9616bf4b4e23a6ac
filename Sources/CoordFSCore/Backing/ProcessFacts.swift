import Glibc
import Synchronization
import SystemPackage

/// What the claim table needs to know about the processes that call the filesystem, read from
/// /proc with plain open and read: which process a thread belongs to (claims belong to
/// processes, FUSE names threads), whether a process descends from another (explicit claims
/// cover a process tree), and a process's name (for logs and events).
public final class ProcessFacts: Sendable {
    /// Thread id → thread-group id. Entries expire quickly because the kernel reuses ids.
    private let groups: ExpiringCache<Int32>
    /// Process id → its lineage (itself, its parent, ... up to init). Parents change only when
    /// one dies (the orphan is adopted), so a short validity is plenty.
    private let lineages: ExpiringCache<ProcessLineage>
    /// Process id → name. Kept briefly (a name changes at exec): long enough that a burst of
    /// events from one process reads /proc once.
    private let names: ExpiringCache<String>

    public convenience init() {
        self.init(validity: .seconds(1), capacity: 4096)
    }

    init(validity: Duration, capacity: Int) {
        self.groups = ExpiringCache(validity: validity, capacity: capacity)
        self.lineages = ExpiringCache(validity: validity, capacity: capacity)
        self.names = ExpiringCache(validity: min(validity, .milliseconds(100)), capacity: capacity)
    }

    /// Thread-group id (the process id) of a thread id, as FUSE reports callers. Falls back to
    /// the id itself when /proc has no entry for it (the thread is gone).
    public func threadGroup(of threadID: Int32) -> Int32 {
        groups.value(for: threadID) { Self.statusField(of: threadID, "Tgid") } ?? threadID
    }

    /// True when `pid` is `ancestor` or descends from it, following parent ids up /proc.
    /// A process that has gone, or whose chain reaches pid 1 or 0 first, is not in the tree.
    public func isInTree(_ pid: Int32, rootedAt ancestor: Int32) -> Bool {
        Self.isInTree(pid, rootedAt: ancestor)
    }

    /// The process and its ancestors, for the claim table to decide pass-through without
    /// reading /proc under its lock. A process that is gone has the lineage `[pid]`.
    public func lineage(of pid: Int32) -> ProcessLineage {
        lineages.value(for: pid) {
            var pids: [Int32] = [pid]
            var current = pid
            // Parent chains are short; the bound only guards against a chain that changes under us.
            while pids.count < 4096, current > 1, let parent = Self.statusField(of: current, "PPid"), parent != current, parent > 0 {
                pids.append(parent)
                current = parent
            }
            return ProcessLineage(pids)
        } ?? ProcessLineage([pid])
    }

    /// `isInTree` in the shape the presenter registry takes.
    public static let isInTreeRule: @Sendable (Int32, Int32) -> Bool = { pid, root in isInTree(pid, rootedAt: root) }

    /// The supplementary groups of `pid` (the `Groups:` line of /proc/PID/status), nil when it is gone.
    public static func supplementaryGroups(of pid: Int32) -> [UInt32]? {
        guard pid > 0 else { return nil }
        return readProcFile(pid, "status", capacity: 16_384) { bytes -> [UInt32]? in
            for line in bytes.split(separator: UInt8(ascii: "\n")) where line.starts(with: "Groups:".utf8) {
                return line.dropFirst(7).split { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
                    .compactMap { UInt32(String(decoding: $0, as: UTF8.self)) }
            }
            return []
        }
    }

    /// True when `pid` is `ancestor` or descends from it (see the instance method).
    public static func isInTree(_ pid: Int32, rootedAt ancestor: Int32) -> Bool {
        var current = pid
        // Parent chains are short; the bound only guards against a chain that changes under us.
        for _ in 0..<4096 {
            if current == ancestor { return true }
            guard current > 1, let parent = Self.statusField(of: current, "PPid"), parent != current else { return false }
            current = parent
        }
        return false
    }

    /// The process's name (`comm`, at most 15 bytes), nil when it is gone.
    public func name(of pid: Int32) -> String? {
        names.value(for: pid) {
            Self.readProcFile(pid, "comm", capacity: 64) { bytes in
                var text = Substring(decoding: bytes, as: UTF8.self)
                while text.last == "\n" { text.removeLast() }
                return String(text)
            }
        }
    }

    /// Whether the process holds an open descriptor of the file the kernel shows as `inode` on
    /// the mount `mountID` (mountinfo's first field), from its /proc/PID/fdinfo: what tells a
    /// child that inherited a descriptor of a file being saved from one that did not.
    public static func holdsOpenFile(_ pid: Int32, mountID: Int32, inode: UInt64) -> Bool {
        anyDescriptor(of: pid) { text in
            fdinfoField(text, "mnt_id:") == Int64(mountID) && fdinfoField(text, "ino:") == Int64(bitPattern: inode)
        }
    }

    /// Whether `matches` holds for the /proc/PID/fdinfo text of any of the process's
    /// descriptors (at most 4 KiB of each: its position, flags, mount, inode and the locks
    /// taken through it). Reads one small file per descriptor the process has.
    public static func anyDescriptor(of pid: Int32, where matches: (UnsafeRawBufferPointer) -> Bool) -> Bool {
        let listing: OwnedDescriptor? = withUnsafeTemporaryAllocation(of: CChar.self, capacity: 64) { path in
            guard pid > 0, writeProcPath(pid, "fdinfo", into: path) else { return nil }
            return try? Syscall.openAt(AT_FDCWD, UnsafePointer(path.baseAddress!), O_RDONLY | O_DIRECTORY)
        }
        guard let listing, let stream = try? Syscall.openDirectoryStream(listing.raw) else { return false }
        defer { closedir(stream) }
        while let entry = (try? Syscall.readDirectory(stream)) ?? nil {
            let found = withUnsafePointer(to: &entry.pointee.d_name) { name in
                name.withMemoryRebound(to: CChar.self, capacity: 256) { name -> Bool in
                    guard name[0] != UInt8(ascii: ".") else { return false }
                    guard let info = try? Syscall.openAt(listing.raw, name, O_RDONLY) else { return false }
                    return withUnsafeTemporaryAllocation(byteCount: 4096, alignment: 1) { buffer -> Bool in
                        guard let count = try? Syscall.read(info.raw, into: buffer, at: 0), count > 0 else { return false }
                        return matches(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
                    }
                }
            }
            if found { return true }
        }
        return false
    }

    /// The number after `key` at the start of a line of fdinfo text.
    static func fdinfoField(_ text: UnsafeRawBufferPointer, _ key: StaticString) -> Int64? {
        let keyBytes = UnsafeRawBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount)
        for line in text.split(separator: UInt8(ascii: "\n")) where line.starts(with: keyBytes) {
            var value: Int64 = 0
            var digits = 0
            for byte in line.dropFirst(keyBytes.count).drop(while: { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }) {
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9"), value < Int64.max / 10 else { break }
                value = value * 10 + Int64(byte - UInt8(ascii: "0"))
                digits += 1
            }
            return digits > 0 ? value : nil
        }
        return nil
    }

    /// The user that owns a process (the owner of its /proc directory), nil when it is gone.
    public static func owner(of pid: Int32) -> UInt32? {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: 64) { path -> UInt32? in
            guard pid > 0, writeProcPath(pid, "", into: path),
                  let status = try? Syscall.stat(at: AT_FDCWD, UnsafePointer(path.baseAddress!)) else { return nil }
            return status.st_uid
        }
    }

    // MARK: Reading /proc

    /// A numeric field of /proc/ID/status ("Tgid", "PPid", ...). They all sit in the first few
    /// hundred bytes, after the name, so one short read is enough.
    static func statusField(of id: Int32, _ field: StaticString) -> Int32? {
        readProcFile(id, "status", capacity: 512) { bytes -> Int32? in
            let key = UnsafeRawBufferPointer(start: field.utf8Start, count: field.utf8CodeUnitCount)
            var lineStart = 0
            while lineStart < bytes.count {
                let lineEnd = bytes[lineStart...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.count
                let line = bytes[lineStart..<lineEnd]
                if line.count > key.count, line[lineStart + key.count] == UInt8(ascii: ":"),
                   line.starts(with: key) {
                    return parseNumber(line.dropFirst(key.count + 1))
                }
                lineStart = lineEnd + 1
            }
            return nil
        }
    }

    /// The decimal number in `bytes` after leading blanks.
    static func parseNumber(_ bytes: Slice<UnsafeRawBufferPointer>) -> Int32? {
        var value: Int64 = 0
        var digits = 0
        for byte in bytes.drop(while: { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }) {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { break }
            value = value * 10 + Int64(byte - UInt8(ascii: "0"))
            digits += 1
            if value > Int64(Int32.max) { return nil }
        }
        return digits > 0 ? Int32(value) : nil
    }

    /// Reads up to `capacity` bytes from the start of /proc/ID/LEAF and hands them to `body`;
    /// nil when the file cannot be opened or read. The path is built on the stack and the bytes
    /// read into a stack buffer, so a lookup costs the three system calls and nothing more.
    static func readProcFile<T>(_ id: Int32, _ leaf: StaticString, capacity: Int,
                                _ body: (UnsafeRawBufferPointer) -> T?) -> T? {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: 64) { path -> T? in
            guard id >= 0, writeProcPath(id, leaf, into: path) else { return nil }
            guard let descriptor = try? Syscall.openAt(AT_FDCWD, UnsafePointer(path.baseAddress!), O_RDONLY) else { return nil }
            return withUnsafeTemporaryAllocation(byteCount: capacity, alignment: 1) { buffer -> T? in
                guard let count = try? Syscall.read(descriptor.raw, into: buffer, at: 0), count > 0 else { return nil }
                return body(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
            }
        }
    }

    /// Writes "/proc/ID/LEAF" and a terminating NUL into `buffer`; false when it does not fit.
    static func writeProcPath(_ id: Int32, _ leaf: StaticString, into buffer: UnsafeMutableBufferPointer<CChar>) -> Bool {
        var length = 0
        func put(_ byte: UInt8) -> Bool {
            guard length < buffer.count else { return false }
            buffer[length] = CChar(bitPattern: byte)
            length += 1
            return true
        }
        for byte in "/proc/".utf8 where !put(byte) { return false }
        var digitCount = 1
        var scale: Int32 = 10
        while digitCount < 10 && id >= scale {
            digitCount += 1
            scale = scale &* 10
        }
        guard length + digitCount <= buffer.count else { return false }
        var rest = id
        for position in stride(from: length + digitCount - 1, through: length, by: -1) {
            buffer[position] = CChar(bitPattern: UInt8(ascii: "0") + UInt8(rest % 10))
            rest /= 10
        }
        length += digitCount
        guard put(UInt8(ascii: "/")) else { return false }
        let leafBytes = UnsafeBufferPointer(start: leaf.utf8Start, count: leaf.utf8CodeUnitCount)
        for byte in leafBytes where !put(byte) { return false }
        return put(0)
    }
}

/// A small map from process or thread ids to what /proc said about them, each entry trusted
/// for `validity` (ids are reused). Bounded: when full, expired entries go, and if none has
/// expired, all of them (the next lookups just read /proc again).
///
/// Every FUSE request asks it (whose thread is this, and for events, what is its name), so a
/// hit costs one lock and one lookup: times are the coarse monotonic clock's nanoseconds (read
/// from the vDSO, a few milliseconds fine, plenty for validities of 100 ms and more).
///
/// Sendable: the map is behind its own lock, held only to look up or store.
private final class ExpiringCache<Value: Sendable>: Sendable {
    private struct Entry {
        let value: Value
        let validUntil: UInt64
    }

    private let entries = Mutex<[Int32: Entry]>([:])
    private let validity: UInt64
    private let capacity: Int

    init(validity: Duration, capacity: Int) {
        let (seconds, attoseconds) = validity.components
        self.validity = UInt64(max(seconds, 0)) * 1_000_000_000 + UInt64(max(attoseconds, 0) / 1_000_000_000)
        self.capacity = capacity
    }

    private static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC_COARSE, &time)
        return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
    }

    /// The cached value for `id`, or what `read` finds (cached unless nil); `read` runs unlocked.
    func value(for id: Int32, read: () -> Value?) -> Value? {
        let now = Self.now()
        let cached: Value? = entries.withLock { entries in
            guard let entry = entries[id], entry.validUntil > now else { return nil }
            return entry.value
        }
        if let cached { return cached }
        guard let fresh = read() else { return nil }
        entries.withLock { cache in
            if cache.count >= capacity {
                cache = cache.filter { $0.value.validUntil > now }
                if cache.count >= capacity { cache.removeAll(keepingCapacity: true) }
            }
            cache[id] = Entry(value: fresh, validUntil: now + validity)
        }
        return fresh
    }
}
