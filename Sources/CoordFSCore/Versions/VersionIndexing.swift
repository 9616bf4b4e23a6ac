import SystemPackage

/// What a new version's record holds besides its file.
public struct NewVersionRecord: Sendable, Hashable {
    public let path: MountPath
    public let size: Int64
    /// Nanoseconds since the epoch.
    public let modified: Int64
    public let kept: Int64
    public let kind: VersionKind
    public let origin: VersionOrigin
    public let mode: UInt32

    public init(path: MountPath, size: Int64, modified: Int64, kept: Int64, kind: VersionKind, origin: VersionOrigin, mode: UInt32) {
        self.path = path
        self.size = size
        self.modified = modified
        self.kept = kept
        self.kind = kind
        self.origin = origin
        self.mode = mode
    }
}

/// A version just recorded: its id, its file's, and whether the file had none before.
public struct RecordedVersion: Sendable, Hashable {
    public let id: Int64
    public let file: Int64
    public let isFirstOfFile: Bool

    public init(id: Int64, file: Int64, isFirstOfFile: Bool) {
        self.id = id
        self.file = file
        self.isFirstOfFile = isFirstOfFile
    }
}

/// The version store's index: which file each kept version belongs to, and what is known of
/// it. One mount keeps it in SQLite beside the store (CoordFSVersions); the hosts of a
/// cluster share one in their PostgreSQL (CoordFSCluster), as they share the store's folder.
///
/// Files: one row per file that has versions, with its path in the mount now (or where it was
/// deleted). A file keeps its row through saves (which replace its inode) and renames, so its
/// versions follow it. Versions: one row per kept version, named in the store by its id.
///
/// Sendable: implementations guard their connection; any worker may call.
public protocol VersionIndexing: Sendable {
    /// Whether other daemons (other hosts of a cluster) change it too: then no daemon may
    /// trust a copy of it in memory, nor take a recent record without its version for a
    /// crash's leftover (another host may be about to link it).
    var isShared: Bool { get }

    /// Records a version of the file now at `version.path` (giving that file a row if it has
    /// none yet) and returns its id, the file's, and whether this is the file's first version
    /// (its row is new: nothing to thin). With `deletingFile`, the file's row is marked
    /// deleted in the same transaction: its versions stay under the path it had.
    func record(_ version: NewVersionRecord, deletingFile: Bool) throws -> RecordedVersion

    /// Removes a version's record (a version that could not be linked, or taken back), and
    /// undoes the deletion of its file that `record(deletingFile:)` marked.
    func forget(_ id: Int64, undeleting: Bool) throws

    /// The paths of files that have versions and are not deleted.
    func livePaths() throws -> [MountPath]

    /// A rename: what was at `source` and beneath it is at `destination` now. A file with
    /// versions that the rename replaced counts as deleted (its versions stay), unless
    /// nothing with versions moves over it: then the move was a save of it (an editor's
    /// write-and-rename), and the moving file takes over its versions. Files recorded beneath
    /// `destination` count as deleted too: rename(2) replaces only an empty directory, so the
    /// index missed their deletion, and kept live they would give one path two files.
    /// (Never called with one path within the other: rename(2) refuses those.)
    func moved(from source: MountPath, to destination: MountPath) throws

    /// The file at `path`, and every file beneath it, were deleted where no version could be
    /// kept: their rows are marked deleted.
    func deleted(_ path: MountPath) throws

    /// A rename that exchanged two paths: each subtree takes the other's place.
    func exchanged(_ first: MountPath, _ second: MountPath) throws

    /// The file with versions at `path`: the one there now, or else the last one deleted there.
    func file(at path: MountPath) throws -> (id: Int64, deleted: Bool)?

    /// The versions of a file, oldest first.
    func versions(of file: Int64) throws -> [VersionRecord]

    /// Every version, oldest kept first, with whether its file still exists.
    func allVersions() throws -> [(version: VersionRecord, fileExists: Bool)]

    /// Removes the records of `ids`, and the rows of deleted files left without versions.
    /// Returns the ids it removed (another host may have removed some first).
    func remove(_ ids: [Int64]) throws -> [Int64]

    /// Sets a version's flags (nil: unchanged); false when there is no such version.
    func setFlags(of id: Int64, pinned: Bool?, resolved: Bool?) throws -> Bool

    /// The unresolved conflict versions of live files at or beneath `path`, with each file's path now.
    func conflicts(beneath path: MountPath) throws -> [(path: MountPath, version: VersionRecord)]

    /// After a restore by `pid` at `path`: the newest version of the live file there that `pid`
    /// kept since `since` is marked a restore's; when the file there is new (a deleted file
    /// brought back), the last file deleted there takes it over again.
    func noteRestore(at path: MountPath, by pid: Int32, since: Int64) throws

    /// Versions with their file's path now (for a deleted file, where it was) and their size.
    func describe(_ ids: [Int64]) throws -> [(id: Int64, path: MountPath, size: Int64)]

    /// Every version's id, with when it was kept.
    func allVersionIDs() throws -> [Int64: Int64]

    /// Records a version found in the store with no record under its own id, as a version of a
    /// deleted file at the root: not lost, and listed by `coordfs versions list MOUNTPOINT`.
    func recordFound(id: Int64, size: Int64, modified: Int64, mode: UInt32) throws

    /// The number of versions and of files with versions, and the versions' total size.
    func summary() throws -> VersionSummary
}
