import Glibc

/// One change made directly in the backing directory, by someone other than the mount, as
/// the watch of the backing reports it. Paths are relative to the backing root, exact bytes.
public enum BackingChange: Sendable, Hashable {
    /// A name appeared (also: moved in from outside the backing).
    case created(MountPath, isDirectory: Bool)
    /// A name went away (also: moved out of the backing).
    case deleted(MountPath, isDirectory: Bool)
    /// A file's contents changed in place (a write or a truncate).
    case contentsChanged(MountPath)
    /// Mode, owner, times, link count or extended attributes changed.
    case attributesChanged(MountPath, isDirectory: Bool)
    /// A name moved within the backing; whatever `to` named before is gone.
    case moved(from: MountPath, to: MountPath, isDirectory: Bool)
    /// The watch lost changes (its queue overflowed, or it could not follow a new directory):
    /// anything may have changed.
    case overflow

    /// The paths the change is about: where it happened, and for a move where it went.
    public var paths: [MountPath] {
        switch self {
        case .created(let path, _), .deleted(let path, _), .contentsChanged(let path), .attributesChanged(let path, _):
            [path]
        case .moved(let from, let to, _):
            [from, to]
        case .overflow:
            []
        }
    }
}

/// What the kernel told the watch about the process that made a change (fanotify reports
/// the pid; inotify reports nothing).
public struct OutsideProcess: Sendable, Hashable {
    public var pid: Int32
    /// Read from `/proc/PID` while the process lived; nil once it was gone.
    public var uid: UInt32?
    /// `/proc/PID/comm` while the process lived; nil once it was gone.
    public var name: String?

    public init(pid: Int32, uid: UInt32?, name: String?) {
        self.pid = pid
        self.uid = uid
        self.name = name
    }
}

/// A change and who made it, where known.
public struct ObservedChange: Sendable, Hashable {
    public var change: BackingChange
    public var process: OutsideProcess?
    /// For an entry a scan of a new directory found (the watch came after it was made, so no
    /// event names its maker): the process that made the directory, where the watch named it.
    /// A peer daemon that makes a directory and a file in it tells both itself.
    public var foundInDirectoryMadeBy: Int32?

    public init(_ change: BackingChange, process: OutsideProcess? = nil, foundInDirectoryMadeBy maker: Int32? = nil) {
        self.change = change
        self.process = process
        self.foundInDirectoryMadeBy = maker
    }
}
