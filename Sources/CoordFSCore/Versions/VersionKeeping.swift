import Glibc
import SystemPackage

/// Why a version was kept: what was about to make it go.
public enum VersionKind: String, Sendable, Hashable, CaseIterable {
    /// A save replaced it.
    case save
    /// A delete through the mount removed it.
    case delete
    /// A save met it changed behind the mount (it is also kept beside the file as a conflict copy).
    case conflict
    /// A restore of an earlier version replaced it.
    case restore
}

/// Who made the change that kept a version.
public struct VersionOrigin: Sendable, Hashable {
    public let pid: Int32
    public let uid: UInt32
    /// The process's name (`comm`), nil when it was gone before it could be read.
    public let process: String?
    /// The host the process ran on, as a cluster's index records it (nil in a mount's own:
    /// every version there is this host's).
    public let host: String?

    public init(pid: Int32, uid: UInt32, process: String?, host: String? = nil) {
        self.pid = pid
        self.uid = uid
        self.process = process
        self.host = host
    }
}

/// A version kept for a commit that has not happened yet: the commit takes it back should
/// it fail, so that no version stands for a replacement that did not take place.
public struct KeptVersion: Sendable, Hashable {
    public let id: Int64

    public init(id: Int64) {
        self.id = id
    }
}

/// Where the mount keeps what its saves replace and its deletes remove (Docs/VERSIONS.md).
/// The core calls it at the moment a version is about to go: just before a commit's rename
/// replaces a file, and in place of an unlink. `CoordFSVersions` implements it, so the core
/// stays free of the database; a mount without versions has none.
///
/// Sendable: implementations guard their own state; every call may come from any worker.
public protocol VersionKeeping: Sendable {
    /// Keeps the file that `name` in `directory` (a descriptor) names now, which a commit is
    /// about to replace, by a hard link: no copy. Never fails the commit: a version that
    /// cannot be kept (another filesystem, a full disk, versions paused) is skipped and nil
    /// returned. `unlessLinkedElsewhere`: not a file that has another name (it lives on under
    /// that name; a rename over one of its names loses nothing).
    func keepReplaced(_ name: FileName, in directory: Int32, path: MountPath, kind: VersionKind, origin: VersionOrigin,
                      unlessLinkedElsewhere: Bool) -> KeptVersion?

    /// Keeps the first `length` bytes (nil: all) of the file open as `file` (readable): the
    /// file as it is before a program changes it in place, or the committed part an append
    /// just grew. By a clone (a reflink: no bytes copied) where the backing can make one, else
    /// by a copy when `length` is within `VersionRetention.copiesUpTo`; false when it keeps
    /// nothing.
    func keepContents(of file: Int32, length: Int64?, path: MountPath, origin: VersionOrigin) -> Bool

    /// Whether `keepContents` may keep anything on this device: false once a clone failed
    /// there for want of reflinks while no copies are allowed, so that in-place writes and
    /// appends on such a backing cost nothing more.
    func keepsContents(onDevice device: UInt64) -> Bool

    /// Undoes `keepReplaced` after the commit failed.
    func takeBack(_ kept: KeptVersion)

    /// Removes `name` from `directory` by moving the file into the store, when it is a
    /// regular file whose last name this is; returns false, having changed nothing, when the
    /// caller is to unlink it as usual (it has other names, it is no regular file, the store
    /// cannot take it).
    func removeKeeping(_ name: FileName, in directory: Int32, path: MountPath, origin: VersionOrigin) throws(Errno) -> Bool

    /// A rename through the mount moved `source` (a file or a directory) to `destination`:
    /// the versions of what moved follow it.
    func moved(from source: MountPath, to destination: MountPath)

    /// A rename through the mount exchanged `first` and `second` (`RENAME_EXCHANGE`): the
    /// versions of each follow it.
    func exchanged(_ first: MountPath, _ second: MountPath)

    /// The file at `path` (or everything beneath it) was deleted behind the mount: its versions
    /// stay, as a deleted file's, and a new file under the name does not inherit them.
    func deletedBehind(_ path: MountPath)

    /// Has `observer` hear of every version kept, removed (expired or by hand) and resolved
    /// from now on (the mount, which tells subscribers and presenters).
    func observe(_ observer: @escaping @Sendable (VersionNotice) -> Void)
}

/// A version kept, removed or resolved, for subscribers and presenters.
public struct VersionNotice: Sendable, Hashable {
    /// `.versionAdded`, `.versionRemoved` or `.conflictResolved`.
    public let kind: ChangeKind
    /// The file's path now (for a deleted file, where it was).
    public let path: MountPath
    public let version: Int64
    public let size: Int64
    /// Who made the change; nil for the store's own (expiry), which no process made.
    public let origin: VersionOrigin?

    public init(kind: ChangeKind, path: MountPath, version: Int64, size: Int64, origin: VersionOrigin?) {
        self.kind = kind
        self.path = path
        self.version = version
        self.size = size
        self.origin = origin
    }
}

extension VersionKeeping {
    /// `keepReplaced` of whatever file the name holds, linked elsewhere or not (a save's commit).
    public func keepReplaced(_ name: FileName, in directory: Int32, path: MountPath, kind: VersionKind, origin: VersionOrigin) -> KeptVersion? {
        keepReplaced(name, in: directory, path: path, kind: kind, origin: origin, unlessLinkedElsewhere: false)
    }
}
