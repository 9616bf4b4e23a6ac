import CoordFSCore
import Synchronization

/// The store's index of one mount (`VersionIndexing` says what it records), in SQLite
/// beside the store, in write-ahead-log mode with `synchronous = NORMAL`: a record costs a write to the log
/// and no fsync, and a crash of the daemon loses no committed record (a power cut may lose the
/// last ones; `VersionStore.reconcile` then finds their versions without a record and records
/// them again).
///
/// Two tables, `files` and `versions`; paths are blobs of their exact bytes.
///
/// Sendable: the one connection is used under `database`'s lock, by one thread at a time.
final class VersionIndex: VersionIndexing {
    var isShared: Bool { false }

    private let database: Mutex<SQLiteDatabase>

    init(path: String) throws(SQLiteError) {
        let connection = try SQLiteDatabase(path: path)
        try connection.execute("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL")
        let schema = try connection.value("PRAGMA user_version")?.integer ?? 0
        if schema < 1 {
            try connection.transaction { () throws(SQLiteError) in
                try connection.execute("""
                    CREATE TABLE files (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        path BLOB NOT NULL,
                        deleted INTEGER NOT NULL DEFAULT 0
                    );
                    CREATE INDEX files_by_path ON files(path, deleted);
                    CREATE TABLE versions (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        file INTEGER NOT NULL REFERENCES files(id),
                        path BLOB NOT NULL,
                        size INTEGER NOT NULL,
                        modified INTEGER NOT NULL,
                        kept INTEGER NOT NULL,
                        kind TEXT NOT NULL,
                        pid INTEGER NOT NULL,
                        uid INTEGER NOT NULL,
                        process TEXT,
                        mode INTEGER NOT NULL,
                        resolved INTEGER NOT NULL DEFAULT 0,
                        pinned INTEGER NOT NULL DEFAULT 0
                    );
                    CREATE INDEX versions_by_file ON versions(file, id);
                    PRAGMA user_version = 1;
                    """)
            }
        }
        if schema < 2 {
            // One live file per path, enforced: an index from before the rule on renames over
            // stale records may hold two, of which the newer stays live (the one a record went to).
            try connection.transaction { () throws(SQLiteError) in
                try connection.execute("""
                    UPDATE files SET deleted = 1 WHERE deleted = 0
                        AND id < (SELECT max(id) FROM files AS newer WHERE newer.path = files.path AND newer.deleted = 0);
                    CREATE UNIQUE INDEX files_live_by_path ON files(path) WHERE deleted = 0;
                    PRAGMA user_version = 2;
                    """)
            }
        }
        database = Mutex(connection)
    }

    /// Records a version of the file now at `version.path` (giving that file a row if it has
    /// none yet) and returns its id and the file's. With `deletingFile`, the file's row is marked deleted in
    /// the same transaction: its versions stay under the path it had.
    func record(_ version: NewVersionRecord, deletingFile: Bool) throws(SQLiteError) -> RecordedVersion {
        try database.withLock { (db) throws(SQLiteError) -> RecordedVersion in
            try db.transaction { () throws(SQLiteError) -> RecordedVersion in
                let path = SQLiteValue.blob(version.path.bytes)
                let existing = try db.value("SELECT id FROM files WHERE path = ? AND deleted = 0", [path])?.integer
                let file: Int64
                if let existing {
                    file = existing
                } else {
                    try db.rows("INSERT INTO files (path) VALUES (?)", [path])
                    file = db.lastInsertedRowID
                }
                try db.rows("""
                    INSERT INTO versions (file, path, size, modified, kept, kind, pid, uid, process, mode)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """, [.integer(file), path, .integer(version.size), .integer(version.modified), .integer(version.kept),
                          .text(version.kind.rawValue), .integer(Int64(version.origin.pid)), .integer(Int64(version.origin.uid)),
                          version.origin.process.map(SQLiteValue.text) ?? .null, .integer(Int64(version.mode))])
                let id = db.lastInsertedRowID
                if deletingFile { try db.rows("UPDATE files SET deleted = 1 WHERE id = ?", [.integer(file)]) }
                return RecordedVersion(id: id, file: file, isFirstOfFile: existing == nil)
            }
        }
    }

