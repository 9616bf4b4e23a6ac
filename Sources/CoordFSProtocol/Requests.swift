/// A request from a client: one JSON object per line, `{"id": …, "op": "…", …fields}`.
/// The fields of each operation sit beside `id` and `op`, so a message is written by hand
/// as easily as by a library.
public enum Request: Sendable, Hashable {
    case hello(Hello)
    case subscribe(Subscribe)
    case unsubscribe(Unsubscribe)
    case present(Present)
    case answer(Answer)
    case unpresent(Unpresent)
    case claim(Claim)
    case release(Release)
    case cancel(Cancel)
    case status(Status)

    /// The operation's name on the wire.
    public var op: String {
        switch self {
        case .hello: "hello"
        case .subscribe: "subscribe"
        case .unsubscribe: "unsubscribe"
        case .present: "present"
        case .answer: "answer"
        case .unpresent: "unpresent"
        case .claim: "claim"
        case .release: "release"
        case .cancel: "cancel"
        case .status: "status"
        }
    }

    public static let operations = ["hello", "subscribe", "unsubscribe", "present", "answer", "unpresent",
                                    "claim", "release", "cancel", "status"]

    /// Must come first on every connection.
    public struct Hello: Sendable, Hashable, Codable {
        /// The protocol version the client speaks.
        public var version: Int
        /// A name for status and the server's log ("coordfs watch", "my-sync-tool").
        public var client: String?

        public init(version: Int = ProtocolVersion.current, client: String? = nil) {
            self.version = version
            self.client = client
        }

        public struct Reply: Sendable, Hashable, Codable {
            public var version: Int
            public var server: String
            /// This connection's number (status shows it; explicit claims are owned by it).
            public var session: UInt64
            /// The credentials the server read from the socket (SO_PEERCRED).
            public var uid: UInt32
            public var gid: UInt32
            public var pid: Int32
            public var maxLine: Int

            public init(version: Int, server: String, session: UInt64, uid: UInt32, gid: UInt32, pid: Int32, maxLine: Int) {
                self.version = version
                self.server = server
                self.session = session
                self.uid = uid
                self.gid = gid
                self.pid = pid
                self.maxLine = maxLine
            }
        }
    }

    /// Asks for `event` pushes about a path: a file, a directory and its entries, or with
    /// `recursive` a whole subtree.
    public struct Subscribe: Sendable, Hashable, Codable {
        public var path: String
        public var recursive: Bool?
        /// Only these kinds (all when absent).
        public var kinds: [EventKind]?
        /// Replay the events after this sequence number first.
        public var since: UInt64?

        public init(path: String, recursive: Bool? = nil, kinds: [EventKind]? = nil, since: UInt64? = nil) {
            self.path = path
            self.recursive = recursive
            self.kinds = kinds
            self.since = since
        }

        public struct Reply: Sendable, Hashable, Codable {
            public var subscription: UInt64
            public var path: String
            /// The last sequence number published when the subscription began (or, after a
            /// replay, the last one replayed).
            public var sequence: UInt64
            /// How many events from history follow this reply (with `since`).
            public var replayed: Int
            /// True when `since` reaches back further than the history: events were missed,
            /// rescan what you watch; live events follow.
            public var resync: Bool

            public init(subscription: UInt64, path: String, sequence: UInt64, replayed: Int, resync: Bool) {
                self.subscription = subscription
                self.path = path
                self.sequence = sequence
                self.replayed = replayed
                self.resync = resync
            }
        }
    }

    public struct Unsubscribe: Sendable, Hashable, Codable {
        public var subscription: UInt64

        public init(subscription: UInt64) {
            self.subscription = subscription
        }
    }

    /// Registers as a presenter of a path; `ask` pushes come for the kinds in `answers`,
    /// `notify` pushes for every change, move and deletion.
    public struct Present: Sendable, Hashable, Codable {
        public var path: String
        public var answers: [AskKind]?

        public init(path: String, answers: [AskKind]? = nil) {
            self.path = path
            self.answers = answers
        }

        public struct Reply: Sendable, Hashable, Codable {
            public var presenter: UInt64
            public var path: String

            public init(presenter: UInt64, path: String) {
                self.presenter = presenter
                self.path = path
            }
        }
    }

    /// Answers an `ask` push.
    public struct Answer: Sendable, Hashable, Codable {
        public enum Verdict: String, Sendable, Hashable, Codable {
            case ok
            /// Only a refused `accommodate-deletion` stops anything (the deletion fails).
            case refuse
        }

        public var presenter: UInt64
        public var request: UInt64
        public var verdict: Verdict
        public var reason: String?

        public init(presenter: UInt64, request: UInt64, verdict: Verdict, reason: String? = nil) {
            self.presenter = presenter
            self.request = request
            self.verdict = verdict
            self.reason = reason
        }

        public struct Reply: Sendable, Hashable, Codable {
            /// False when the request was no longer waiting for this answer (too late).
            public var accepted: Bool

            public init(accepted: Bool) {
                self.accepted = accepted
            }
        }
    }

    public struct Unpresent: Sendable, Hashable, Codable {
        public var presenter: UInt64

        public init(presenter: UInt64) {
            self.presenter = presenter
        }
    }

