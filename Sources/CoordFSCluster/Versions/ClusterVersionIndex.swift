import CoordFSCore
import Synchronization

/// The version index the hosts of a cluster share (`coordfs mount --cluster … --versions`),
/// in the cluster's PostgreSQL, as they share the store's folder in the backing: every host
/// lists, restores and resolves the same versions, and a version's id (a number from one
/// sequence) names its file in the store whichever host kept it.
///
/// Changes run as one statement each where saves and renames wait for them (plpgsql functions,
/// `VersionIndexFunctions`), under a transaction-level advisory lock of the cluster's version
/// index, so that two hosts never give one path two live files. Reads take no lock.
///
/// Its own connection, apart from the session's (whose round trips keep grants alive) and the
/// event thread's: a lost connection is made again at the next call, which is tried once more.
///
/// Sendable: the connection is used under its lock, by one thread at a time.
public final class ClusterVersionIndex: VersionIndexing {
    public var isShared: Bool { true }

    private let configuration: ClusterConfiguration
    /// This host's name, recorded with each version it keeps.
    private let hostname: String
    /// The connection, nil until first used and after it was lost.
    private let connection = Mutex<DatabaseConnection?>(nil)

    /// Connects, and makes the tables and functions if this is the first host with versions.
    public init(configuration: ClusterConfiguration, hostname: String) throws(DatabaseError) {
        self.configuration = configuration
        self.hostname = hostname
        try connection.withLock { (connection) throws(DatabaseError) in
            let made = try Self.connect(configuration)
            try made.install(VersionIndexFunctions.statements)
            connection = made
        }
    }

    /// A connection whose commits do not wait for the server's log to reach its disk, as the
    /// SQLite index's do not (`synchronous = NORMAL`): a save or a rename waits for one round
    /// trip, not for an fsync. A crash of the database may lose the last records; the store
    /// then holds versions without one, which the next start records again (`reconcile`),
    /// and nothing is lost but their attribution.
    private static func connect(_ configuration: ClusterConfiguration) throws(DatabaseError) -> DatabaseConnection {
        let connection = try DatabaseConnection(conninfo: configuration.conninfo, parameters: configuration.connectionParameters)
        try connection.execute("SET synchronous_commit TO off")
        return connection
    }

    private var cluster: DatabaseValue { .text(configuration.name) }

    /// Runs `body` on the connection, made again (and `body` tried once more) when it was lost.
    @discardableResult
    private func run<Result: Sendable>(_ body: (DatabaseConnection) throws(DatabaseError) -> Result) throws(DatabaseError) -> Result {
        try connection.withLock { (connection) throws(DatabaseError) -> Result in
            if let open = connection {
                do throws(DatabaseError) {
                    return try body(open)
                } catch where error.connectionLost {
                    connection = nil
                }
            }
            let made = try Self.connect(configuration)
            connection = made
            return try body(made)
        }
    }

    /// `body` in one transaction holding the index's lock.
    @discardableResult
    private func transaction<Result: Sendable>(_ body: (DatabaseConnection) throws(DatabaseError) -> Result) throws(DatabaseError) -> Result {
        try run { (connection) throws(DatabaseError) -> Result in
            try connection.inTransaction { () throws(DatabaseError) -> Result in
                try connection.execute("SELECT coordfs_versions_lock($1)", [cluster])
                return try body(connection)
            }
        }
    }

    public func record(_ version: NewVersionRecord, deletingFile: Bool) throws -> RecordedVersion {
        let rows = try run { (connection) throws(DatabaseError) in
            try connection.execute("SELECT * FROM coordfs_version_record($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)", [
                cluster, .bytes(version.path.bytes), .integer(version.size), .integer(version.modified), .integer(version.kept),
                .text(version.kind.rawValue), .integer(Int64(version.origin.pid)), .integer(Int64(version.origin.uid)),
                version.origin.process.map(DatabaseValue.text) ?? .null, .text(hostname), .integer(Int64(version.mode)),
                .boolean(deletingFile),
            ])
        }
        guard rows.count == 1, let id = rows.integer(0, 0), let file = rows.integer(0, 1) else {
            throw DatabaseError("the version index returned no record")
        }
        return RecordedVersion(id: id, file: file, isFirstOfFile: rows.boolean(0, 2) ?? false)
    }

    public func forget(_ id: Int64, undeleting: Bool) throws {
        try transaction { (connection) throws(DatabaseError) in
            if undeleting {
                try connection.execute("""
                    UPDATE coordfs_version_files SET deleted = false WHERE id = (SELECT file FROM coordfs_versions WHERE id = $1)
                    """, [.integer(id)])
            }
            try connection.execute("DELETE FROM coordfs_versions WHERE id = $1", [.integer(id)])
        }
    }

    public func livePaths() throws -> [MountPath] {
        let rows = try run { (connection) throws(DatabaseError) in
            try connection.execute("SELECT path FROM coordfs_version_files WHERE cluster = $1 AND NOT deleted", [cluster])
        }
        return (0..<rows.count).compactMap { rows.bytes($0, 0).flatMap { MountPath(bytes: $0) } }
    }