    /// Removes a version's record (a version that could not be linked, or taken back), and
    /// undoes the deletion of its file that `record(deletingFile:)` marked.
    func forget(_ id: Int64, undeleting: Bool) throws(SQLiteError) {
        try database.withLock { (db) throws(SQLiteError) in
            try db.transaction { () throws(SQLiteError) in
                if undeleting {
                    try db.rows("UPDATE files SET deleted = 0 WHERE id = (SELECT file FROM versions WHERE id = ?)", [.integer(id)])
                }
                try db.rows("DELETE FROM versions WHERE id = ?", [.integer(id)])
            }
        }
    }

    /// The paths of files that have versions and are not deleted.
    func livePaths() throws(SQLiteError) -> [MountPath] {
        try database.withLock { (db) throws(SQLiteError) in
            try db.rows("SELECT path FROM files WHERE deleted = 0").compactMap { $0[0].blob.flatMap { MountPath(bytes: $0) } }
        }
    }

    /// A rename through the mount (`VersionIndexing.moved` has the rule).
    func moved(from source: MountPath, to destination: MountPath) throws(SQLiteError) {
        try database.withLock { (db) throws(SQLiteError) in
            try db.transaction { () throws(SQLiteError) in
                let (from, to) = (source.bytes, destination.bytes)
                let moving = try db.value("SELECT 1 FROM files WHERE deleted = 0 AND (path = ? OR (path >= ? AND path < ?)) LIMIT 1",
                                          [.blob(from)] + Self.beneath(from))
                try db.rows("UPDATE files SET deleted = 1 WHERE deleted = 0 AND path >= ? AND path < ?", Self.beneath(to))
                if moving != nil {
                    try db.rows("UPDATE files SET deleted = 1 WHERE deleted = 0 AND path = ?", [.blob(to)])
                }
                try Self.movePaths(db, from: from, to: to)
            }
        }
    }

    /// The file at `path`, and every file beneath it, were deleted (behind the mount, where no
    /// version could be kept): their rows are marked deleted.
    func deleted(_ path: MountPath) throws(SQLiteError) {
        let bytes = path.bytes
        _ = try database.withLock { (db) throws(SQLiteError) in
            try db.rows("UPDATE files SET deleted = 1 WHERE deleted = 0 AND (path = ? OR (path >= ? AND path < ?))",
                        [.blob(bytes)] + Self.beneath(bytes))
        }
    }

    /// A rename that exchanged two paths: each subtree takes the other's place, through a
    /// prefix no path has (a NUL byte).
    func exchanged(_ first: MountPath, _ second: MountPath) throws(SQLiteError) {
        try database.withLock { (db) throws(SQLiteError) in
            try db.transaction { () throws(SQLiteError) in
                let (a, b, spare) = (first.bytes, second.bytes, [UInt8(0)])
                try Self.movePaths(db, from: a, to: spare)
                try Self.movePaths(db, from: b, to: a)
                try Self.movePaths(db, from: spare, to: b)
            }
        }
    }

    /// Every live path that is `from` or starts with `from` and a slash starts with `to` instead.
    /// (`||` makes text of blobs: the result is cast back, as paths are compared as blobs.)
    private static func movePaths(_ db: SQLiteDatabase, from: [UInt8], to: [UInt8]) throws(SQLiteError) {
        try db.rows("""
            UPDATE files SET path = CAST(? || substr(path, ?) AS BLOB) WHERE deleted = 0 AND (path = ? OR (path >= ? AND path < ?))
            """, [.blob(to), .integer(Int64(from.count + 1)), .blob(from)] + beneath(from))
    }

    /// The bounds of the paths beneath `path`, as a range the index on paths serves: those
    /// that start with `path` and a slash sort from that prefix up to `path` and the byte after
    /// the slash ("0"), as blobs compare bytewise.
    private static func beneath(_ path: [UInt8]) -> [SQLiteValue] {
        [.blob(path + [UInt8(ascii: "/")]), .blob(path + [UInt8(ascii: "/") + 1])]
    }

    /// The file with versions at `path`: the one there now, or else the last one deleted there.
    func file(at path: MountPath) throws(SQLiteError) -> (id: Int64, deleted: Bool)? {
        try database.withLock { (db) throws(SQLiteError) -> (id: Int64, deleted: Bool)? in
            guard let row = try db.rows("SELECT id, deleted FROM files WHERE path = ? ORDER BY deleted ASC, id DESC LIMIT 1",
                                        [.blob(path.bytes)]).first,
                  let id = row[0].integer else { return nil }
            return (id, row[1].integer != 0)
        }
    }

