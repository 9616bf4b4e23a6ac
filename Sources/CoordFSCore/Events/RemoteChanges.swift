/// A change another host of the cluster committed, as its row in the cluster's events table
/// tells it: this host's caches follow it and its subscribers hear of it, marked with the
/// origin host (`origin.host`).
public struct RemoteChange: Sendable, Hashable {
    /// The row's place in the cluster's order (coordfs_events.cursor).
    public var cursor: Int64
    public var kind: ChangeKind
    public var path: MountPath
    /// For `moved` and `conflict`, as in `ChangeEvent`.
    public var destination: MountPath?
    public var isDirectory: Bool
    public var size: Int64?
    public var origin: EventOrigin
    /// For events about versions: the version's id (the hosts share the store).
    public var version: Int64?

    public init(cursor: Int64, kind: ChangeKind, path: MountPath, destination: MountPath?, isDirectory: Bool,
                size: Int64?, origin: EventOrigin, version: Int64? = nil) {
        self.cursor = cursor
        self.kind = kind
        self.path = path
        self.destination = destination
        self.isDirectory = isDirectory
        self.size = size
        self.origin = origin
        self.version = version
    }
}

/// Why this host cannot know what other hosts changed: anything may have changed, so every
/// cache goes and every subscriber is told to rescan, as when the watch of the backing lost
/// changes.
public enum ClusterResync: Sendable, Hashable, CustomStringConvertible {
    /// This host's cursor fell below what the cluster's events table still keeps (it was cut
    /// off for longer than the retention).
    case fellBehind
    /// A host's queue of events to publish overflowed: some of its commits were never told.
    case publisherOverflowed(EventHost)
    /// A host died: its last commits may never have been told.
    case hostDied(EventHost)

    public var description: String {
        switch self {
        case .fellBehind: "this host fell behind the cluster's retained events"
        case .publisherOverflowed(let host): "host \(host.name) (\(host.id)) dropped events it could not publish"
        case .hostDied(let host): "host \(host.name) (\(host.id)) died, its last commits perhaps untold"
        }
    }
}

/// What one read of the cluster's events table brought, in the cluster's order.
public struct RemoteBatch: Sendable, Hashable {
    public enum Item: Sendable, Hashable {
        case change(RemoteChange)
        case resync(ClusterResync)
    }

    public var items: [Item]

    public init(_ items: [Item]) {
        self.items = items
    }
}
