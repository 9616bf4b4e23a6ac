import Glibc
import SystemPackage

/// Decides which files are written in place (straight to the backing file, claims per
/// operation) instead of through a staged temp and a commit. `writesInPlace` answers for an
/// open; `isInPlace` is the configured part of that answer (patterns and size).
///
/// Some files must not be copied on every open: databases that coordinate their own writers
/// (through locks and shared memory on the very file), logs that several processes append to,
/// and files so large that a copy per open costs more than a torn read is worth preventing
/// (on a filesystem with reflinks a staged copy is a clone, which costs next to nothing
/// whatever the size: there the size threshold does not apply).
///
/// Patterns: one without `/` matches the file's name, in any directory (`*.db`); one with `/`
/// matches the whole mount path from the root (`data/*.bin`, `**/cache/**`), where `**` as a
/// whole component crosses any number of directories. Within a component: `*`, `?`, `[...]` as
/// in fnmatch. Matching is case-sensitive, as names on Linux are.
///
/// Sendable: immutable after init.
public struct InPlacePolicy: Sendable {
    /// The defaults, beyond SQLite and `*.log`:
    /// - `*.db3`: SQLite's other usual extension.
    /// - `*.mdb`: LMDB's `data.mdb` and `lock.mdb` are shared memory maps written live by every
    ///   process that opens them; a private copy breaks them outright. (Access databases share
    ///   the extension and coordinate through a lock file beside them: in place suits them too.)
    /// - `*.duckdb`, `*.duckdb.wal`: DuckDB, a database with its own write-ahead log.
    /// - `*.journal`: systemd-journald's files, memory-mapped and appended to.
    /// - `.*.sw?` (`.swp`, `.swo`...): Vim's swap files. Vim writes them as you type and another
    ///   Vim checks them to warn about concurrent editing; staged, they would stay invisible
    ///   to others until the first Vim quits, and be lost in a power cut, defeating both uses.
    /// - `*.qcow2`, `*.vmdk`, `*.vdi`, `*.vhdx`: disk images; hypervisors keep them open and
    ///   write them at random, and they lock them themselves. Often below the size threshold
    ///   at first (they grow on demand), hence the names.
    public static let defaultPatterns = [
        "*.db", "*.sqlite", "*.sqlite3",
        "*.db-journal", "*.db-wal", "*.db-shm",
        "*.sqlite-journal", "*.sqlite-wal", "*.sqlite-shm",
        "*.sqlite3-journal", "*.sqlite3-wal", "*.sqlite3-shm",
        "*.db3", "*.db3-journal", "*.db3-wal", "*.db3-shm",
        "*.mdb",
        "*.duckdb", "*.duckdb.wal",
        "*.log", "*.journal",
        ".*.sw?",
        "*.qcow2", "*.vmdk", "*.vdi", "*.vhdx",
    ]

    /// The default size threshold: 128 MiB, where copies are real (on XFS and btrfs they are
    /// reflinks, and it does not apply). A staged copy costs what the file holds: measured on
    /// ext4 (2 CPUs, a virtio disk; warm page cache), a 4 KiB rewrite in the middle costs
    /// 0.8 ms per MiB through the mount (16 MiB: 15 ms, 64 MiB: 53 ms, 256 MiB: 200 ms,
    /// 1 GiB: 1.2 to 1.5 s) against 0.017 ms bare and 0.12 ms in place. At 128 MiB a save costs
    /// about 0.1 s, the most that still passes for instant, and at most that much space is
    /// doubled while it is in flight. Bigger files are mostly media, archives, images and
    /// datasets, rarely edited in part by programs that need atomic saves; copying them on
    /// every edit would make the mount unusable for them (see README, "Big files").
    public static let defaultLargerThan: Int64 = 128 << 20

    public let patterns: [String]
    public let largerThan: Int64?
    let matcher: PathPatternSet