    public func moved(from source: MountPath, to destination: MountPath) throws {
        try run { (connection) throws(DatabaseError) in
            try connection.execute("SELECT coordfs_version_moved($1, $2, $3)", [cluster, .bytes(source.bytes), .bytes(destination.bytes)])
        }
    }

    public func deleted(_ path: MountPath) throws {
        try run { (connection) throws(DatabaseError) in
            try connection.execute("SELECT coordfs_version_deleted($1, $2)", [cluster, .bytes(path.bytes)])
        }
    }

    public func exchanged(_ first: MountPath, _ second: MountPath) throws {
        try run { (connection) throws(DatabaseError) in
            try connection.execute("SELECT coordfs_version_exchanged($1, $2, $3)", [cluster, .bytes(first.bytes), .bytes(second.bytes)])
        }
    }

    public func file(at path: MountPath) throws -> (id: Int64, deleted: Bool)? {
        let rows = try run { (connection) throws(DatabaseError) in
            try connection.execute("""
                SELECT id, deleted FROM coordfs_version_files WHERE cluster = $1 AND path = $2 ORDER BY deleted, id DESC LIMIT 1
                """, [cluster, .bytes(path.bytes)])
        }
        guard rows.count == 1, let id = rows.integer(0, 0) else { return nil }
        return (id, rows.boolean(0, 1) ?? false)
    }

    /// The columns `record(_:_:)` reads, from `coordfs_versions v`.
    private static let versionColumns = "v.id, v.file, v.path, v.size, v.modified, v.kept, v.kind, v.pid, v.uid, v.process, v.mode, v.resolved, v.pinned, v.host"

    public func versions(of file: Int64) throws -> [VersionRecord] {
        let rows = try run { (connection) throws(DatabaseError) in
            try connection.execute("SELECT \(Self.versionColumns) FROM coordfs_versions v WHERE v.file = $1 ORDER BY v.kept, v.id",
                                   [.integer(file)])
        }
        return (0..<rows.count).compactMap { Self.record(rows, $0) }
    }

    public func allVersions() throws -> [(version: VersionRecord, fileExists: Bool)] {
        let rows = try run { (connection) throws(DatabaseError) in
            try connection.execute("""
                SELECT \(Self.versionColumns), f.deleted FROM coordfs_versions v JOIN coordfs_version_files f ON f.id = v.file
                WHERE v.cluster = $1 ORDER BY v.kept, v.id
                """, [cluster])
        }
        return (0..<rows.count).compactMap { row in Self.record(rows, row).map { ($0, rows.boolean(row, 14) == false) } }
    }

    public func remove(_ ids: [Int64]) throws -> [Int64] {
        guard !ids.isEmpty else { return [] }
        let rows = try transaction { (connection) throws(DatabaseError) in
            let removed = try connection.execute("""
                DELETE FROM coordfs_versions WHERE cluster = $1 AND id = ANY($2::bigint[]) RETURNING id
                """, [cluster, .text(ArrayLiteral.integers(ids))])
            try connection.execute("""
                DELETE FROM coordfs_version_files f WHERE f.cluster = $1 AND f.deleted
                    AND NOT EXISTS (SELECT 1 FROM coordfs_versions v WHERE v.file = f.id)
                """, [cluster])
            return removed
        }
        return (0..<rows.count).compactMap { rows.integer($0, 0) }
    }

    public func setFlags(of id: Int64, pinned: Bool?, resolved: Bool?) throws -> Bool {
        let rows = try run { (connection) throws(DatabaseError) in
            try connection.execute("""
                UPDATE coordfs_versions SET pinned = coalesce($3, pinned), resolved = coalesce($4, resolved)
                WHERE cluster = $1 AND id = $2 RETURNING id
                """, [cluster, .integer(id), pinned.map(DatabaseValue.boolean) ?? .null, resolved.map(DatabaseValue.boolean) ?? .null])
        }
        return rows.count == 1
    }

    public func conflicts(beneath path: MountPath) throws -> [(path: MountPath, version: VersionRecord)] {
        let rows = try run { (connection) throws(DatabaseError) in
            try connection.execute("""
                SELECT \(Self.versionColumns), f.path FROM coordfs_versions v JOIN coordfs_version_files f ON f.id = v.file
                WHERE f.cluster = $1 AND NOT f.deleted AND v.kind = 'conflict' AND NOT v.resolved AND coordfs_within(f.path, $2)
                ORDER BY f.path, v.id
                """, [cluster, .bytes(path.bytes)])
        }
        return (0..<rows.count).compactMap { row in
            guard let version = Self.record(rows, row), let now = rows.bytes(row, 14).flatMap({ MountPath(bytes: $0) }) else { return nil }
            return (now, version)
        }
    }

