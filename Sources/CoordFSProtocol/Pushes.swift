import SystemPackage

/// A message the server sends on its own, not in reply to a request: `{"push": "…", …}`.
/// Pushes never carry an `id`; replies always do.
public enum Push: Sendable, Hashable {
    case event(EventPush)
    case overflow(OverflowPush)
    case ask(AskPush)
    case notify(NotifyPush)
    case broken(BrokenPush)
    case bye(ByePush)

    public var name: String {
        switch self {
        case .event: "event"
        case .overflow: "overflow"
        case .ask: "ask"
        case .notify: "notify"
        case .broken: "broken"
        case .bye: "bye"
        }
    }
}

/// A change event for one of the connection's subscriptions.
public struct EventPush: Sendable, Hashable, Codable {
    public var subscription: UInt64
    public var event: EventRecord

    public init(subscription: UInt64, event: EventRecord) {
        self.subscription = subscription
        self.event = event
    }
}

/// Events a subscription lost: `dropped` matching events (sequence numbers `first` to
/// `last`). Rescan, then carry on: events after `last` keep coming. The marker of the
/// `overflow` push, and what the client library and `coordfs watch` hand on.
public struct OverflowMarker: Sendable, Hashable, Codable {
    public var dropped: UInt64
    public var first: UInt64
    public var last: UInt64
    /// Absent when a queue filled because events were not read fast enough.
    public var reason: OverflowReason?

    public init(dropped: UInt64, first: UInt64, last: UInt64, reason: OverflowReason? = nil) {
        self.dropped = dropped
        self.first = first
        self.last = last
        self.reason = reason
    }
}

/// Why an overflow marker came other than a full queue.
public enum OverflowReason: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    /// The mount lost track of changes made behind it (its watch of the backing overflowed, or
    /// another host's changes could not be followed): anything may have changed, whatever
    /// `dropped` says.
    case backing

    public var description: String { rawValue }
}

/// A subscription's overflow marker: its fields sit beside `subscription`, as in
/// `{"push":"overflow","subscription":1,"dropped":812,"first":131,"last":942}`.
public struct OverflowPush: Sendable, Hashable, Codable {
    public var subscription: UInt64
    public var marker: OverflowMarker

    public init(subscription: UInt64, marker: OverflowMarker) {
        self.subscription = subscription
        self.marker = marker
    }

    private enum CodingKeys: String, CodingKey {
        case subscription
    }

    public init(from decoder: any Decoder) throws {
        subscription = try decoder.container(keyedBy: CodingKeys.self).decode(UInt64.self, forKey: .subscription)
        marker = try OverflowMarker(from: decoder)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(subscription, forKey: .subscription)
        try marker.encode(to: encoder)
    }
}

/// A question to a presenter; answer with `answer` (same `presenter` and `request`) before
/// `timeout` seconds pass, or the access goes on without you.
public struct AskPush: Sendable, Hashable, Codable {
    public var presenter: UInt64
    public var request: UInt64
    public var kind: AskKind
    /// The item being accessed.
    public var path: FilePath
    /// The presenter's own path (they differ when a directory presenter is asked about an item inside).
    public var presented: FilePath
    /// The process whose access raised the question.
    public var requester: Int32
    public var timeout: Double

    public init(presenter: UInt64, request: UInt64, kind: AskKind, path: FilePath, presented: FilePath, requester: Int32, timeout: Double) {
        self.presenter = presenter
        self.request = request
        self.kind = kind
        self.path = path
        self.presented = presented
        self.requester = requester
        self.timeout = timeout
    }

    private enum CodingKeys: String, CodingKey {
        case presenter, request, kind, path, pathBytes, presented, presentedBytes, requester, timeout
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        presenter = try container.decode(UInt64.self, forKey: .presenter)
        request = try container.decode(UInt64.self, forKey: .request)
        kind = try container.decode(AskKind.self, forKey: .kind)
        path = try container.decodePath(forKey: .path)
        presented = try container.decodePath(forKey: .presented)
        requester = try container.decode(Int32.self, forKey: .requester)
        timeout = try container.decode(Double.self, forKey: .timeout)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(presenter, forKey: .presenter)
        try container.encode(request, forKey: .request)
        try container.encode(kind, forKey: .kind)
        try container.encodePath(path, forKey: .path)
        try container.encodePath(presented, forKey: .presented)
        try container.encode(requester, forKey: .requester)
        try container.encode(timeout, forKey: .timeout)
    }
}

/// News for a presenter; nothing to answer.
public struct NotifyPush: Sendable, Hashable, Codable {
    public var presenter: UInt64
    public var kind: NoticeKind
    public var path: FilePath
    /// For `did-move`, the new path.
    public var destination: FilePath?
    /// The presenter's own path now (after a move, the new one).
    public var presented: FilePath
    /// For the version notices, the version's id.
    public var version: Int64?

    public init(presenter: UInt64, kind: NoticeKind, path: FilePath, destination: FilePath? = nil, presented: FilePath, version: Int64? = nil) {
        self.version = version
        self.presenter = presenter
        self.kind = kind
        self.path = path
        self.destination = destination
        self.presented = presented
    }

