/// The kinds of change events, as they appear on the wire.
public enum EventKind: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    case created, changed, deleted, moved, attributes

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

/// One change event on the wire. Paths are mount-relative ("/a/b"); `time` is seconds since
/// the Unix epoch with a fraction.
public struct WatchEvent: Sendable, Hashable, Codable {
    public struct Origin: Sendable, Hashable, Codable {
        public var pid: Int32
        public var uid: UInt32
        /// The process's command name (at most 15 bytes, as the kernel keeps it).
        public var process: String

        public init(pid: Int32, uid: UInt32, process: String) {
            self.pid = pid
            self.uid = uid
            self.process = process
        }
    }

    public var sequence: UInt64
    public var kind: EventKind
    public var path: String
    /// For `moved`, where the item went.
    public var destination: String?
    public var directory: Bool
    public var origin: Origin
    public var size: Int64?
    public var time: Double

    public init(sequence: UInt64, kind: EventKind, path: String, destination: String? = nil, directory: Bool,
                origin: Origin, size: Int64? = nil, time: Double) {
        self.sequence = sequence
        self.kind = kind
        self.path = path
        self.destination = destination
        self.directory = directory
        self.origin = origin
        self.size = size
        self.time = time
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
    public var path: String
    public var mode: ClaimModeName
    public var owner: ClaimOwnerRecord
    /// Seconds it has been held.
    public var held: Double

    public init(path: String, mode: ClaimModeName, owner: ClaimOwnerRecord, held: Double) {
        self.path = path
        self.mode = mode
        self.owner = owner
        self.held = held
    }
}

/// An empty reply or request body: `{}`.
public struct Empty: Sendable, Hashable, Codable {
    public init() {}
}