    public func noteRestore(at path: MountPath, by pid: Int32, since: Int64) throws {
        try transaction { (connection) throws(DatabaseError) in
            let bytes = DatabaseValue.bytes(path.bytes)
            try connection.execute("""
                UPDATE coordfs_version_files SET deleted = false WHERE id = (
                    SELECT id FROM coordfs_version_files WHERE cluster = $1 AND path = $2 AND deleted ORDER BY id DESC LIMIT 1)
                AND NOT EXISTS (SELECT 1 FROM coordfs_version_files WHERE cluster = $1 AND path = $2 AND NOT deleted)
                """, [cluster, bytes])
            try connection.execute("""
                UPDATE coordfs_versions SET kind = 'restore' WHERE id = (
                    SELECT max(v.id) FROM coordfs_versions v JOIN coordfs_version_files f ON f.id = v.file
                    WHERE f.cluster = $1 AND f.path = $2 AND NOT f.deleted AND v.pid = $3 AND v.kept >= $4 AND v.kind = 'save')
                """, [cluster, bytes, .integer(Int64(pid)), .integer(since)])
        }
    }

    public func describe(_ ids: [Int64]) throws -> [(id: Int64, path: MountPath, size: Int64)] {
        guard !ids.isEmpty else { return [] }
        let rows = try run { (connection) throws(DatabaseError) in
            try connection.execute("""
                SELECT v.id, f.path, v.size FROM coordfs_versions v JOIN coordfs_version_files f ON f.id = v.file
                WHERE v.cluster = $1 AND v.id = ANY($2::bigint[]) ORDER BY v.id
                """, [cluster, .text(ArrayLiteral.integers(ids))])
        }
        return (0..<rows.count).compactMap { row in
            guard let id = rows.integer(row, 0), let path = rows.bytes(row, 1).flatMap({ MountPath(bytes: $0) }) else { return nil }
            return (id, path, rows.integer(row, 2) ?? 0)
        }
    }

    public func allVersionIDs() throws -> [Int64: Int64] {
        let rows = try run { (connection) throws(DatabaseError) in
            try connection.execute("SELECT id, kept FROM coordfs_versions WHERE cluster = $1", [cluster])
        }
        var kept: [Int64: Int64] = [:]
        for row in 0..<rows.count { if let id = rows.integer(row, 0) { kept[id] = rows.integer(row, 1) ?? 0 } }
        return kept
    }

    public func recordFound(id: Int64, size: Int64, modified: Int64, mode: UInt32) throws {
        try transaction { (connection) throws(DatabaseError) in
            let root = DatabaseValue.bytes(MountPath.root.bytes)
            try connection.execute("""
                WITH file AS (INSERT INTO coordfs_version_files (cluster, path, deleted) VALUES ($1, $2, true) RETURNING id)
                INSERT INTO coordfs_versions (id, cluster, file, path, size, modified, kept, kind, pid, uid, process, host, mode)
                SELECT $3, $1, file.id, $2, $4, $5, $5, 'save', 0, 0, NULL, $6, $7 FROM file
                ON CONFLICT (id) DO NOTHING
                """, [cluster, root, .integer(id), .integer(size), .integer(modified), .text(hostname), .integer(Int64(mode))])
        }
    }

    public func summary() throws -> VersionSummary {
        let rows = try run { (connection) throws(DatabaseError) in
            try connection.execute("""
                SELECT count(*), count(DISTINCT file), coalesce(sum(size), 0) FROM coordfs_versions WHERE cluster = $1
                """, [cluster])
        }
        guard rows.count == 1 else { return VersionSummary(versions: 0, files: 0, bytes: 0) }
        return VersionSummary(versions: Int(rows.integer(0, 0) ?? 0), files: Int(rows.integer(0, 1) ?? 0), bytes: rows.integer(0, 2) ?? 0)
    }

    /// One row of `versionColumns` as a record; nil for a row this version cannot read.
    private static func record(_ rows: DatabaseRows, _ row: Int) -> VersionRecord? {
        guard let id = rows.integer(row, 0), let file = rows.integer(row, 1), let path = rows.bytes(row, 2).flatMap({ MountPath(bytes: $0) }),
              let kind = rows.text(row, 6).flatMap(VersionKind.init(rawValue:)) else { return nil }
        let origin = VersionOrigin(pid: Int32(truncatingIfNeeded: rows.integer(row, 7) ?? 0), uid: UInt32(truncatingIfNeeded: rows.integer(row, 8) ?? 0),
                                   process: rows.text(row, 9), host: rows.text(row, 13))
        return VersionRecord(id: id, file: file, path: path, size: rows.integer(row, 3) ?? 0, modified: rows.integer(row, 4) ?? 0,
                             kept: rows.integer(row, 5) ?? 0, kind: kind, origin: origin,
                             mode: UInt32(truncatingIfNeeded: rows.integer(row, 10) ?? 0),
                             resolved: rows.boolean(row, 11) ?? false, pinned: rows.boolean(row, 12) ?? false)
    }
}
