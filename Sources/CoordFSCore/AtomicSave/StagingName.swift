import Synchronization

/// The names coordfs keeps for itself in the backing: staged temp files, the recovery folder
/// and the append journals.
///
/// A temp name is `.coordfs-tmp-` followed by 16 lowercase hex digits: 29 bytes
/// whatever the target is called, so staging never runs into NAME_MAX, and nothing about
/// the target (its name, its length, its encoding) leaks into the backing listing. The mount
/// hides every reserved name (lookup answers ENOENT, readdir skips it) and refuses to create
/// one, so a program on the mount can neither see nor clash with coordfs's own files.
public enum StagingName {
    /// Every temp name starts with this; the hex digits follow.
    static let prefix: StaticString = ".coordfs-tmp-"
    static let prefixLength = 13
    static let hexDigits = 16
    /// The length of every temp name, in bytes.
    public static let length = prefixLength + hexDigits

    /// The folder in the backing root where temp files left by a crash are moved at the next mount.
    public static let recoveryFolder = FileName(recoveryFolderBytes.description.utf8)!
    static let recoveryFolderBytes: StaticString = ".coordfs-recovery"

    /// The version store's folder in the backing root (`coordfs mount --versions`, Docs/VERSIONS.md).
    public static let versionsFolder = FileName(versionsFolderBytes.description.utf8)!
    static let versionsFolderBytes: StaticString = ".coordfs-versions"

    /// A fresh temp name: 64 bits that no other name from this process has, and that another
    /// process (a second mount of the same backing, an earlier run) is unlikely to have made.
    /// Unique, not secret: whoever lists the backing could predict the next names. A name
    /// taken in the backing meanwhile is left to O_EXCL (with O_NOFOLLOW), which makes the
    /// caller draw again; nothing else is ever opened under one.
    public static func make() -> FileName {
        let count = drawn.wrappingAdd(1, ordering: .relaxed).newValue
        return make(random: scramble(processKey &+ count &* 0x9E37_79B9_7F4A_7C15))
    }

    /// Drawn once per process from the system's random source, so that a name costs no
    /// system call (a `getrandom` per save shows in the profile of small saves).
    private static let processKey: UInt64 = {
        var generator = SystemRandomNumberGenerator()
        return generator.next()
    }()

    /// How many names this process has made.
    private static let drawn = Atomic<UInt64>(0)

    /// SplitMix64's output function: a bijection on 64 bits (distinct counts give distinct
    /// names) that spreads neighbouring inputs far apart.
    static func scramble(_ value: UInt64) -> UInt64 {
        var mixed = value
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        return mixed ^ (mixed >> 31)
    }

    /// The temp name for a given 64-bit value (tests use it to force a collision).
    static func make(random value: UInt64) -> FileName {
        var storage: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0) // 32 bytes: the 29 of a name, on the stack
        return withUnsafeMutableBytes(of: &storage) { buffer in
            buffer.copyMemory(from: UnsafeRawBufferPointer(start: prefix.utf8Start, count: prefixLength))
            let digits: StaticString = "0123456789abcdef"
            for index in 0..<hexDigits {
                buffer[prefixLength + index] = digits.utf8Start[Int(value >> UInt64(4 * (hexDigits - 1 - index)) & 0xF)]
            }
            return FileName(unchecked: UnsafeRawBufferPointer(rebasing: buffer[..<length]))
        }
    }

    /// Whether `name` is exactly a temp name: the prefix, then 16 lowercase hex digits, nothing more.
    public static func isStaging(_ name: FileName) -> Bool {
        name.withCString { isStaging($0) }
    }

    /// The same test on a NUL-terminated name, without allocating: it runs on every lookup and
    /// every entry readdir passes through. It reads no further than the first mismatch, so a
    /// short name never makes it read past its terminator.
    @inline(__always)
    public static func isStaging(_ name: UnsafePointer<CChar>) -> Bool {
        for index in 0..<length {
            guard matches(UInt8(bitPattern: name[index]), at: index) else { return false }
        }
        return name[length] == 0
    }

    /// Whether a name is hidden from (and may not be created through) the mount: temp names
    /// in every directory; the recovery folder, the version store and the append journals
    /// (`AppendJournal`) only in the root (elsewhere they are ordinary names).
    public static func isReserved(name: FileName, inRoot: Bool) -> Bool {
        name.withCString { isReserved(name: $0, inRoot: inRoot) }
    }

    /// `isReserved` on a NUL-terminated name, without allocating.
    @inline(__always)
    public static func isReserved(name: UnsafePointer<CChar>, inRoot: Bool) -> Bool {
        if isStaging(name) { return true }
        guard inRoot else { return false }
        if AppendJournal.isJournalName(name) { return true }
        return isExactly(recoveryFolderBytes, name) || isExactly(versionsFolderBytes, name)
    }

    /// Whether the NUL-terminated `name` is exactly `expected`.
    @inline(__always)
    private static func isExactly(_ expected: StaticString, _ name: UnsafePointer<CChar>) -> Bool {
        let bytes = expected.utf8Start
        let count = expected.utf8CodeUnitCount
        for index in 0..<count where UInt8(bitPattern: name[index]) != bytes[index] { return false }
        return name[count] == 0
    }

    /// Whether `byte` may stand at `index` of a temp name (index below `length`).
    @inline(__always)
    static func matches(_ byte: UInt8, at index: Int) -> Bool {
        if index < prefixLength { return byte == prefix.utf8Start[index] }
        return (byte >= 0x30 && byte <= 0x39) || (byte >= 0x61 && byte <= 0x66) // 0-9, a-f
    }
}
