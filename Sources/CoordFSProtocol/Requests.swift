import SystemPackage

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
    case versions(Versions)
    case versionRead(VersionRead)
    case versionChange(VersionChange)
    case versionRemove(VersionRemove)
    case conflicts(Conflicts)
    case versionRestored(VersionRestored)

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
        case .versions: "versions"
        case .versionRead: "version-read"
        case .versionChange: "version-change"
        case .versionRemove: "version-remove"
        case .conflicts: "conflicts"
        case .versionRestored: "version-restored"
        }
    }

    public static let operations = ["hello", "subscribe", "unsubscribe", "present", "answer", "unpresent",
                                    "claim", "release", "cancel", "status", "versions", "version-read",
                                    "version-change", "version-remove", "conflicts", "version-restored"]

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
        public var path: FilePath
        public var recursive: Bool?
        /// Only these kinds (all when absent).
        public var kinds: [EventKind]?
        /// Replay the events after this sequence number first.
        public var since: UInt64?

        public init(path: FilePath, recursive: Bool? = nil, kinds: [EventKind]? = nil, since: UInt64? = nil) {
            self.path = path
            self.recursive = recursive
            self.kinds = kinds
            self.since = since
        }

        private enum CodingKeys: String, CodingKey {
            case path, pathBytes, recursive, kinds, since
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            path = try container.decodePath(forKey: .path)
            recursive = try container.decodeIfPresent(Bool.self, forKey: .recursive)
            kinds = try container.decodeIfPresent([EventKind].self, forKey: .kinds)
            since = try container.decodeIfPresent(UInt64.self, forKey: .since)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encodePath(path, forKey: .path)
            try container.encodeIfPresent(recursive, forKey: .recursive)
            try container.encodeIfPresent(kinds, forKey: .kinds)
            try container.encodeIfPresent(since, forKey: .since)
        }

        public struct Reply: Sendable, Hashable, Codable {
            public var subscription: UInt64
            public var path: FilePath
            /// The last sequence number published when the subscription began (or, after a
            /// replay, the last one replayed).
            public var sequence: UInt64
            /// How many events from history follow this reply (with `since`).
            public var replayed: Int
            /// True when `since` reaches back further than the history: events were missed,
            /// rescan what you watch; live events follow.
            public var resync: Bool

            public init(subscription: UInt64, path: FilePath, sequence: UInt64, replayed: Int, resync: Bool) {
                self.subscription = subscription
                self.path = path
                self.sequence = sequence
                self.replayed = replayed
                self.resync = resync
            }

            private enum CodingKeys: String, CodingKey {
                case subscription, path, pathBytes, sequence, replayed, resync
            }

            public init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: CodingKeys.self)
                subscription = try container.decode(UInt64.self, forKey: .subscription)
                path = try container.decodePath(forKey: .path)
                sequence = try container.decode(UInt64.self, forKey: .sequence)
                replayed = try container.decode(Int.self, forKey: .replayed)
                resync = try container.decode(Bool.self, forKey: .resync)
            }

            public func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: CodingKeys.self)
                try container.encode(subscription, forKey: .subscription)
                try container.encodePath(path, forKey: .path)
                try container.encode(sequence, forKey: .sequence)
                try container.encode(replayed, forKey: .replayed)
                try container.encode(resync, forKey: .resync)
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
        public var path: FilePath
        public var answers: [AskKind]?

        public init(path: FilePath, answers: [AskKind]? = nil) {
            self.path = path
            self.answers = answers
        }

        private enum CodingKeys: String, CodingKey {
            case path, pathBytes, answers
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            path = try container.decodePath(forKey: .path)
            answers = try container.decodeIfPresent([AskKind].self, forKey: .answers)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encodePath(path, forKey: .path)
            try container.encodeIfPresent(answers, forKey: .answers)
        }

        public struct Reply: Sendable, Hashable, Codable {
            public var presenter: UInt64
            public var path: FilePath

            public init(presenter: UInt64, path: FilePath) {
                self.presenter = presenter
                self.path = path
            }

            private enum CodingKeys: String, CodingKey {
                case presenter, path, pathBytes
            }

            public init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: CodingKeys.self)
                presenter = try container.decode(UInt64.self, forKey: .presenter)
                path = try container.decodePath(forKey: .path)
            }

            public func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: CodingKeys.self)
                try container.encode(presenter, forKey: .presenter)
                try container.encodePath(path, forKey: .path)
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
        public var read: [FilePath]?
        public var write: [FilePath]?
        /// Seconds to wait for conflicting claims to go (the server caps it; default: the
        /// server's claim timeout).
        public var wait: Double?
        /// Fail at once instead of waiting.
        public var nonblock: Bool?

        public init(read: [FilePath]? = nil, write: [FilePath]? = nil, wait: Double? = nil, nonblock: Bool? = nil) {
            self.read = read
            self.write = write
            self.wait = wait
            self.nonblock = nonblock
        }

        private enum CodingKeys: String, CodingKey {
            case read, readBytes, write, writeBytes, wait, nonblock
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            read = try container.decodePathsIfPresent(forKey: .read)
            write = try container.decodePathsIfPresent(forKey: .write)
            wait = try container.decodeIfPresent(Double.self, forKey: .wait)
            nonblock = try container.decodeIfPresent(Bool.self, forKey: .nonblock)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encodePathsIfPresent(read, forKey: .read)
            try container.encodePathsIfPresent(write, forKey: .write)
            try container.encodeIfPresent(wait, forKey: .wait)
            try container.encodeIfPresent(nonblock, forKey: .nonblock)
        }

        public struct Reply: Sendable, Hashable, Codable {
            public var claim: UInt64
            public var read: [FilePath]
            public var write: [FilePath]
            /// Seconds it waited.
            public var waited: Double

            public init(claim: UInt64, read: [FilePath], write: [FilePath], waited: Double) {
                self.claim = claim
                self.read = read
                self.write = write
                self.waited = waited
            }

            private enum CodingKeys: String, CodingKey {
                case claim, read, readBytes, write, writeBytes, waited
            }

            public init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: CodingKeys.self)
                claim = try container.decode(UInt64.self, forKey: .claim)
                read = try container.decodePaths(forKey: .read)
                write = try container.decodePaths(forKey: .write)
                waited = try container.decode(Double.self, forKey: .waited)
            }

            public func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: CodingKeys.self)
                try container.encode(claim, forKey: .claim)
                try container.encodePaths(read, forKey: .read)
                try container.encodePaths(write, forKey: .write)
                try container.encode(waited, forKey: .waited)
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