    /// Takes explicit claims on several paths at once, all or none: `read` ones keep others
    /// from changing the paths, `write` ones keep others from seeing or changing them. Held
    /// until `release` or until the connection closes; processes in the client's own process
    /// tree pass through them.
    public struct Claim: Sendable, Hashable, Codable {
        public var read: [String]?
        public var write: [String]?
        /// Seconds to wait for conflicting claims to go (the server caps it; default: the
        /// server's claim timeout).
        public var wait: Double?
        /// Fail at once instead of waiting.
        public var nonblock: Bool?

        public init(read: [String]? = nil, write: [String]? = nil, wait: Double? = nil, nonblock: Bool? = nil) {
            self.read = read
            self.write = write
            self.wait = wait
            self.nonblock = nonblock
        }

        public struct Reply: Sendable, Hashable, Codable {
            public var claim: UInt64
            public var read: [String]
            public var write: [String]
            /// Seconds it waited.
            public var waited: Double

            public init(claim: UInt64, read: [String], write: [String], waited: Double) {
                self.claim = claim
                self.read = read
                self.write = write
                self.waited = waited
            }
        }
    }

    public struct Release: Sendable, Hashable, Codable {
        public var claim: UInt64

        public init(claim: UInt64) {
            self.claim = claim
        }
    }

    /// Gives up a claim request still waiting (its reply is then a `cancelled` error).
    public struct Cancel: Sendable, Hashable, Codable {
        public var request: RequestID

        public init(request: RequestID) {
            self.request = request
        }

        public struct Reply: Sendable, Hashable, Codable {
            /// False when that request was not waiting (any more).
            public var cancelled: Bool

            public init(cancelled: Bool) {
                self.cancelled = cancelled
            }
        }
    }

    /// Asks for a `StatusReport`.
    public struct Status: Sendable, Hashable, Codable {
        public init() {}
    }
}

/// A request with its id: what one line from a client holds.
public struct RequestEnvelope: Sendable, Hashable {
    public var id: RequestID
    public var request: Request

    public init(id: RequestID, request: Request) {
        self.id = id
        self.request = request
    }
}

/// Why a line is not a request the server can act on; the server answers it with an error
/// carrying `id` when the line had a usable one.
public struct RequestRejection: Error, Sendable, Hashable {
    public var id: RequestID?
    public var code: ErrorCode
    public var message: String

    public init(id: RequestID?, code: ErrorCode, message: String) {
        self.id = id
        self.code = code
        self.message = message
    }
}

private enum EnvelopeKey: String, CodingKey {
    case id, op
}

extension RequestEnvelope: Codable {
    public init(from decoder: any Decoder) throws {
        let container: KeyedDecodingContainer<EnvelopeKey>
        do {
            container = try decoder.container(keyedBy: EnvelopeKey.self)
        } catch {
            throw RequestRejection(id: nil, code: .badJSON, message: "a message is one JSON object on one line")
        }
        var id: RequestID?
        do {
            id = try container.decodeIfPresent(RequestID.self, forKey: .id)
        } catch {
            throw RequestRejection(id: nil, code: .badRequest, message: "\"id\" must be an integer or a string")
        }
        guard let id else {
            throw RequestRejection(id: nil, code: .badRequest, message: "a request needs an \"id\" (an integer or a string)")
        }
        let op: String
        do {
            guard let value = try container.decodeIfPresent(String.self, forKey: .op) else {
                throw RequestRejection(id: id, code: .badRequest, message: "a request needs an \"op\": one of \(Request.operations.joined(separator: ", "))")
            }
            op = value
        } catch let rejection as RequestRejection {
            throw rejection
        } catch {
            throw RequestRejection(id: id, code: .badRequest, message: "\"op\" must be a string")
        }
        do {
            switch op {
            case "hello": request = .hello(try .init(from: decoder))
            case "subscribe": request = .subscribe(try .init(from: decoder))
            case "unsubscribe": request = .unsubscribe(try .init(from: decoder))
            case "present": request = .present(try .init(from: decoder))
            case "answer": request = .answer(try .init(from: decoder))
            case "unpresent": request = .unpresent(try .init(from: decoder))
            case "claim": request = .claim(try .init(from: decoder))
            case "release": request = .release(try .init(from: decoder))
            case "cancel": request = .cancel(try .init(from: decoder))
            case "status": request = .status(Request.Status())
            default:
                throw RequestRejection(id: id, code: .unknownRequest,
                                       message: "unknown op \"\(op.prefix(64))\"; known: \(Request.operations.joined(separator: ", "))")
            }
        } catch let rejection as RequestRejection {
            throw rejection
        } catch let error as DecodingError {
            throw RequestRejection(id: id, code: .badRequest, message: "\(op): \(WireFormat.explain(error))")
        } catch {
            throw RequestRejection(id: id, code: .badRequest, message: "\(op): \(error)")
        }
        self.id = id
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: EnvelopeKey.self)
        try container.encode(id, forKey: .id)
        try container.encode(request.op, forKey: .op)
        switch request {
        case .hello(let body): try body.encode(to: encoder)
        case .subscribe(let body): try body.encode(to: encoder)
        case .unsubscribe(let body): try body.encode(to: encoder)
        case .present(let body): try body.encode(to: encoder)
        case .answer(let body): try body.encode(to: encoder)
        case .unpresent(let body): try body.encode(to: encoder)
        case .claim(let body): try body.encode(to: encoder)
        case .release(let body): try body.encode(to: encoder)
        case .cancel(let body): try body.encode(to: encoder)
        case .status(let body): try body.encode(to: encoder)
        }
    }
}
