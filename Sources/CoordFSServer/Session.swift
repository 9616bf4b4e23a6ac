import CoordFSCore
import Dispatch
import CoordFSProtocol
import SystemPackage
import Logging
import NIOCore

/// One connection: what it subscribed to, presents and holds, and how it answers each line.
///
/// Loop-confined: created, used and closed on the server's event loop only. Other threads
/// reach a session by its id through `ServerContext.sessions` after hopping onto the loop,
/// so no reference to it ever leaves the loop.
final class Session {
    let id: UInt64
    let channel: any Channel
    let peer: PeerCredentials
    unowned let context: ServerContext
    let connected = ContinuousClock.now
    private(set) var client: String?
    var greeted = false
    private(set) var isClosed = false
    let gate: AccessGate

    struct Subscription {
        let events: EventSubscription
        /// The frame of its event pushes, the same for every event it sends.
        let frame: EventPushFrame
        /// Draining stopped because the socket's send buffer was full.
        var blocked = false

        init(events: EventSubscription, wireID: UInt64) {
            self.events = events
            self.frame = EventPushFrame(subscription: wireID)
        }
    }

    var subscriptions: [UInt64: Subscription] = [:]
    var presenters: [UInt64: PresenterRegistration] = [:]

    struct Held {
        let claims: HeldClaims
        let read: [FilePath]
        let write: [FilePath]
    }

    /// A claim request as asked for.
    struct Ask {
        let read: [FilePath]
        let write: [FilePath]
        let started: ContinuousClock.Instant
    }

    /// A claim request that waits (here or for other hosts): its ticket takes it back.
    struct Waiting {
        let ticket: ClaimTicket
        let ask: Ask
    }

    var held: [UInt64: Held] = [:]
    var waiting: [RequestID: Waiting] = [:]
    var nextClaimID: UInt64 = 1
    var needsFlush = false

    /// Who holds this session's explicit claims: the session, for the process tree of the
    /// process that connected (its descendants pass through them).
    var claimOwner: ClaimOwner { .client(id, processTree: peer.pid) }

    init(id: UInt64, channel: any Channel, peer: PeerCredentials, context: ServerContext) {
        self.id = id
        self.channel = channel
        self.peer = peer
        self.context = context
        self.gate = AccessGate(access: context.access, peer: peer, hub: context.hub)
    }

    // MARK: Output

    func write(_ bytes: [UInt8]) {
        guard !isClosed else { return }
        channel.write(channel.allocator.buffer(bytes: bytes), promise: nil)
        needsFlush = true
    }

    func flush() {
        if needsFlush {
            needsFlush = false
            channel.flush()
        }
    }

    func reply<Body: Codable & Sendable>(_ id: RequestID, _ body: Body) {
        do {
            write(try WireFormat.line(OkReply(id: id, ok: body)))
        } catch {
            context.logger.error("cannot encode a reply", metadata: ["error": "\(error)"])
            fail(id, .internal, "the server could not encode its reply")
        }
    }

    func fail(_ id: RequestID?, _ code: ErrorCode, _ message: String, blockers: [ClaimHolderRecord]? = nil) {
        write(ErrorReply(id: id, error: ErrorDetail(code: code, message: message, blockers: blockers)).line)
    }

    func fail(_ id: RequestID?, _ detail: ErrorDetail) {
        fail(id, detail.code, detail.message, blockers: detail.blockers)
    }

    func push(_ push: Push) {
        do {
            write(try WireFormat.line(push))
        } catch {
            context.logger.error("cannot encode a push", metadata: ["error": "\(error)"])
        }
    }

    // MARK: Input

    func handle(_ frame: LineFramer.Frame) {
        switch frame {
        case .tooLarge(let bytes):
            fail(nil, .tooLarge, "a line may hold at most \(context.options.maxLineBytes) bytes; one of \(bytes) or more was skipped")
        case .line(let bytes):
            if bytes.allSatisfy({ $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }) { return }
            switch WireFormat.decodeRequest(bytes, decoder: context.decoder) {
            case .failure(let rejection):
                fail(rejection.id, rejection.code, rejection.message)
            case .success(let envelope):
                perform(envelope)
            }
        }
    }

