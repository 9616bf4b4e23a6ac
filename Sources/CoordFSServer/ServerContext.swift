import CoordFSCore
import CoordFSProtocol
import Glibc
import Logging
import NIOCore
import Synchronization

/// What every session shares: the core services, the options, and the table of sessions.
///
/// Sendable: the `let`s are Sendable or only used on the loop (`decoder`); every `var` is
/// read and written only on `eventLoop` (closures from other threads hop onto it first).
final class ServerContext: @unchecked Sendable {
    let eventLoop: any EventLoop
    let hub: EventHub
    let presenters: PresenterRegistry
    /// Explicit claims go into the table the FUSE operations use, and with other hosts
    /// (`--cluster`) ask them to cover the grant, as the FUSE operations do: one authority
    /// for both, no seam of the server's own.
    let authority: ClaimAuthority
    var claims: ClaimTable { authority.table }
    let access: any PathAccess
    /// The mount's version store (`--versions`), nil without one.
    let versions: (any VersionCatalog)?
    /// The cluster's part of status, nil for a mount of one host (see `ControlServer.start`).
    let cluster: (@Sendable () -> StatusReport.Cluster)?
    let logger: Logger
    let options: ControlServer.Options
    let socketPath: String
    let started = ContinuousClock.now
    /// The user who mounted: like root, bound only by the per-connection limits.
    let ownerUID = geteuid()
    let decoder = WireFormat.makeDecoder()
    let ready: ReadyList

    // Loop-confined.
    var sessions: [UInt64: Session] = [:]
    var presenterSessions: [UInt64: UInt64] = [:]
    private var nextSessionID: UInt64 = 1
    private var nextSubscriptionID: UInt64 = 1
    private var stopping = false
    /// Refused connections still open for their client to read why (`accept`): bounded, so
    /// that a user who opens connections faster than it closes them cannot make the server
    /// hold descriptors for them.
    private var lingeringRefusals = 0
    private static let maxLingeringRefusals = 64
    /// Encoded events by sequence number: every subscriber of an event shares one encoding.
    private var eventLines = [(sequence: UInt64, json: [UInt8])](repeating: (0, []), count: 1024)

    init(eventLoop: any EventLoop, hub: EventHub, presenters: PresenterRegistry, authority: ClaimAuthority, access: any PathAccess,
         logger: Logger, options: ControlServer.Options, socketPath: String, cluster: (@Sendable () -> StatusReport.Cluster)? = nil,
         versions: (any VersionCatalog)? = nil) {
        self.cluster = cluster
        self.versions = versions
        self.eventLoop = eventLoop
        self.hub = hub
        self.presenters = presenters
        self.authority = authority
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
        let overUserLimit = isLimited(peer.uid) && usage(of: peer.uid).connections >= options.perUser.connections
        if stopping || sessions.count >= options.maxConnections || overUserLimit {
            let reason = stopping ? ErrorDetail(code: .closing, message: "the server is stopping")
                : overUserLimit ? ErrorDetail(code: .limit, message: userLimitMessage(peer.uid, "connections", options.perUser.connections))
                : ErrorDetail(code: .limit, message: "too many connections (at most \(options.maxConnections))")
            // Only the sending side closes at once: a client that writes its hello meanwhile
            // must not meet a closed socket (EPIPE) before it could read why. What it sends is
            // dropped; its close (or, should it linger, the grace below) closes the rest.
            // Past the bound on such connections, they close whole at once, as before.
            let lingers = lingeringRefusals < Self.maxLingeringRefusals
            if lingers {
                lingeringRefusals += 1
                channel.closeFuture.whenComplete { [self] _ in lingeringRefusals -= 1 }
            }
            channel.writeAndFlush(channel.allocator.buffer(bytes: ErrorReply(id: nil, error: reason).line))
                .whenComplete { _ in
                    guard lingers else { return channel.close(promise: nil) }
                    channel.close(mode: .output, promise: nil)
                    channel.eventLoop.scheduleTask(in: .seconds(2)) { channel.close(promise: nil) }
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

    // MARK: Per-user limits

    /// Whether `UserLimits` bind `uid`: every user but root and the mount's owner.
    func isLimited(_ uid: UInt32) -> Bool {
        uid != 0 && uid != ownerUID
    }

    /// What `uid` keeps now, over all its connections (a scan: there are at most
    /// `maxConnections` sessions, and only requests that add something ask).
    func usage(of uid: UInt32) -> UserUsage {
        var usage = UserUsage(uid: uid, connections: 0, subscriptions: 0, presenters: 0, claims: 0, limited: isLimited(uid))
        for session in sessions.values where session.peer.uid == uid {
            usage.connections += 1
            usage.subscriptions += session.subscriptions.count
            usage.presenters += session.presenters.count
            usage.claims += session.held.count + session.waiting.count
        }
        return usage
    }

    /// The error a request gets past a per-user limit.
    func userLimitMessage(_ uid: UInt32, _ what: String, _ limit: Int, flag: String? = nil) -> String {
        "uid \(uid) has \(limit) \(what), the most one user may keep (--user-limit \(flag ?? what)=N)"
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
            eventLines[slot] = (event.sequence, EventRecord.json(of: event))
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
