/// The reply to `status`: everything that is going on in the mount's coordination, as the
/// asking client may see it (entries about paths it could not read are left out).
public struct StatusReport: Sendable, Hashable, Codable {
    public struct Server: Sendable, Hashable, Codable {
        public var name: String
        public var version: Int
        public var socket: String
        /// Seconds since the server started.
        public var uptime: Double
        public var connections: Int

        public init(name: String, version: Int, socket: String, uptime: Double, connections: Int) {
            self.name = name
            self.version = version
            self.socket = socket
            self.uptime = uptime
            self.connections = connections
        }
    }

    public struct Connection: Sendable, Hashable, Codable {
        public var session: UInt64
        public var pid: Int32
        public var uid: UInt32
        public var client: String?
        /// Seconds since it connected.
        public var age: Double

        public init(session: UInt64, pid: Int32, uid: UInt32, client: String?, age: Double) {
            self.session = session
            self.pid = pid
            self.uid = uid
            self.client = client
            self.age = age
        }
    }

    public struct Events: Sendable, Hashable, Codable {
        /// The last sequence number handed out.
        public var sequence: UInt64
        /// The oldest sequence number `since` can still replay from.
        public var oldest: UInt64
        public var history: Int
        public var historyCapacity: Int
        public var subscribers: Int
        public var dropped: UInt64
        public var overflows: UInt64

        public init(sequence: UInt64, oldest: UInt64, history: Int, historyCapacity: Int, subscribers: Int, dropped: UInt64, overflows: UInt64) {
            self.sequence = sequence
            self.oldest = oldest
            self.history = history
            self.historyCapacity = historyCapacity
            self.subscribers = subscribers
            self.dropped = dropped
            self.overflows = overflows
        }
    }

    public struct Subscriber: Sendable, Hashable, Codable {
        public var session: UInt64
        public var subscription: UInt64
        public var path: String
        public var recursive: Bool
        public var kinds: [EventKind]
        public var queued: Int
        public var capacity: Int
        public var delivered: UInt64
        public var dropped: UInt64
        public var overflows: UInt64

        public init(session: UInt64, subscription: UInt64, path: String, recursive: Bool, kinds: [EventKind], queued: Int,
                    capacity: Int, delivered: UInt64, dropped: UInt64, overflows: UInt64) {
            self.session = session
            self.subscription = subscription
            self.path = path
            self.recursive = recursive
            self.kinds = kinds
            self.queued = queued
            self.capacity = capacity
            self.delivered = delivered
            self.dropped = dropped
            self.overflows = overflows
        }
    }

    public struct Presenter: Sendable, Hashable, Codable {
        public var presenter: UInt64
        /// The session it belongs to, when it is a control-socket client.
        public var session: UInt64?
        public var path: String
        public var answers: [AskKind]
        public var pid: Int32
        public var pending: Int
        public var asked: UInt64
        public var answered: UInt64
        public var timedOut: UInt64
        public var refused: UInt64

        public init(presenter: UInt64, session: UInt64?, path: String, answers: [AskKind], pid: Int32, pending: Int,
                    asked: UInt64, answered: UInt64, timedOut: UInt64, refused: UInt64) {
            self.presenter = presenter
            self.session = session
            self.path = path
            self.answers = answers
            self.pid = pid
            self.pending = pending
            self.asked = asked
            self.answered = answered
            self.timedOut = timedOut
            self.refused = refused
        }
    }

    public struct PresenterRequest: Sendable, Hashable, Codable {
        public var request: UInt64
        public var kind: AskKind
        public var path: String
        public var requester: Int32
        public var awaiting: [UInt64]
        public var waiting: Double

        public init(request: UInt64, kind: AskKind, path: String, requester: Int32, awaiting: [UInt64], waiting: Double) {
            self.request = request
            self.kind = kind
            self.path = path
            self.requester = requester
            self.awaiting = awaiting
            self.waiting = waiting
        }
    }

    /// Someone waiting for claims.
    public struct ClaimWaiter: Sendable, Hashable, Codable {
        public var paths: [String]
        public var mode: ClaimModeName
        public var owner: ClaimOwnerRecord
        /// Seconds it has waited.
        public var waiting: Double

        public init(paths: [String], mode: ClaimModeName, owner: ClaimOwnerRecord, waiting: Double) {
            self.paths = paths
            self.mode = mode
            self.owner = owner
            self.waiting = waiting
        }
    }

    public struct Claims: Sendable, Hashable, Codable {
        public var held: [ClaimHolderRecord]
        public var waiting: [ClaimWaiter]

        public init(held: [ClaimHolderRecord], waiting: [ClaimWaiter]) {
            self.held = held
            self.waiting = waiting
        }
    }

    public var server: Server
    public var connections: [Connection]
    public var events: Events
    public var subscribers: [Subscriber]
    public var presenters: [Presenter]
    public var presenterRequests: [PresenterRequest]
    public var claims: Claims

    public init(server: Server, connections: [Connection], events: Events, subscribers: [Subscriber], presenters: [Presenter],
                presenterRequests: [PresenterRequest], claims: Claims) {
        self.server = server
        self.connections = connections
        self.events = events
        self.subscribers = subscribers
        self.presenters = presenters
        self.presenterRequests = presenterRequests
        self.claims = claims
    }
}