    private enum CodingKeys: String, CodingKey {
        case presenter, kind, path, pathBytes, destination, destinationBytes, presented, presentedBytes, version
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        presenter = try container.decode(UInt64.self, forKey: .presenter)
        kind = try container.decode(NoticeKind.self, forKey: .kind)
        path = try container.decodePath(forKey: .path)
        destination = try container.decodePathIfPresent(forKey: .destination)
        presented = try container.decodePath(forKey: .presented)
        version = try container.decodeIfPresent(Int64.self, forKey: .version)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(presenter, forKey: .presenter)
        try container.encode(kind, forKey: .kind)
        try container.encodePath(path, forKey: .path)
        try container.encodePathIfPresent(destination, forKey: .destination)
        try container.encodePath(presented, forKey: .presented)
        try container.encodeIfPresent(version, forKey: .version)
    }
}

/// One of the connection's claims was taken away: it kept a process of another user waiting
/// for the mount's break time. The claim is gone (as if released); the paths it held are
/// `read` and `write`, as its grant said.
public struct BrokenPush: Sendable, Hashable, Codable {
    public var claim: UInt64
    public var read: [FilePath]
    public var write: [FilePath]
    /// Who waited: the user and the process (for a client's claim, the root of its tree).
    public var byUid: UInt32
    public var byPid: Int32
    /// Seconds the claim had been held, and seconds the other had waited for it.
    public var held: Double
    public var waited: Double

    public init(claim: UInt64, read: [FilePath], write: [FilePath], byUid: UInt32, byPid: Int32, held: Double, waited: Double) {
        self.claim = claim
        self.read = read
        self.write = write
        self.byUid = byUid
        self.byPid = byPid
        self.held = held
        self.waited = waited
    }

    private enum CodingKeys: String, CodingKey {
        case claim, read, readBytes, write, writeBytes, byUid, byPid, held, waited
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        claim = try container.decode(UInt64.self, forKey: .claim)
        read = try container.decodePaths(forKey: .read)
        write = try container.decodePaths(forKey: .write)
        byUid = try container.decode(UInt32.self, forKey: .byUid)
        byPid = try container.decode(Int32.self, forKey: .byPid)
        held = try container.decode(Double.self, forKey: .held)
        waited = try container.decode(Double.self, forKey: .waited)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(claim, forKey: .claim)
        try container.encodePaths(read, forKey: .read)
        try container.encodePaths(write, forKey: .write)
        try container.encode(byUid, forKey: .byUid)
        try container.encode(byPid, forKey: .byPid)
        try container.encode(held, forKey: .held)
        try container.encode(waited, forKey: .waited)
    }
}

/// The server is about to close the connection (the mount is stopping).
public struct ByePush: Sendable, Hashable, Codable {
    public var reason: String

    public init(reason: String) {
        self.reason = reason
    }
}

private enum PushKey: String, CodingKey {
    case push
}

extension Push: Codable {
    public init(from decoder: any Decoder) throws {
        let name = try decoder.container(keyedBy: PushKey.self).decode(String.self, forKey: .push)
        switch name {
        case "event": self = .event(try .init(from: decoder))
        case "overflow": self = .overflow(try .init(from: decoder))
        case "ask": self = .ask(try .init(from: decoder))
        case "notify": self = .notify(try .init(from: decoder))
        case "broken": self = .broken(try .init(from: decoder))
        case "bye": self = .bye(try .init(from: decoder))
        default:
            throw DecodingError.dataCorruptedError(forKey: .push, in: try decoder.container(keyedBy: PushKey.self),
                                                   debugDescription: "unknown push \"\(name)\"")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: PushKey.self)
        try container.encode(name, forKey: .push)
        switch self {
        case .event(let body): try body.encode(to: encoder)
        case .overflow(let body): try body.encode(to: encoder)
        case .ask(let body): try body.encode(to: encoder)
        case .notify(let body): try body.encode(to: encoder)
        case .broken(let body): try body.encode(to: encoder)
        case .bye(let body): try body.encode(to: encoder)
        }
    }
}

/// The line of an `event` push written around the event's JSON as it was encoded once for
/// every subscriber, so that a subscription adds its frame and copies the shared bytes rather
/// than encoding the event again. Its bytes are `WireFormat.line(Push.event(…))`'s
/// (ProtocolServerLineTests holds them equal).
public struct EventPushFrame: Sendable {
    /// `{"push":"event","subscription":N,"event":`
    @usableFromInline let head: [UInt8]
    /// What closes the push object, and the line.
    @usableFromInline static let tail: [UInt8] = Array("}\n".utf8)

    public init(subscription: UInt64) {
        head = Array(#"{"push":"event","subscription":\#(subscription),"event":"#.utf8)
    }

    /// Hands `append` the line in order, in pieces (the frame's and `eventJSON` itself), for
    /// an output buffer to take without the whole line being put together first. `eventJSON`
    /// is a `EventRecord` as `JSONLineEncoder` encodes it.
    @inlinable
    public func write(around eventJSON: borrowing [UInt8], to append: (borrowing [UInt8]) -> Void) {
        append(head)
        append(eventJSON)
        append(Self.tail)
    }
}
