/// Decides which files are written in place (straight to the backing file, claims per
/// operation) instead of through a staged temp and a commit.
///
/// Some files must not be copied on every open: databases that coordinate their own writers
/// (through locks and shared memory on the very file), logs that several processes append to,
/// and files so large that a copy per open costs more than a torn read is worth preventing.
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

    /// Proposed default size threshold: 1 GiB. Below it, a staged copy costs at most about a
    /// second on an SSD when the filesystem has no reflinks (on btrfs or xfs the copy is a
    /// reflink and costs nothing whatever the size), and doubles the space only briefly. Above
    /// it, files are typically media, archives, images and datasets, which are rarely
    /// rewritten in part by programs that need atomic saves, and copying them on every open
    /// would make the mount unusable for them.
    public static let defaultLargerThan: Int64 = 1 << 30

    public let patterns: [String]
    public let largerThan: Int64?
    let namePatterns: [GlobPattern]
    let pathPatterns: [PathPattern]

    /// - Parameters:
    ///   - patterns: name or path patterns, see the type's documentation; empty ones are ignored.
    ///   - largerThan: files bigger than this many bytes are in place too; nil for no limit.
    public init(patterns: [String] = InPlacePolicy.defaultPatterns, largerThan: Int64? = InPlacePolicy.defaultLargerThan) {
        self.patterns = patterns
        self.largerThan = largerThan
        var names: [GlobPattern] = []
        var paths: [PathPattern] = []
        for pattern in patterns where !pattern.isEmpty {
            if pattern.contains("/") {
                paths.append(PathPattern(pattern))
            } else {
                names.append(GlobPattern(pattern))
            }
        }
        self.namePatterns = names
        self.pathPatterns = paths
    }

    /// Whether the file at `path` is written in place.
    ///
    /// - Parameter size: the file's size when it is opened; pass 0 when the open truncates
    ///   (nothing is copied then, so size alone is no reason to skip staging).
    public func isInPlace(_ path: MountPath, size: Int64) -> Bool {
        if let largerThan, size > largerThan { return true }
        if let name = path.name, !namePatterns.isEmpty {
            let scalars = name.scalars
            if namePatterns.contains(where: { $0.matches(scalars: scalars) }) { return true }
        }
        return pathPatterns.contains { $0.matches(path.components) }
    }
}
