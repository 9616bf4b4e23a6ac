import CoordFSCore
import CoordFSProtocol
import Glibc
import Logging
import NIOCore
import NIOPosix
import Synchronization

/// The control socket of one mount: a SwiftNIO server on a Unix-domain stream socket, on one
/// event-loop thread of its own (the FUSE workers never run its code; they only publish
/// events, ask presenters and take claims, which hand work to this loop without waiting).
public final class ControlServer: Sendable {
    public struct Options: Sendable {
        /// The longest request line; longer ones get a `too-large` error and are skipped.
        public var maxLineBytes = ProtocolLimits.defaultMaxLineBytes
        /// Connections beyond this are told `limit` and closed (each costs the daemon a descriptor).
        public var maxConnections = 256
        public var maxSubscriptionsPerConnection = 256
        public var maxPresentersPerConnection = 256
        public var maxClaimsPerConnection = 1024
        public var maxPathsPerClaim = 256
        /// How long a `claim` without `wait` waits.
        public var defaultClaimWait: Duration = .seconds(30)
        /// The longest wait a client may ask for.
        public var maxClaimWait: Duration = .seconds(86_400)
        /// Named in the `hello` reply and in status.
        public var serverName = "coordfs"
        /// How long `start` waits for a server that still listens on the socket path to go.
        /// A daemon goes on for a moment after its mount is unmounted (it answers the kernel's
        /// last requests, then closes its socket), so `fusermount3 -u m; coordfs mount b m`
        /// must not fail on the old daemon's socket.
        public var previousServerGrace: Duration = .seconds(3)

        public init() {}
    }

    public let socketPath: String
    private let group: MultiThreadedEventLoopGroup
    private let listener: any Channel
    private let identity: FileIdentity
    private let shutdown: @Sendable () -> EventLoopFuture<Void>
    private let connectionCounter: @Sendable () -> EventLoopFuture<Int>
    /// Guards against stopping twice.
    private let stopped = Mutex(false)

    private init(socketPath: String, group: MultiThreadedEventLoopGroup, listener: any Channel, identity: FileIdentity,
                 shutdown: @escaping @Sendable () -> EventLoopFuture<Void>, connectionCounter: @escaping @Sendable () -> EventLoopFuture<Int>) {
        self.socketPath = socketPath
        self.group = group
        self.listener = listener
        self.identity = identity
        self.shutdown = shutdown
        self.connectionCounter = connectionCounter
    }

    /// Creates the socket (replacing a stale one, refusing a live one) and starts serving.
    ///
    /// - Parameters:
    ///   - socketPath: where the socket goes; its directory is created when missing.
    ///   - mode: the socket file's permissions: 0600 lets only the mounting user connect;
    ///     0666 lets everyone connect (each is still shown only what its uid could read).
    ///   - access: decides what each client's user may read (`BackingPathAccess` on the backing root).
    public static func start(socketPath: String, mode: mode_t = 0o600, hub: EventHub, presenters: PresenterRegistry,
                             claims: ClaimTable, access: any PathAccess, logger: Logger,
                             options: Options = Options()) throws(ControlSocketError) -> ControlServer {
        try ControlSocket.prepareDirectory(of: socketPath, shared: mode & 0o077 != 0)
        try ControlSocket.removeStale(socketPath, waitingUpTo: options.previousServerGrace)
        let (descriptor, identity) = try ControlSocket.bind(socketPath, mode: mode)

        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let eventLoop = group.next()
        let context = ServerContext(eventLoop: eventLoop, hub: hub, presenters: presenters, claims: claims, access: access,
                                    logger: logger, options: options, socketPath: socketPath)
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 128)
            .childChannelOption(.writeBufferWaterMark, value: .init(low: 64 * 1024, high: 256 * 1024))
            .childChannelOption(.maxMessagesPerRead, value: 4)
            .childChannelInitializer { channel in
                PeerCredentials.read(from: channel).flatMap { peer in
                    context.accept(channel, peer: peer)
                }
            }
        let listener: any Channel
        do {
            listener = try bootstrap.withBoundSocket(descriptor).wait()
        } catch {
            close(descriptor)
            ControlSocket.remove(socketPath, identity: identity)
            try? group.syncShutdownGracefully()
            throw ControlSocketError("cannot listen on \(socketPath): \(error)")
        }
        logger.info("control socket listening", metadata: ["socket": "\(socketPath)", "mode": "\(String(mode, radix: 8))"])
        return ControlServer(socketPath: socketPath, group: group, listener: listener, identity: identity,
                             shutdown: { eventLoop.flatSubmit { context.closeAll() } },
                             connectionCounter: { eventLoop.submit { context.sessions.count } })
    }

    /// Stops accepting, says `bye` to every client and closes its connection (releasing its
    /// claims and registrations), removes the socket file and stops the loop. Call it from
    /// any thread but the server's own; it returns when all is done.
    public func stop() {
        let first = stopped.withLock { stopped in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        try? listener.close().wait()
        try? shutdown().wait()
        ControlSocket.remove(socketPath, identity: identity)
        try? group.syncShutdownGracefully()
    }

    /// How many clients are connected now.
    public func connectionCount() -> Int {
        (try? connectionCounter().wait()) ?? 0
    }

    deinit {
        stop()
    }
}

