import SystemPackage

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
        /// How the mount watches its backing for changes made directly in it (`fanotify` or
        /// `inotify`); absent when it does not.
        public var watch: String?

        public init(name: String, version: Int, socket: String, uptime: Double, connections: Int, watch: String? = nil) {
            self.name = name
            self.version = version
            self.socket = socket
            self.uptime = uptime
            self.connections = connections
            self.watch = watch
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
        /// What the history keeps, and may keep, in bytes (absent from servers before them).
        public var historyBytes: Int?
        public var historyByteCapacity: Int?
        public var subscribers: Int
        public var dropped: UInt64
        public var overflows: UInt64

        public init(sequence: UInt64, oldest: UInt64, history: Int, historyCapacity: Int, historyBytes: Int? = nil,
                    historyByteCapacity: Int? = nil, subscribers: Int, dropped: UInt64, overflows: UInt64) {
            self.sequence = sequence
            self.oldest = oldest
            self.history = history
            self.historyCapacity = historyCapacity
            self.historyBytes = historyBytes
            self.historyByteCapacity = historyByteCapacity
            self.subscribers = subscribers
            self.dropped = dropped
            self.overflows = overflows
        }
    }

    public struct Subscriber: Sendable, Hashable, Codable {
        public var session: UInt64
        public var subscription: UInt64
        public var path: FilePath
        public var recursive: Bool
        public var kinds: [EventKind]
        public var queued: Int
        public var capacity: Int
        public var delivered: UInt64
        public var dropped: UInt64
        public var overflows: UInt64

        public init(session: UInt64, subscription: UInt64, path: FilePath, recursive: Bool, kinds: [EventKind], queued: Int,
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

        private enum CodingKeys: String, CodingKey {
            case session, subscription, path, pathBytes, recursive, kinds, queued, capacity, delivered, dropped, overflows
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            session = try container.decode(UInt64.self, forKey: .session)
            subscription = try container.decode(UInt64.self, forKey: .subscription)
            path = try container.decodePath(forKey: .path)
            recursive = try container.decode(Bool.self, forKey: .recursive)
            kinds = try container.decode([EventKind].self, forKey: .kinds)
            queued = try container.decode(Int.self, forKey: .queued)
            capacity = try container.decode(Int.self, forKey: .capacity)
            delivered = try container.decode(UInt64.self, forKey: .delivered)
            dropped = try container.decode(UInt64.self, forKey: .dropped)
            overflows = try container.decode(UInt64.self, forKey: .overflows)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(session, forKey: .session)
            try container.encode(subscription, forKey: .subscription)
            try container.encodePath(path, forKey: .path)
            try container.encode(recursive, forKey: .recursive)
            try container.encode(kinds, forKey: .kinds)
            try container.encode(queued, forKey: .queued)
            try container.encode(capacity, forKey: .capacity)
            try container.encode(delivered, forKey: .delivered)
            try container.encode(dropped, forKey: .dropped)
            try container.encode(overflows, forKey: .overflows)
        }
    }

    public struct Presenter: Sendable, Hashable, Codable {
        public var presenter: UInt64
        /// The session it belongs to, when it is a control-socket client.
        public var session: UInt64?
        public var path: FilePath
        public var answers: [AskKind]
        public var pid: Int32
        public var pending: Int
        public var asked: UInt64
        public var answered: UInt64
        public var timedOut: UInt64
        public var refused: UInt64
        /// It let an ask time out and has answered nothing since: asks skip it until it answers.
        public var unresponsive: Bool

        public init(presenter: UInt64, session: UInt64?, path: FilePath, answers: [AskKind], pid: Int32, pending: Int,
                    asked: UInt64, answered: UInt64, timedOut: UInt64, refused: UInt64, unresponsive: Bool = false) {
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
            self.unresponsive = unresponsive
        }

        private enum CodingKeys: String, CodingKey {
            case presenter, session, path, pathBytes, answers, pid, pending, asked, answered, timedOut, refused, unresponsive
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            presenter = try container.decode(UInt64.self, forKey: .presenter)
            session = try container.decodeIfPresent(UInt64.self, forKey: .session)
            path = try container.decodePath(forKey: .path)
            answers = try container.decode([AskKind].self, forKey: .answers)
            pid = try container.decode(Int32.self, forKey: .pid)
            pending = try container.decode(Int.self, forKey: .pending)
            asked = try container.decode(UInt64.self, forKey: .asked)
            answered = try container.decode(UInt64.self, forKey: .answered)
            timedOut = try container.decode(UInt64.self, forKey: .timedOut)
            refused = try container.decode(UInt64.self, forKey: .refused)
            unresponsive = try container.decodeIfPresent(Bool.self, forKey: .unresponsive) ?? false
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(presenter, forKey: .presenter)
            try container.encodeIfPresent(session, forKey: .session)
            try container.encodePath(path, forKey: .path)
            try container.encode(answers, forKey: .answers)
            try container.encode(pid, forKey: .pid)
            try container.encode(pending, forKey: .pending)
            try container.encode(asked, forKey: .asked)
            try container.encode(answered, forKey: .answered)
            try container.encode(timedOut, forKey: .timedOut)
            try container.encode(refused, forKey: .refused)
            try container.encode(unresponsive, forKey: .unresponsive)
        }
    }

    public struct PresenterRequest: Sendable, Hashable, Codable {
        public var request: UInt64
        public var kind: AskKind
        public var path: FilePath
        public var requester: Int32
        public var awaiting: [UInt64]
        public var waiting: Double

        public init(request: UInt64, kind: AskKind, path: FilePath, requester: Int32, awaiting: [UInt64], waiting: Double) {
            self.request = request
            self.kind = kind
            self.path = path
            self.requester = requester
            self.awaiting = awaiting
            self.waiting = waiting
        }

        private enum CodingKeys: String, CodingKey {
            case request, kind, path, pathBytes, requester, awaiting, waiting
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            request = try container.decode(UInt64.self, forKey: .request)
            kind = try container.decode(AskKind.self, forKey: .kind)
            path = try container.decodePath(forKey: .path)
            requester = try container.decode(Int32.self, forKey: .requester)
            awaiting = try container.decode([UInt64].self, forKey: .awaiting)
            waiting = try container.decode(Double.self, forKey: .waiting)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(request, forKey: .request)
            try container.encode(kind, forKey: .kind)
            try container.encodePath(path, forKey: .path)
            try container.encode(requester, forKey: .requester)
            try container.encode(awaiting, forKey: .awaiting)
            try container.encode(waiting, forKey: .waiting)
        }
    }

    /// Someone waiting for claims.
    public struct ClaimWaiter: Sendable, Hashable, Codable {
        public var paths: [FilePath]
        public var mode: ClaimModeName
        public var owner: ClaimOwnerRecord
        /// Seconds it has waited.
        public var waiting: Double

        public init(paths: [FilePath], mode: ClaimModeName, owner: ClaimOwnerRecord, waiting: Double) {
            self.paths = paths
            self.mode = mode
            self.owner = owner
            self.waiting = waiting
        }

        private enum CodingKeys: String, CodingKey {
            case paths, pathsBytes, mode, owner, waiting
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            paths = try container.decodePaths(forKey: .paths)
            mode = try container.decode(ClaimModeName.self, forKey: .mode)
            owner = try container.decode(ClaimOwnerRecord.self, forKey: .owner)
            waiting = try container.decode(Double.self, forKey: .waiting)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encodePaths(paths, forKey: .paths)
            try container.encode(mode, forKey: .mode)
            try container.encode(owner, forKey: .owner)
            try container.encode(waiting, forKey: .waiting)
        }
    }

    public struct Claims: Sendable, Hashable, Codable {
        public var held: [ClaimHolderRecord]
        public var waiting: [ClaimWaiter]
        /// The latest claims taken from their holders for keeping another user waiting (the
        /// break time), oldest first. Absent from servers before it.
        public var broken: [ClaimBreakRecord]?

        public init(held: [ClaimHolderRecord], waiting: [ClaimWaiter], broken: [ClaimBreakRecord]? = nil) {
            self.held = held
            self.waiting = waiting
            self.broken = broken
        }
    }

    /// A claim that was broken: whose it was, on what, and who had waited for it how long.
    public struct ClaimBreakRecord: Sendable, Hashable, Codable {
        public var owner: ClaimOwnerRecord
        public var uid: UInt32
        public var paths: [FilePath]
        public var by: ClaimOwnerRecord
        public var byUid: UInt32
        /// Seconds the other had waited, and seconds since the break.
        public var waited: Double
        public var ago: Double

        public init(owner: ClaimOwnerRecord, uid: UInt32, paths: [FilePath], by: ClaimOwnerRecord, byUid: UInt32,
                    waited: Double, ago: Double) {
            self.owner = owner
            self.uid = uid
            self.paths = paths
            self.by = by
            self.byUid = byUid
            self.waited = waited
            self.ago = ago
        }

        private enum CodingKeys: String, CodingKey {
            case owner, uid, paths, pathsBytes, by, byUid, waited, ago
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            owner = try container.decode(ClaimOwnerRecord.self, forKey: .owner)
            uid = try container.decode(UInt32.self, forKey: .uid)
            paths = try container.decodePaths(forKey: .paths)
            by = try container.decode(ClaimOwnerRecord.self, forKey: .by)
            byUid = try container.decode(UInt32.self, forKey: .byUid)
            waited = try container.decode(Double.self, forKey: .waited)
            ago = try container.decode(Double.self, forKey: .ago)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(owner, forKey: .owner)
            try container.encode(uid, forKey: .uid)
            try container.encodePaths(paths, forKey: .paths)
            try container.encode(by, forKey: .by)
            try container.encode(byUid, forKey: .byUid)
            try container.encode(waited, forKey: .waited)
            try container.encode(ago, forKey: .ago)
        }
    }

    /// The cluster this mount is one host of (`coordfs mount --cluster`): its hosts, the
    /// grants each holds and the requests waiting for one. Absent on a mount of one host (and
    /// from servers before it).
    public struct Cluster: Sendable, Hashable, Codable {
        public var name: String
        /// This mount's host id.
        public var host: Int64
        /// Whether this host reaches the cluster's database now (the lists are empty when not).
        public var connected: Bool
        /// Why not, when not.
        public var problem: String?
        public var hosts: [ClusterHost]
        /// What each host may do without asking: a mode on a path and everything beneath it.
        public var held: [HostClaim]
        /// Hosts' requests for a grant, in arrival order (the order they are granted in).
        public var waiting: [HostClaim]

        public init(name: String, host: Int64, connected: Bool, problem: String?, hosts: [ClusterHost], held: [HostClaim],
                    waiting: [HostClaim]) {
            self.name = name
            self.host = host
            self.connected = connected
            self.problem = problem
            self.hosts = hosts
            self.held = held
            self.waiting = waiting
        }
    }

    /// A mount in the cluster.
    public struct ClusterHost: Sendable, Hashable, Codable {
        public var id: Int64
        public var hostname: String
        /// The daemon's process id on its machine.
        public var pid: Int32
        public var mountpoint: FilePath
        /// False for a host whose session ended: its row and grants go once the lease of its last
        /// heartbeat is over.
        public var alive: Bool

        public init(id: Int64, hostname: String, pid: Int32, mountpoint: FilePath, alive: Bool) {
            self.id = id
            self.hostname = hostname
            self.pid = pid
            self.mountpoint = mountpoint
            self.alive = alive
        }

        private enum CodingKeys: String, CodingKey {
            case id, hostname, pid, mountpoint, mountpointBytes, alive
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            id = try container.decode(Int64.self, forKey: .id)
            hostname = try container.decode(String.self, forKey: .hostname)
            pid = try container.decode(Int32.self, forKey: .pid)
            mountpoint = try container.decodePath(forKey: .mountpoint)
            alive = try container.decode(Bool.self, forKey: .alive)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(id, forKey: .id)
            try container.encode(hostname, forKey: .hostname)
            try container.encode(pid, forKey: .pid)
            try container.encodePath(mountpoint, forKey: .mountpoint)
            try container.encode(alive, forKey: .alive)
        }
    }

    /// A host's grant, or its request for one.
    public struct HostClaim: Sendable, Hashable, Codable {
        public var host: Int64
        public var path: FilePath
        public var mode: ClaimModeName
        /// Seconds since it was granted (held) or asked for (waiting), by the database's clock.
        public var age: Double

        public init(host: Int64, path: FilePath, mode: ClaimModeName, age: Double) {
            self.host = host
            self.path = path
            self.mode = mode
            self.age = age
        }

        private enum CodingKeys: String, CodingKey {
            case host, path, pathBytes, mode, age
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            host = try container.decode(Int64.self, forKey: .host)
            path = try container.decodePath(forKey: .path)
            mode = try container.decode(ClaimModeName.self, forKey: .mode)
            age = try container.decode(Double.self, forKey: .age)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(host, forKey: .host)
            try container.encodePath(path, forKey: .path)
            try container.encode(mode, forKey: .mode)
            try container.encode(age, forKey: .age)
        }
    }

    public var server: Server
    public var connections: [Connection]
    public var events: Events
    public var subscribers: [Subscriber]
    public var presenters: [Presenter]
    public var presenterRequests: [PresenterRequest]
    public var claims: Claims
    public var cluster: Cluster?
    /// The per-user limits, and what each user the viewer may see keeps (absent from servers
    /// before them).
    public var userLimits: UserLimits?
    public var users: [UserUsage]?
    /// The version store (`--versions`), absent without one.
    public var versions: VersionStore?

    /// The version store in numbers.
    public struct VersionStore: Sendable, Hashable, Codable {
        public var versions: Int
        /// Files with at least one version.
        public var files: Int
        /// The versions' total size.
        public var bytes: Int64
        /// New versions are not kept for now: the backing's free space is below the floor
        /// (`--versions-min-free`).
        public var paused: Bool

        public init(versions: Int, files: Int, bytes: Int64, paused: Bool) {
            self.versions = versions
            self.files = files
            self.bytes = bytes
            self.paused = paused
        }
    }

    public init(server: Server, connections: [Connection], events: Events, subscribers: [Subscriber], presenters: [Presenter],
                presenterRequests: [PresenterRequest], claims: Claims, cluster: Cluster? = nil,
                userLimits: UserLimits? = nil, users: [UserUsage]? = nil, versions: VersionStore? = nil) {
        self.cluster = cluster
        self.versions = versions
        self.userLimits = userLimits
        self.users = users
        self.server = server
        self.connections = connections
        self.events = events
        self.subscribers = subscribers
        self.presenters = presenters
        self.presenterRequests = presenterRequests
        self.claims = claims
    }
}
