import Glibc
import SystemPackage

/// One kept version of a file, as the index records it.
public struct VersionRecord: Sendable, Hashable {
    /// The version's number: what `coordfs versions cat|restore` take.
    public let id: Int64
    /// The file it is a version of: the same through saves, renames and moves.
    public let file: Int64
    /// The file's path in the mount when the version was kept.
    public let path: MountPath
    public let size: Int64
    /// When the version was last modified, and when it was kept (nanoseconds since the epoch).
    public let modified: Int64
    public let kept: Int64
    public let kind: VersionKind
    public let origin: VersionOrigin
    /// The file's mode when it was kept (type and permission bits), for a restore.
    public let mode: UInt32
    public let resolved: Bool
    public let pinned: Bool

    public init(id: Int64, file: Int64, path: MountPath, size: Int64, modified: Int64, kept: Int64, kind: VersionKind,
                origin: VersionOrigin, mode: UInt32, resolved: Bool, pinned: Bool) {
        self.id = id
        self.file = file
        self.path = path
        self.size = size
        self.modified = modified
        self.kept = kept
        self.kind = kind
        self.origin = origin
        self.mode = mode
        self.resolved = resolved
        self.pinned = pinned
    }
}

/// The versions of one path: the file there now, or the last file deleted under that name.
public struct FileVersions: Sendable, Hashable {
    public let file: Int64
    /// Whether the file was deleted through the mount (its versions stay to restore it).
    public let deleted: Bool
    /// Oldest first.
    public let versions: [VersionRecord]

    public init(file: Int64, deleted: Bool, versions: [VersionRecord]) {
        self.file = file
        self.deleted = deleted
        self.versions = versions
    }
}

/// What the control server asks of the version store. The caller has checked that the
/// client may read the path.
public protocol VersionCatalog: Sendable {
    /// The versions of the file at `path`; nil when no file with versions was ever there.
    func versions(of path: MountPath) throws(Errno) -> FileVersions?

    /// Up to `count` bytes of version `id` of the file at `path` from `offset` (fewer at its
    /// end). ENOENT when the file at `path` has no such version.
    func read(version id: Int64, of path: MountPath, offset: Int64, count: Int) throws(Errno) -> [UInt8]

    /// Pins or unpins, marks resolved or not, version `id` of the file at `path` (nil: leave
    /// as it is) and returns it as it is now. ENOENT when the file has no such version.
    func change(version id: Int64, of path: MountPath, pinned: Bool?, resolved: Bool?, by origin: VersionOrigin) throws(Errno) -> VersionRecord

    /// Removes versions of the file at `path`: `ids`, or every one when nil. Returns how many
    /// went. ENOENT when one of `ids` is not the file's.
    func remove(versions ids: [Int64]?, of path: MountPath, by origin: VersionOrigin) throws(Errno) -> Int

    /// The files at or beneath `path` (as they are named now) with conflict versions not
    /// resolved yet, and those versions.
    func conflicts(beneath path: MountPath) throws(Errno) -> [(path: MountPath, versions: [VersionRecord])]

    /// A restore of version `id` through the mount by process `pid` has just ended: the
    /// version that restore replaced is marked as replaced by a restore, and a deleted file
    /// brought back continues as the file it was (its versions are its own again).
    func restored(version id: Int64, of path: MountPath, by pid: Int32) throws(Errno)

    /// The attributes of version `id` as kept (the file's owner and mode then), nil when
    /// there is no such version.
    func status(ofVersion id: Int64) -> stat?

    /// The store's size and counts, for status.
    func summary() -> VersionSummary
}

/// The version store in numbers.
public struct VersionSummary: Sendable, Hashable {
    public let versions: Int
    public let files: Int
    public let bytes: Int64
    /// New versions are not kept: the backing's free space is below the floor.
    public var paused = false

    public init(versions: Int, files: Int, bytes: Int64, paused: Bool = false) {
        self.versions = versions
        self.files = files
        self.bytes = bytes
        self.paused = paused
    }
}

/// A version store as the mount holds it: it keeps versions and answers for them.
public typealias VersionStoring = VersionKeeping & VersionCatalog