    private static let versionColumns = "id, file, path, size, modified, kept, kind, pid, uid, process, mode, resolved, pinned"
    private static let versionColumnsOfV = "v.id, v.file, v.path, v.size, v.modified, v.kept, v.kind, v.pid, v.uid, v.process, v.mode, v.resolved, v.pinned"

    /// The versions of a file, oldest first.
    func versions(of file: Int64) throws(SQLiteError) -> [VersionRecord] {
        try database.withLock { (db) throws(SQLiteError) in
            try db.rows("SELECT \(Self.versionColumns) FROM versions WHERE file = ? ORDER BY kept, id", [.integer(file)]).compactMap(Self.record)
        }
    }

    /// Every version, oldest kept first, with whether its file still exists.
    func allVersions() throws(SQLiteError) -> [(version: VersionRecord, fileExists: Bool)] {
        try database.withLock { (db) throws(SQLiteError) in
            try db.rows("SELECT \(Self.versionColumnsOfV), f.deleted FROM versions v JOIN files f ON f.id = v.file ORDER BY v.kept, v.id")
                .compactMap { row in Self.record(Array(row.prefix(13))).map { ($0, row[13].integer == 0) } }
        }
    }

    /// Removes the records of `ids`, and the rows of deleted files left without versions.
    func remove(_ ids: [Int64]) throws(SQLiteError) -> [Int64] {
        guard !ids.isEmpty else { return [] }
        return try database.withLock { (db) throws(SQLiteError) -> [Int64] in
            try db.transaction { () throws(SQLiteError) -> [Int64] in
                var removed: [Int64] = []
                for id in ids {
                    try db.rows("DELETE FROM versions WHERE id = ?", [.integer(id)])
                    if try db.value("SELECT changes()")?.integer == 1 { removed.append(id) }
                }
                try db.rows("DELETE FROM files WHERE deleted = 1 AND NOT EXISTS (SELECT 1 FROM versions WHERE versions.file = files.id)")
                return removed
            }
        }
    }

    /// Sets a version's flags (nil: unchanged); false when there is no such version.
    func setFlags(of id: Int64, pinned: Bool?, resolved: Bool?) throws(SQLiteError) -> Bool {
        try database.withLock { (db) throws(SQLiteError) -> Bool in
            try db.transaction { () throws(SQLiteError) -> Bool in
                guard try db.value("SELECT id FROM versions WHERE id = ?", [.integer(id)]) != nil else { return false }
                if let pinned { try db.rows("UPDATE versions SET pinned = ? WHERE id = ?", [.integer(pinned ? 1 : 0), .integer(id)]) }
                if let resolved { try db.rows("UPDATE versions SET resolved = ? WHERE id = ?", [.integer(resolved ? 1 : 0), .integer(id)]) }
                return true
            }
        }
    }

    /// The unresolved conflict versions of live files at or beneath `path`, with each file's path now.
    func conflicts(beneath path: MountPath) throws(SQLiteError) -> [(path: MountPath, version: VersionRecord)] {
        let bytes = path.bytes
        let prefix = path.isRoot ? bytes : bytes + [UInt8(ascii: "/")]
        return try database.withLock { (db) throws(SQLiteError) in
            try db.rows("""
                SELECT \(Self.versionColumnsOfV), f.path FROM versions v JOIN files f ON f.id = v.file
                WHERE f.deleted = 0 AND v.kind = 'conflict' AND v.resolved = 0 AND (f.path = ? OR substr(f.path, 1, ?) = ?)
                ORDER BY f.path, v.id
                """, [.blob(bytes), .integer(Int64(prefix.count)), .blob(prefix)]).compactMap { row in
                guard let version = Self.record(Array(row.prefix(13))), let now = row[13].blob.flatMap({ MountPath(bytes: $0) }) else { return nil }
                return (now, version)
            }
        }
    }