/// Consumer wake-ups from the event hub, gathered so that any number of them between two
/// turns of the loop cost one task on it.
final class ReadyList: Sendable {
    private struct State {
        var entries: [(session: UInt64, subscription: UInt64)] = []
        var scheduled = false
        var drain: (@Sendable () -> Void)?
    }

    /// Guards the announced (session, subscription) pairs, whether a drain is scheduled, and
    /// the drain itself (set once, after the context that owns this list exists).
    private let state = Mutex(State())
    private let eventLoop: any EventLoop

    init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    func setDrain(_ drain: @escaping @Sendable () -> Void) {
        state.withLock { $0.drain = drain }
    }

    /// Called by the hub on a publishing thread: an append, and a hop onto the loop only when
    /// none is pending.
    func announce(session: UInt64, subscription: UInt64) {
        let drain: (@Sendable () -> Void)? = state.withLock { state in
            state.entries.append((session, subscription))
            if state.scheduled { return nil }
            state.scheduled = true
            return state.drain
        }
        if let drain { eventLoop.execute(drain) }
    }

    func take() -> [(session: UInt64, subscription: UInt64)] {
        state.withLock { state in
            state.scheduled = false
            defer { state.entries.removeAll(keepingCapacity: true) }
            return state.entries
        }
    }
}

/// What every session shares: the core services, the options, and the table of sessions.
///
/// Sendable: the `let`s are Sendable or only used on the loop (`decoder`); every `var` is
/// read and written only on `eventLoop` (closures from other threads hop onto it first).
final class ServerContext: @unchecked Sendable {
    let eventLoop: any EventLoop
    let hub: EventHub
    let presenters: PresenterRegistry
    /// Explicit claims go straight into the table the FUSE operations use, with no seam of
    /// the server's own: claims across hosts (issue 22) will sit beneath this table, serving
    /// the FUSE operations and the socket alike, so a second implementation would be of the
    /// table's grant path, not of this server's use of it.
    let claims: ClaimTable
    let access: any PathAccess
    let logger: Logger
    let options: ControlServer.Options
    let socketPath: String
    let started = ContinuousClock.now
    let decoder = WireFormat.makeDecoder()
    let ready: ReadyList

    // Loop-confined.
    var sessions: [UInt64: Session] = [:]
    var presenterSessions: [UInt64: UInt64] = [:]
    private var nextSessionID: UInt64 = 1
    private var nextSubscriptionID: UInt64 = 1
    private var stopping = false
    /// Encoded events by sequence number: every subscriber of an event shares one encoding.
    private var eventLines = [(sequence: UInt64, json: [UInt8])](repeating: (0, []), count: 1024)