    /// - Parameters:
    ///   - patterns: name or path patterns, see the type's documentation; empty ones are ignored.
    ///   - largerThan: files bigger than this many bytes are in place too; nil for no limit.
    public init(patterns: [String] = InPlacePolicy.defaultPatterns, largerThan: Int64? = InPlacePolicy.defaultLargerThan) {
        self.patterns = patterns
        self.largerThan = largerThan
        self.matcher = PathPatternSet(patterns)
    }

    /// Whether the file at `path` is written in place: a pattern matches it, or it is larger
    /// than the threshold and a copy of it would really copy its bytes.
    ///
    /// - Parameters:
    ///   - size: the file's size when it is opened; pass 0 when the open truncates (nothing is
    ///     copied then, so size alone is no reason to skip staging).
    ///   - clones: whether a staged copy of this file is a reflink (its filesystem shares the
    ///     extents: XFS, btrfs); asked only of a file above the threshold. A clone costs
    ///     what the file's extent map costs, not what its bytes do, so such a file keeps its
    ///     atomic saves whatever its size.
    public func isInPlace(_ path: MountPath, size: Int64, clones: () -> Bool = { false }) -> Bool {
        if matcher.matches(path) { return true }
        if let largerThan, size > largerThan { return !clones() }
        return false
    }

    // MARK: Opens

    /// Whether an open that changes a regular file (it writes or truncates) writes in place:
    /// the patterns and size threshold (`isInPlace`), plus SQLite's files whatever their names,
    /// which SQLite maps and locks across processes: a database (recognised by its header)
    /// and its journal, WAL and shared-memory files. SQLite opens a database read-write, never
    /// write-only and never with O_TRUNC, so only such opens read the header: every `>`
    /// redirection and editor save skips one open, read and close.
    ///
    /// The mount opens special files, and files no path reaches, in place without asking.
    ///
    /// - Parameters:
    ///   - path: where the file is, or is being created, in the mount.
    ///   - flags: the open's flags.
    ///   - existing: the file being opened; nil when the open creates it.
    ///   - clones: whether a staged copy of `existing` would be a reflink (see `isInPlace`).
    public func writesInPlace(_ path: MountPath, flags: Int32, existing: Node?, clones: () -> Bool) -> Bool {
        let truncating = flags & O_TRUNC != 0
        let size = truncating ? 0 : existing.flatMap(Self.size(of:)) ?? 0
        if isInPlace(path, size: size, clones: clones) { return true }
        // O_NOATIME: looking must not count as reading (the daemon is root or the owner).
        if !truncating, flags & O_ACCMODE == O_RDWR, let existing,
           let file = try? existing.withDescriptor({ (descriptor) throws(Errno) -> OwnedDescriptor in
               try Syscall.reopen(descriptor, O_RDONLY | Linux.O_NOATIME)
           }),
           Self.hasSQLiteHeader(file.raw) {
            return true
        }
        if let name = path.name, Self.isSQLiteCompanion(name) { return true }
        return false
    }

    private static func size(of node: Node) -> Int64? {
        let status = try? node.withDescriptor { (descriptor) throws(Errno) -> stat in try Syscall.statOfPathDescriptor(descriptor) }
        return status.map { Int64($0.st_size) }
    }

    /// Whether the file starts with "SQLite format 3" and a NUL, as SQLite's file format specifies.
    static func hasSQLiteHeader(_ descriptor: Int32) -> Bool {
        var header = (UInt64(0), UInt64(0))
        let count = withUnsafeMutableBytes(of: &header) { buffer in (try? Syscall.read(descriptor, into: buffer, at: 0)) ?? 0 }
        return count == 16 && withUnsafeBytes(of: &header) { Array($0) } == DatabaseHeader.sqlite
    }

    /// SQLite's companions of a database, mapped and locked by every connection, whatever the
    /// database's name: its rollback journal, its write-ahead log and the WAL's shared memory.
    static func isSQLiteCompanion(_ name: FileName) -> Bool {
        name.hasSuffix("-journal") || name.hasSuffix("-wal") || name.hasSuffix("-shm")
    }
}
