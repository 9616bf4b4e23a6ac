import SystemPackage

/// A message the server sends on its own, not in reply to a request: `{"push": "…", …}`.
/// Pushes never carry an `id`; replies always do.
public enum Push: Sendable, Hashable {
    case event(EventPush)
    case overflow(OverflowPush)
    case ask(AskPush)
    case notify(NotifyPush)
    case bye(ByePush)

    public var name: String {
        switch self {
        case .event: "event"
        case .overflow: "overflow"
        case .ask: "ask"
        case .notify: "notify"
        case .bye: "bye"
        }
    }
}

/// A change event for one of the connection's subscriptions.
public struct EventPush: Sendable, Hashable, Codable {
    public var subscription: UInt64
    public var event: WatchEvent

    public init(subscription: UInt64, event: WatchEvent) {
        self.subscription = subscription
        self.event = event
    }
}

/// The subscription's queue filled because the client did not read fast enough: `dropped`
/// matching events (sequence numbers `first` to `last`) were lost. Rescan, then carry on:
/// events after `last` keep coming.
public struct OverflowPush: Sendable, Hashable, Codable {
    public var subscription: UInt64
    public var dropped: UInt64
    public var first: UInt64
    public var last: UInt64
    /// Absent when the subscriber's queue filled; `backing` when the watch of the backing lost
    /// changes made behind the mount (anything may have changed).
    public var reason: String?

    public init(subscription: UInt64, dropped: UInt64, first: UInt64, last: UInt64, reason: String? = nil) {
        self.subscription = subscription
        self.dropped = dropped
        self.first = first
        self.last = last
        self.reason = reason
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

    public init(presenter: UInt64, kind: NoticeKind, path: FilePath, destination: FilePath? = nil, presented: FilePath) {
        self.presenter = presenter
        self.kind = kind
        self.path = path
        self.destination = destination
        self.presented = presented
    }

    private enum CodingKeys: String, CodingKey {
        case presenter, kind, path, pathBytes, destination, destinationBytes, presented, presentedBytes
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        presenter = try container.decode(UInt64.self, forKey: .presenter)
        kind = try container.decode(NoticeKind.self, forKey: .kind)
        path = try container.decodePath(forKey: .path)
        destination = try container.decodePathIfPresent(forKey: .destination)
        presented = try container.decodePath(forKey: .presented)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(presenter, forKey: .presenter)
        try container.encode(kind, forKey: .kind)
        try container.encodePath(path, forKey: .path)
        try container.encodePathIfPresent(destination, forKey: .destination)
        try container.encodePath(presented, forKey: .presented)
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
        case .bye(let body): try body.encode(to: encoder)
        }
    }
}