    init(eventLoop: any EventLoop, hub: EventHub, presenters: PresenterRegistry, claims: ClaimTable, access: any PathAccess,
         logger: Logger, options: ControlServer.Options, socketPath: String) {
        self.eventLoop = eventLoop
        self.hub = hub
        self.presenters = presenters
        self.claims = claims
        self.access = access
        self.logger = logger
        self.options = options
        self.socketPath = socketPath
        self.ready = ReadyList(eventLoop: eventLoop)
        ready.setDrain { [weak self] in self?.drainReady() }
    }

    func makeSubscriptionID() -> UInt64 {
        defer { nextSubscriptionID += 1 }
        return nextSubscriptionID
    }

    /// Sets up a new connection once its credentials are known.
    func accept(_ channel: any Channel, peer: PeerCredentials) -> EventLoopFuture<Void> {
        eventLoop.assertInEventLoop()
        if stopping || sessions.count >= options.maxConnections {
            let reason = stopping ? ErrorDetail(code: .closing, message: "the server is stopping")
                : ErrorDetail(code: .limit, message: "too many connections (at most \(options.maxConnections))")
            if let line = try? WireFormat.line(ErrorReply(id: nil, error: reason)) {
                channel.writeAndFlush(channel.allocator.buffer(bytes: line)).whenComplete { _ in channel.close(promise: nil) }
            } else {
                channel.close(promise: nil)
            }
            return eventLoop.makeSucceededVoidFuture()
        }
        let session = Session(id: nextSessionID, channel: channel, peer: peer, context: self)
        nextSessionID += 1
        sessions[session.id] = session
        logger.debug("control client connected", metadata: ["session": "\(session.id)", "pid": "\(peer.pid)", "uid": "\(peer.uid)"])
        return eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(ConnectionHandler(session: session, maxLineBytes: options.maxLineBytes))
        }
    }

    private func drainReady() {
        for (session, subscription) in ready.take() {
            sessions[session]?.pump(subscription)
        }
    }

    /// Hands `body` the event's JSON, encoded once for all its subscribers.
    func withEventJSON(_ event: ChangeEvent, _ body: (borrowing [UInt8]) -> Void) {
        let slot = Int(event.sequence % UInt64(eventLines.count))
        if eventLines[slot].sequence != event.sequence || eventLines[slot].json.isEmpty {
            eventLines[slot] = (event.sequence, (try? JSONLineEncoder().encode(WatchEvent(event))) ?? [])
        }
        body(eventLines[slot].json)
    }

    /// Says bye to every client and closes them all.
    func closeAll() -> EventLoopFuture<Void> {
        stopping = true
        let closing = sessions.values.map { session -> EventLoopFuture<Void> in
            session.push(.bye(ByePush(reason: "the mount is stopping")))
            session.flush()
            return session.channel.close().recover { _ in }
        }
        return EventLoopFuture.andAllComplete(closing, on: eventLoop)
    }

    // MARK: Status

    func status(for viewer: Session) -> StatusReport {
        let now = ContinuousClock.now
        let gate = viewer.gate
        let visible: (MountPath) -> Bool = { gate.mayLearnAbout($0) }
        let statistics = hub.statistics()
        let ordered = sessions.values.sorted { $0.id < $1.id }

        var subscribers: [StatusReport.Subscriber] = []
        for session in ordered {
            for (wireID, subscription) in session.subscriptions.sorted(by: { $0.key < $1.key }) {
                let stats = subscription.events.statistics()
                guard visible(stats.path) else { continue }
                subscribers.append(.init(session: session.id, subscription: wireID, path: stats.path.filePath,
                                         recursive: stats.recursive, kinds: stats.kinds.kinds.map(EventKind.init),
                                         queued: stats.queued, capacity: stats.capacity, delivered: stats.delivered,
                                         dropped: stats.dropped, overflows: stats.overflows))
            }
        }
        let presenterList = presenters.presenters().filter { visible($0.info.path) }.map { status in
            StatusReport.Presenter(presenter: status.info.id, session: presenterSessions[status.info.id],
                                   path: status.info.path.filePath, answers: status.info.answers.kinds.map(AskKind.init),
                                   pid: status.info.ownerPid, pending: status.pending, asked: status.asked,
                                   answered: status.answered, timedOut: status.timedOut, refused: status.refused)
        }
        let requests = presenters.pendingRequests().filter { visible($0.path) }.map {
            StatusReport.PresenterRequest(request: $0.id, kind: AskKind($0.kind), path: $0.path.filePath,
                                          requester: $0.requester, awaiting: $0.awaiting, waiting: $0.waiting.seconds)
        }
        let table = claims.snapshot()
        let held = table.holders.filter { visible($0.path) }.map { ClaimHolderRecord($0, now: now) }
        let waiting = table.waiters.filter { $0.requests.allSatisfy { visible($0.path) } }.map {
            StatusReport.ClaimWaiter($0, now: now)
        }
        return StatusReport(
            server: .init(name: options.serverName, version: ProtocolVersion.current, socket: socketPath,
                          uptime: (now - started).seconds, connections: sessions.count),
            connections: ordered.map { .init(session: $0.id, pid: $0.peer.pid, uid: $0.peer.uid, client: $0.client,
                                             age: (now - $0.connected).seconds) },
            events: .init(sequence: statistics.sequence, oldest: statistics.oldestInHistory, history: statistics.historyCount,
                          historyCapacity: statistics.historyCapacity, subscribers: statistics.subscribers,
                          dropped: statistics.dropped, overflows: statistics.overflows),
            subscribers: subscribers, presenters: presenterList, presenterRequests: requests,
            claims: .init(held: held, waiting: waiting))
    }
}