    func perform(_ envelope: RequestEnvelope) {
        let id = envelope.id
        if !greeted {
            guard case .hello(let hello) = envelope.request else {
                fail(id, .helloRequired, #"say hello first, e.g. {"id":1,"op":"hello","version":1}"#)
                return
            }
            return greet(id, hello)
        }
        switch envelope.request {
        case .hello: fail(id, .badRequest, "hello was already said on this connection")
        case .subscribe(let body): subscribe(id, body)
        case .unsubscribe(let body): unsubscribe(id, body)
        case .present(let body): present(id, body)
        case .answer(let body): answer(id, body)
        case .unpresent(let body): unpresent(id, body)
        case .claim(let body): claim(id, body)
        case .release(let body): release(id, body)
        case .cancel(let body): cancel(id, body)
        case .status: status(id)
        case .versions(let body): listVersions(id, body)
        case .versionRead(let body): readVersion(id, body)
        case .versionChange(let body): changeVersion(id, body)
        case .versionRemove(let body): removeVersions(id, body)
        case .conflicts(let body): listConflicts(id, body)
        case .versionRestored(let body): noteRestored(id, body)
        }
    }

    /// Replies with the mount's status; with a cluster, its part is read off the loop first
    /// (it may take a round trip to the database) and the rest when the reply goes.
    func status(_ id: RequestID) {
        guard let cluster = context.cluster else { return reply(id, context.status(for: self)) }
        let context = self.context
        let sessionID = self.id
        DispatchQueue.global().async {
            let part = cluster()
            context.eventLoop.execute {
                guard let session = context.sessions[sessionID], !session.isClosed else { return }
                var report = context.status(for: session)
                report.cluster = session.gate.visible(part)
                session.reply(id, report)
                session.flush()
            }
        }
    }

    func greet(_ id: RequestID, _ hello: Request.Hello) {
        guard ProtocolVersion.supported.contains(hello.version) else {
            fail(id, .unsupportedVersion, "this server speaks protocol version \(ProtocolVersion.supported.lowerBound)…\(ProtocolVersion.supported.upperBound), not \(hello.version)")
            return
        }
        greeted = true
        client = hello.client.map { String($0.prefix(128)) }
        context.logger.debug("control client said hello", metadata: ["session": "\(self.id)", "client": "\(client ?? "-")"])
        reply(id, Request.Hello.Reply(version: hello.version, server: context.options.serverName, session: self.id,
                                      uid: peer.uid, gid: peer.gid, pid: peer.pid, maxLine: context.options.maxLineBytes))
    }

    /// A path the client names: well formed, and one its user could read (or could see is
    /// missing from a directory it can read).
    /// The refusal of one more of something past this user's limit, nil while under it.
    func overUserLimit(_ used: KeyPath<UserUsage, Int>, _ limit: KeyPath<UserLimits, Int>, _ what: String,
                       flag: String? = nil) -> String? {
        guard context.isLimited(peer.uid) else { return nil }
        let most = context.options.perUser[keyPath: limit]
        guard context.usage(of: peer.uid)[keyPath: used] >= most else { return nil }
        return context.userLimitMessage(peer.uid, what, most, flag: flag)
    }

    func admit(_ wire: FilePath) -> Result<MountPath, ErrorDetail> {
        let path: MountPath
        switch parseWirePath(wire) {
        case .failure(let detail): return .failure(detail)
        case .success(let parsed): path = parsed
        }
        switch gate.readAccess(path) {
        case .readable, .missing(missingComponents: 1):
            return .success(path)
        case .missing:
            return .failure(ErrorDetail(code: .noSuchPath, message: "\(path): the directory that would hold it does not exist"))
        case .notPermitted:
            return .failure(ErrorDetail(code: .notPermitted, message: "\(path): uid \(peer.uid) may not read it"))
        }
    }

    // MARK: Closing

    /// Drops everything the connection had, at once: waits, claims, subscriptions, presenters.
    func close() {
        guard !isClosed else { return }
        isClosed = true
        for pending in waiting.values {
            // One whose outcome is on its way finds the session closed and releases what it got.
            _ = pending.ticket.cancel()
        }
        waiting.removeAll()
        for claim in held.values {
            context.authority.release(claim.claims)
        }
        held.removeAll()
        context.claims.releaseAll(of: claimOwner)
        for subscription in subscriptions.values {
            subscription.events.cancel()
        }
        subscriptions.removeAll()
        for registration in presenters.values {
            context.presenters.unregister(registration)
            context.presenterSessions[registration.id] = nil
        }
        presenters.removeAll()
        context.sessions[id] = nil
        context.logger.debug("control client gone", metadata: ["session": "\(id)", "pid": "\(peer.pid)"])
    }
}
