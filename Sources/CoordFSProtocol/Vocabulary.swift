import SystemPackage

/// The kinds of change events, as they appear on the wire.
public enum EventKind: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    case created, changed, deleted, moved, attributes, conflict
    case versionAdded = "version-added", versionRemoved = "version-removed", conflictResolved = "conflict-resolved"

    public var description: String { rawValue }
}

/// What a presenter can be asked (push `ask`), as it appears on the wire.
public enum AskKind: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    case save
    case relinquish
    case accommodateDeletion = "accommodate-deletion"

    public var description: String { rawValue }
}

/// What a presenter is told (push `notify`), as it appears on the wire.
public enum NoticeKind: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    case didChange = "did-change"
    case didMove = "did-move"
    case didDelete = "did-delete"
    case reacquire
    case didGainVersion = "did-gain-version"
    case didLoseVersion = "did-lose-version"
    case didResolveConflict = "did-resolve-conflict"

    public var description: String { rawValue }
}

/// A claim mode as status and conflict errors show it.
public enum ClaimModeName: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    case snapshotRead = "snapshot-read"
    case read
    case write
    case exclusive

    public var description: String { rawValue }
}

/// One change event on the wire. Paths are mount-relative ("/a/b"), their bytes exact;
/// `time` is seconds since the Unix epoch with a fraction.
public struct EventRecord: Sendable, Hashable, Codable {
    /// Who made the change. For a change made through the mount all three are there; for one
    /// made directly in the backing (`outside`), only what the kernel told the watch; for one
    /// another host of the cluster committed (`host`), that host's process.
    public struct Origin: Sendable, Hashable, Codable {
        /// Another host of the cluster (`coordfs mount --cluster`).
        public struct Host: Sendable, Hashable, Codable {
            /// The id the cluster knows the host by.
            public var id: Int64
            /// Its hostname.
            public var name: String

            public init(id: Int64, name: String) {
                self.id = id
                self.name = name
            }
        }

        public var pid: Int32?
        public var uid: UInt32?
        /// The process's command name (at most 15 bytes, as the kernel keeps it).
        public var process: String?
        /// True for a change made directly in the backing directory; absent otherwise.
        public var outside: Bool?
        /// The host whose mount committed the change; absent for this mount's own (and from
        /// servers that predate clusters).
        public var host: Host?

        public init(pid: Int32?, uid: UInt32?, process: String?, outside: Bool? = nil, host: Host? = nil) {
            self.pid = pid
            self.uid = uid
            self.process = process
            self.outside = outside
            self.host = host
        }

        /// Whether the change was made behind the mount.
        public var isOutside: Bool { outside == true }
    }

    public var sequence: UInt64
    public var kind: EventKind
    public var path: FilePath
    /// For `moved`, where the item went; for `conflict`, where the other version was kept.
    public var destination: FilePath?
    public var directory: Bool
    public var origin: Origin
    public var size: Int64?
    public var time: Double
    /// For the version kinds, the version's id (`coordfs versions cat PATH ID`).
    public var version: Int64?

    public init(sequence: UInt64, kind: EventKind, path: FilePath, destination: FilePath? = nil, directory: Bool,
                origin: Origin, size: Int64? = nil, time: Double, version: Int64? = nil) {
        self.version = version
        self.sequence = sequence
        self.kind = kind
        self.path = path
        self.destination = destination
        self.directory = directory
        self.origin = origin
        self.size = size
        self.time = time
    }

    private enum CodingKeys: String, CodingKey {
        case sequence, kind, path, pathBytes, destination, destinationBytes, directory, origin, size, time, version
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        sequence = try container.decode(UInt64.self, forKey: .sequence)
        kind = try container.decode(EventKind.self, forKey: .kind)
        path = try container.decodePath(forKey: .path)
        destination = try container.decodePathIfPresent(forKey: .destination)
        directory = try container.decode(Bool.self, forKey: .directory)
        origin = try container.decode(Origin.self, forKey: .origin)
        size = try container.decodeIfPresent(Int64.self, forKey: .size)
        time = try container.decode(Double.self, forKey: .time)
        version = try container.decodeIfPresent(Int64.self, forKey: .version)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(sequence, forKey: .sequence)
        try container.encode(kind, forKey: .kind)
        try container.encodePath(path, forKey: .path)
        try container.encodePathIfPresent(destination, forKey: .destination)
        try container.encode(directory, forKey: .directory)
        try container.encode(origin, forKey: .origin)
        try container.encodeIfPresent(size, forKey: .size)
        try container.encode(time, forKey: .time)
        try container.encodeIfPresent(version, forKey: .version)
    }
}

/// Who holds or waits for a claim.
public struct ClaimOwnerRecord: Sendable, Hashable, Codable, CustomStringConvertible {
    public enum Kind: String, Sendable, Hashable, Codable {
        /// A process, for the duration of one of its file operations or open handles.
        case process
        /// A control-socket client's explicit claim, on behalf of its process tree.
        case client
    }

    public var kind: Kind
    public var pid: Int32
    /// For `client`, the session that took it.
    public var session: UInt64?

    public init(kind: Kind, pid: Int32, session: UInt64? = nil) {
        self.kind = kind
        self.pid = pid
        self.session = session
    }

    public var description: String {
        switch kind {
        case .process: return "process \(pid)"
        case .client: return "session \(session.map(String.init) ?? "?") (pid \(pid))"
        }
    }
}

/// A claim someone holds (in status, and in conflict and timeout errors as a blocker).
public struct ClaimHolderRecord: Sendable, Hashable, Codable {
    public var path: FilePath
    public var mode: ClaimModeName
    public var owner: ClaimOwnerRecord
    /// Seconds it has been held.
    public var held: Double

    public init(path: FilePath, mode: ClaimModeName, owner: ClaimOwnerRecord, held: Double) {
        self.path = path
        self.mode = mode
        self.owner = owner
        self.held = held
    }

    private enum CodingKeys: String, CodingKey {
        case path, pathBytes, mode, owner, held
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        path = try container.decodePath(forKey: .path)
        mode = try container.decode(ClaimModeName.self, forKey: .mode)
        owner = try container.decode(ClaimOwnerRecord.self, forKey: .owner)
        held = try container.decode(Double.self, forKey: .held)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodePath(path, forKey: .path)
        try container.encode(mode, forKey: .mode)
        try container.encode(owner, forKey: .owner)
        try container.encode(held, forKey: .held)
    }
}

/// An empty reply or request body: `{}`.
public struct Empty: Sendable, Hashable, Codable {
    public init() {}
}