/// The NIO side of a connection: bytes in, lines out to the session; back-pressure both ways.
final class ConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let session: Session
    private var framer: LineFramer

    init(session: Session, maxLineBytes: Int) {
        self.session = session
        self.framer = LineFramer(maxLineBytes: maxLineBytes)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        buffer.withUnsafeReadableBytes { framer.append($0) }
        while let frame = framer.next() {
            session.handle(frame)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        session.flush()
    }

    func channelInactive(context: ChannelHandlerContext) {
        session.close()
        context.fireChannelInactive()
    }

    /// A client that does not read its replies is not read from either (its replies would
    /// pile up in memory); events keep going to its bounded queue and overflow there.
    func channelWritabilityChanged(context: ChannelHandlerContext) {
        let writable = context.channel.isWritable
        _ = try? context.channel.syncOptions?.setOption(.autoRead, value: writable)
        if writable {
            context.read()
            session.writabilityChanged()
        }
        context.fireChannelWritabilityChanged()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        session.context.logger.debug("control connection error", metadata: ["session": "\(session.id)", "error": "\(error)"])
        context.close(promise: nil)
    }
}

/// The layout of Linux's `struct ucred` (which Swift's Glibc module does not export).
private struct RawPeerCredentials: Sendable {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}

extension PeerCredentials {
    /// SO_PEERCRED of an accepted connection: who connected, as the kernel recorded it at connect time.
    static func read(from channel: any Channel) -> EventLoopFuture<PeerCredentials> {
        guard let provider = channel as? any SocketOptionProvider else {
            return channel.eventLoop.makeFailedFuture(ControlSocketError("this channel cannot report its peer's credentials"))
        }
        let future: EventLoopFuture<RawPeerCredentials> = provider.unsafeGetSocketOption(
            level: NIOBSDSocket.OptionLevel(rawValue: SOL_SOCKET), name: NIOBSDSocket.Option(rawValue: SO_PEERCRED))
        return future.map { PeerCredentials(pid: $0.pid, uid: $0.uid, gid: $0.gid) }
    }
}