    /// After a restore by `pid` at `path`: the newest version of the live file there that `pid`
    /// kept since `since` is marked a restore's; when the file there is new (a deleted file
    /// brought back), the last file deleted there takes it over again.
    func noteRestore(at path: MountPath, by pid: Int32, since: Int64) throws(SQLiteError) {
        try database.withLock { (db) throws(SQLiteError) in
            try db.transaction { () throws(SQLiteError) in
                let bytes = SQLiteValue.blob(path.bytes)
                if try db.value("SELECT id FROM files WHERE path = ? AND deleted = 0", [bytes]) == nil,
                   let deleted = try db.value("SELECT id FROM files WHERE path = ? AND deleted = 1 ORDER BY id DESC LIMIT 1", [bytes]) {
                    try db.rows("UPDATE files SET deleted = 0 WHERE id = ?", [deleted])
                }
                try db.rows("""
                    UPDATE versions SET kind = 'restore' WHERE id = (
                        SELECT max(v.id) FROM versions v JOIN files f ON f.id = v.file
                        WHERE f.path = ? AND f.deleted = 0 AND v.pid = ? AND v.kept >= ? AND v.kind = 'save')
                    """, [bytes, .integer(Int64(pid)), .integer(since)])
            }
        }
    }

    /// Versions with their file's path now (for a deleted file, where it was) and their size.
    func describe(_ ids: [Int64]) throws(SQLiteError) -> [(id: Int64, path: MountPath, size: Int64)] {
        try database.withLock { (db) throws(SQLiteError) in
            var described: [(id: Int64, path: MountPath, size: Int64)] = []
            for id in ids {
                guard let row = try db.rows("SELECT f.path, v.size FROM versions v JOIN files f ON f.id = v.file WHERE v.id = ?", [.integer(id)]).first,
                      let path = row[0].blob.flatMap({ MountPath(bytes: $0) }) else { continue }
                described.append((id, path, row[1].integer ?? 0))
            }
            return described
        }
    }

    func allVersionIDs() throws(SQLiteError) -> [Int64: Int64] {
        try database.withLock { (db) throws(SQLiteError) in
            var kept: [Int64: Int64] = [:]
            for row in try db.rows("SELECT id, kept FROM versions") { if let id = row[0].integer { kept[id] = row[1].integer ?? 0 } }
            return kept
        }
    }

    /// Records a version found in the store with no record (see `VersionStore.reconcile`)
    /// under its own id, as a version of a deleted file at the root: not lost, and listed by
    /// `coordfs versions list MOUNTPOINT`.
    func recordFound(id: Int64, size: Int64, modified: Int64, mode: UInt32) throws(SQLiteError) {
        try database.withLock { (db) throws(SQLiteError) in
            try db.transaction { () throws(SQLiteError) in
                let root = SQLiteValue.blob(MountPath.root.bytes)
                try db.rows("INSERT INTO files (path, deleted) VALUES (?, 1)", [root])
                try db.rows("""
                    INSERT INTO versions (id, file, path, size, modified, kept, kind, pid, uid, process, mode)
                    VALUES (?, ?, ?, ?, ?, ?, 'save', 0, 0, NULL, ?)
                    """, [.integer(id), .integer(db.lastInsertedRowID), root, .integer(size), .integer(modified), .integer(modified),
                          .integer(Int64(mode))])
            }
        }
    }

    /// The number of versions and of files with versions, and the versions' total size.
    func summary() throws(SQLiteError) -> VersionSummary {
        try database.withLock { (db) throws(SQLiteError) in
            let row = try db.rows("SELECT count(*), count(DISTINCT file), coalesce(sum(size), 0) FROM versions").first ?? []
            let number = { (index: Int) in row.count > index ? row[index].integer ?? 0 : 0 }
            return VersionSummary(versions: Int(number(0)), files: Int(number(1)), bytes: number(2))
        }
    }

    private static func record(_ row: [SQLiteValue]) -> VersionRecord? {
        guard row.count == 13, let id = row[0].integer, let file = row[1].integer, let path = row[2].blob.flatMap({ MountPath(bytes: $0) }),
              let kind = row[6].text.flatMap(VersionKind.init(rawValue:)) else { return nil }
        return VersionRecord(id: id, file: file, path: path, size: row[3].integer ?? 0, modified: row[4].integer ?? 0, kept: row[5].integer ?? 0,
                             kind: kind, origin: VersionOrigin(pid: Int32(truncatingIfNeeded: row[7].integer ?? 0),
                                                               uid: UInt32(truncatingIfNeeded: row[8].integer ?? 0), process: row[9].text),
                             mode: UInt32(truncatingIfNeeded: row[10].integer ?? 0), resolved: row[11].integer != 0, pinned: row[12].integer != 0)
    }
}
