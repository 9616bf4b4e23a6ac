/// The code of an error reply: a short, stable, kebab-case word a program can switch on.
/// Unknown codes decode fine (a newer server may add some).
public struct ErrorCode: RawRepresentable, Sendable, Hashable, Codable, ExpressibleByStringLiteral, CustomStringConvertible {
    public let rawValue: String

    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    public init(stringLiteral value: String) {
        self.rawValue = value
    }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public var description: String { rawValue }

    /// The line is not JSON, or not a JSON object.
    public static let badJSON: ErrorCode = "bad-json"
    /// A JSON object, but a field is missing, has the wrong type or a value that makes no sense.
    public static let badRequest: ErrorCode = "bad-request"
    /// `op` names no operation this server knows.
    public static let unknownRequest: ErrorCode = "unknown-request"
    /// The line is longer than the server's limit; it was skipped.
    public static let tooLarge: ErrorCode = "too-large"
    /// The first request on a connection must be `hello`.
    public static let helloRequired: ErrorCode = "hello-required"
    public static let unsupportedVersion: ErrorCode = "unsupported-version"
    /// A path that is not mount-relative or leaves the mount ("..").
    public static let invalidPath: ErrorCode = "invalid-path"
    /// The client's user could not read the path, or the thing named belongs to another session.
    public static let notPermitted: ErrorCode = "not-permitted"
    /// The directory that would hold the path does not exist.
    public static let noSuchPath: ErrorCode = "no-such-path"
    /// No subscription, presenter, claim or request with that number in this session.
    public static let notFound: ErrorCode = "not-found"
    /// A claim asked for without waiting conflicts with claims held by others (see `blockers`).
    public static let conflict: ErrorCode = "conflict"
    /// A claim could not be had before its wait ran out (see `blockers`).
    public static let timeout: ErrorCode = "timeout"
    /// The mount is one of several hosts and cannot reach the cluster's database, so it cannot
    /// prove a claim against the other hosts (`coordfs mount --cluster`).
    public static let cutOff: ErrorCode = "cut-off"
    /// A waiting claim request was given up with `cancel`.
    public static let cancelled: ErrorCode = "cancelled"
    /// A per-connection or per-server limit was reached (too many subscriptions, connections…).
    public static let limit: ErrorCode = "limit"
    /// The server is shutting down.
    public static let closing: ErrorCode = "closing"
    /// The mount keeps no versions (it was mounted without `--versions`).
    public static let versionsOff: ErrorCode = "versions-off"
    /// The file has no such version (never, or removed meanwhile), or no versions at all.
    public static let noVersion: ErrorCode = "no-version"
    /// A bug on the server's side; the connection lives on.
    public static let `internal`: ErrorCode = "internal"
}

/// The body of an error reply.
public struct ErrorDetail: Error, Sendable, Hashable, Codable, CustomStringConvertible {
    public var code: ErrorCode
    public var message: String
    /// For `conflict` and `timeout`: the claims in the way.
    public var blockers: [ClaimHolderRecord]?

    public init(code: ErrorCode, message: String, blockers: [ClaimHolderRecord]? = nil) {
        self.code = code
        self.message = message
        self.blockers = blockers
    }

    public var description: String { "\(message) (\(code))" }
}

/// A successful reply: `{"id": …, "ok": {…}}`.
public struct OkReply<Body: Codable & Sendable>: Sendable, Codable {
    public var id: RequestID
    public var ok: Body

    public init(id: RequestID, ok: Body) {
        self.id = id
        self.ok = ok
    }
}

/// A failed request: `{"id": … or null, "error": {"code": "…", "message": "…"}}`. The id is
/// null when the line had none the server could read.
public struct ErrorReply: Sendable, Hashable, Codable {
    public var id: RequestID?
    public var error: ErrorDetail

    public init(id: RequestID?, error: ErrorDetail) {
        self.id = id
        self.error = error
    }

    private enum CodingKeys: String, CodingKey { case id, error }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        // Always present, so "has an id key" tells every reply from every push.
        if let id { try container.encode(id, forKey: .id) } else { try container.encodeNil(forKey: .id) }
        try container.encode(error, forKey: .error)
    }
}

extension ErrorReply {
    /// The reply as its line. It always goes out, so that no request waits for an answer the
    /// server could not write: blockers that cannot be encoded (a time JSON has no number for)
    /// are left off, and what remains is text and integers.
    public var line: [UInt8] {
        if let line = try? WireFormat.line(self) { return line }
        var bare = self
        bare.error.blockers = nil
        return (try? WireFormat.line(bare)) ?? []
    }
}
