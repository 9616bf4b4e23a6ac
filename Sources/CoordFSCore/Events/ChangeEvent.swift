import Glibc

/// What happened to an item, as subscribers see it.
public enum ChangeKind: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// A new name appeared (a file appears whole, once its writer commits it).
    case created
    /// New content was committed (or an in-place write's handle closed).
    case changed
    /// A name went away.
    case deleted
    /// A name moved: the event's `path` is where it was, `destination` where it is now.
    case moved
    /// Mode, owner, times or extended attributes changed.
    case attributes
    /// A save through the mount met a change made behind it: the save committed, and the
    /// version written behind the mount was kept under another name (the event's `destination`).
    case conflict
    /// The version store kept a version of the file (`coordfs mount --versions`); the event's
    /// `version` is its id.
    case versionAdded = "version-added"
    /// A version of the file went: expired, or removed by hand (`version`).
    case versionRemoved = "version-removed"
    /// A conflict version of the file was marked resolved (`version`).
    case conflictResolved = "conflict-resolved"

    public var description: String { rawValue }
}

/// A set of change kinds as one bit each, so a subscriber's filter is tested with one `&`
/// on the publishing thread instead of a hash lookup.
public struct ChangeKindSet: OptionSet, Sendable, Hashable {
    public let rawValue: UInt16

    public init(rawValue: UInt16) {
        self.rawValue = rawValue
    }

    public init(_ kind: ChangeKind) {
        switch kind {
        case .created: rawValue = 1 << 0
        case .changed: rawValue = 1 << 1
        case .deleted: rawValue = 1 << 2
        case .moved: rawValue = 1 << 3
        case .attributes: rawValue = 1 << 4
        case .conflict: rawValue = 1 << 5
        case .versionAdded: rawValue = 1 << 6
        case .versionRemoved: rawValue = 1 << 7
        case .conflictResolved: rawValue = 1 << 8
        }
    }

    public init(_ kinds: some Sequence<ChangeKind>) {
        self.rawValue = kinds.reduce(0) { $0 | ChangeKindSet($1).rawValue }
    }

    public static let created = ChangeKindSet(ChangeKind.created)
    public static let changed = ChangeKindSet(ChangeKind.changed)
    public static let deleted = ChangeKindSet(ChangeKind.deleted)
    public static let moved = ChangeKindSet(ChangeKind.moved)
    public static let attributes = ChangeKindSet(ChangeKind.attributes)
    public static let conflict = ChangeKindSet(ChangeKind.conflict)
    public static let all = ChangeKindSet(ChangeKind.allCases)

    public func contains(_ kind: ChangeKind) -> Bool {
        rawValue & ChangeKindSet(kind).rawValue != 0
    }

    /// The kinds in their declaration order.
    public var kinds: [ChangeKind] {
        ChangeKind.allCases.filter { contains($0) }
    }
}

/// Another host of the cluster (`--cluster`), as the events of its commits name it.
public struct EventHost: Sendable, Hashable {
    /// The id the cluster knows the host by (coordfs_hosts.host_id).
    public var id: Int64
    /// Its hostname.
    public var name: String

    public init(id: Int64, name: String) {
        self.id = id
        self.name = name
    }
}

/// Who caused a change: the process the kernel named in the request, or for a change made
/// directly in the backing, what the watch of the backing learnt of its maker, or for a
/// change another host of the cluster committed, that host's process.
public struct EventOrigin: Sendable, Hashable {
    /// 0 when not known (a change behind the mount seen through inotify).
    public var pid: Int32
    /// `unknownUID` when not known.
    public var uid: UInt32
    /// The process's command name (`/proc/PID/comm`); empty when not known.
    public var processName: String
    /// The change was made directly in the backing, not through the mount.
    public var isOutside: Bool
    /// The host whose mount committed the change; nil for this host's own. Its pid, uid and
    /// process name are that host's.
    public var host: EventHost?

    public static let unknownUID = UInt32.max

    public init(pid: Int32, uid: UInt32, processName: String, isOutside: Bool = false, host: EventHost? = nil) {
        self.pid = pid
        self.uid = uid
        self.processName = processName
        self.isOutside = isOutside
        self.host = host
    }
}

/// Wall-clock time of an event, in nanoseconds since the Unix epoch: what a subscriber on
/// another machine or in another language can compare with its own clock.
public struct EventTime: Sendable, Hashable, Comparable {
    public var nanosecondsSince1970: Int64

    public init(nanosecondsSince1970: Int64) {
        self.nanosecondsSince1970 = nanosecondsSince1970
    }

    /// The realtime clock, read through the vDSO (no system call).
    public static func now() -> EventTime {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return EventTime(nanosecondsSince1970: Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec))
    }

    public var secondsSince1970: Double { Double(nanosecondsSince1970) / 1e9 }

    public static func < (lhs: EventTime, rhs: EventTime) -> Bool {
        lhs.nanosecondsSince1970 < rhs.nanosecondsSince1970
    }
}

/// One change, as committed. Sequence numbers grow by one per event for the life of a mount,
/// so a subscriber can tell whether it missed anything and ask to replay from where it was.
public struct ChangeEvent: Sendable, Hashable {
    public let sequence: UInt64
    public let kind: ChangeKind
    /// The item; for `moved`, where it was.
    public let path: MountPath
    /// For `moved`, where the item is now; for `conflict`, where the other version was kept;
    /// nil for every other kind.
    public let destination: MountPath?
    public let isDirectory: Bool
    public let origin: EventOrigin
    /// The item's size after the change, where it has one (files, after created/changed; for
    /// the version kinds, the version's).
    public let size: Int64?
    public let time: EventTime
    /// For the version kinds, the version's id.
    public let version: Int64?

    public init(sequence: UInt64, kind: ChangeKind, path: MountPath, destination: MountPath?, isDirectory: Bool,
                origin: EventOrigin, size: Int64?, time: EventTime, version: Int64? = nil) {
        self.version = version
        self.sequence = sequence
        self.kind = kind
        self.path = path
        self.destination = destination
        self.isDirectory = isDirectory
        self.origin = origin
        self.size = size
        self.time = time
    }

    /// The same change told as another kind about another path (a move seen from one side only).
    public func retold(as kind: ChangeKind, path: MountPath) -> ChangeEvent {
        ChangeEvent(sequence: sequence, kind: kind, path: path, destination: nil, isDirectory: isDirectory,
                    origin: origin, size: size, time: time, version: version)
    }
}
