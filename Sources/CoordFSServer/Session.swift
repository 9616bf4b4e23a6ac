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
    private var greeted = false
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

    private(set) var subscriptions: [UInt64: Subscription] = [:]
    private(set) var presenters: [UInt64: PresenterRegistration] = [:]

    private struct Held {
        let claims: HeldClaims
        let read: [FilePath]
        let write: [FilePath]
    }

    /// A claim request as asked for.
    private struct Ask {
        let read: [FilePath]
        let write: [FilePath]
        let started: ContinuousClock.Instant
    }

    /// A claim request that waits (here or for other hosts): its ticket takes it back.
    private struct Waiting {
        let ticket: ClaimTicket
        let ask: Ask
    }

    private var held: [UInt64: Held] = [:]
    private var waiting: [RequestID: Waiting] = [:]
    private var nextClaimID: UInt64 = 1
    private var needsFlush = false

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

    private func write(_ bytes: [UInt8]) {
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

    private func reply<Body: Codable & Sendable>(_ id: RequestID, _ body: Body) {
        do {
            write(try WireFormat.line(OkReply(id: id, ok: body)))
        } catch {
            context.logger.error("cannot encode a reply", metadata: ["error": "\(error)"])
            fail(id, .internal, "the server could not encode its reply")
        }
    }

    private func fail(_ id: RequestID?, _ code: ErrorCode, _ message: String, blockers: [ClaimHolderRecord]? = nil) {
        write(ErrorReply(id: id, error: ErrorDetail(code: code, message: message, blockers: blockers)).line)
    }

    private func fail(_ id: RequestID?, _ detail: ErrorDetail) {
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

    private func perform(_ envelope: RequestEnvelope) {
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
        }
    }

    /// Replies with the mount's status; with a cluster, its part is read off the loop first
    /// (it may take a round trip to the database) and the rest when the reply goes.
    private func status(_ id: RequestID) {
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

    private func greet(_ id: RequestID, _ hello: Request.Hello) {
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
    private func admit(_ wire: FilePath) -> Result<MountPath, ErrorDetail> {
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

    // MARK: Events

    private func subscribe(_ id: RequestID, _ body: Request.Subscribe) {
        guard subscriptions.count < context.options.maxSubscriptionsPerConnection else {
            return fail(id, .limit, "at most \(context.options.maxSubscriptionsPerConnection) subscriptions per connection")
        }
        let path: MountPath
        switch admit(body.path) {
        case .failure(let detail): return fail(id, detail)
        case .success(let admitted): path = admitted
        }
        let kinds = body.kinds.map { ChangeKindSet($0.map(ChangeKind.init)) } ?? .all
        guard kinds != [] else { return fail(id, .badRequest, "\"kinds\" is empty: nothing would ever come") }

        let wireID = context.makeSubscriptionID()
        let ready = context.ready
        let sessionID = self.id
        let events = context.hub.subscribe(to: path, recursive: body.recursive ?? false, kinds: kinds, since: body.since) {
            ready.announce(session: sessionID, subscription: wireID)
        }
        subscriptions[wireID] = Subscription(events: events, wireID: wireID)
        let answer: Request.Subscribe.Reply
        switch events.start {
        case .live(let after):
            answer = .init(subscription: wireID, path: path.filePath, sequence: after, replayed: 0, resync: false)
        case .replayed(let count, let through):
            answer = .init(subscription: wireID, path: path.filePath, sequence: through, replayed: count, resync: false)
        case .resync(_, let current):
            answer = .init(subscription: wireID, path: path.filePath, sequence: current, replayed: 0, resync: true)
        }
        reply(id, answer)
        pump(wireID)
    }

    private func unsubscribe(_ id: RequestID, _ body: Request.Unsubscribe) {
        guard let subscription = subscriptions.removeValue(forKey: body.subscription) else {
            return fail(id, .notFound, "no subscription \(body.subscription) on this connection")
        }
        subscription.events.cancel()
        reply(id, Empty())
    }

    /// Moves queued events of one subscription to the socket, while the socket takes them.
    /// Each batch goes out as one buffer and one write: with many subscribers, the per-event
    /// cost is a copy of the shared encoding.
    func pump(_ wireID: UInt64) {
        guard !isClosed, var subscription = subscriptions[wireID] else { return }
        while true {
            guard channel.isWritable else {
                subscription.blocked = true
                break
            }
            let batch = subscription.events.next(upTo: 256)
            var buffer = channel.allocator.buffer(capacity: batch.events.count * 320)
            for event in batch.events {
                append(event, framed: subscription.frame, to: &buffer)
            }
            if let overflow = batch.overflow,
               let line = try? WireFormat.line(Push.overflow(OverflowPush(subscription: wireID, marker: OverflowMarker(overflow)))) {
                buffer.writeBytes(line)
            }
            if buffer.readableBytes > 0 {
                channel.write(buffer, promise: nil)
                needsFlush = true
            }
            if !batch.hasMore {
                subscription.blocked = false
                break
            }
        }
        subscriptions[wireID] = subscription
        flush()
    }

    /// Resumes subscriptions that stopped on a full socket.
    func writabilityChanged() {
        guard channel.isWritable else { return }
        for (wireID, subscription) in subscriptions where subscription.blocked {
            pump(wireID)
        }
    }

    /// Adds one event as this user may see it: a move seen from one side only is told as a
    /// creation or a deletion there.
    private func append(_ event: ChangeEvent, framed frame: EventPushFrame, to buffer: inout ByteBuffer) {
        var told = event
        var retold = false
        if !gate.seesEverything {
            let source = gate.mayLearnAbout(event.path)
            if event.kind == .moved, let destination = event.destination {
                switch (source, gate.mayLearnAbout(destination)) {
                case (true, true): break
                case (true, false): told = event.retold(as: .deleted, path: event.path); retold = true
                case (false, true): told = event.retold(as: .created, path: destination); retold = true
                case (false, false): return
                }
            } else if !source {
                return
            }
        }
        func writeFramed(_ json: borrowing [UInt8]) {
            guard !json.isEmpty else { return }
            frame.write(around: json) { buffer.writeBytes($0) }
        }
        if retold {
            writeFramed(EventRecord.json(of: told))
        } else {
            context.withEventJSON(event, writeFramed)
        }
    }

    // MARK: Presenters

    private func present(_ id: RequestID, _ body: Request.Present) {
        guard presenters.count < context.options.maxPresentersPerConnection else {
            return fail(id, .limit, "at most \(context.options.maxPresentersPerConnection) presenters per connection")
        }
        let path: MountPath
        switch admit(body.path) {
        case .failure(let detail): return fail(id, detail)
        case .success(let admitted): path = admitted
        }
        let answers = PresenterRequestKinds((body.answers ?? []).map(PresenterRequestKind.init))
        let context = self.context
        let sessionID = self.id
        let label = "session \(sessionID)" + (client.map { " (\($0))" } ?? "")
        let registration = context.presenters.register(path, answers: answers, ownerPid: peer.pid, label: label) { message in
            context.eventLoop.execute {
                context.sessions[sessionID]?.presenterMessage(message)
            }
        }
        presenters[registration.id] = registration
        context.presenterSessions[registration.id] = sessionID
        reply(id, Request.Present.Reply(presenter: registration.id, path: path.filePath))
    }

    func presenterMessage(_ message: PresenterMessage) {
        guard !isClosed else { return }
        switch message {
        case .request(let request):
            guard gate.mayLearnAbout(request.path) else {
                // It may not know the item exists; it cannot have a stake in it.
                context.presenters.answer(request: request.id, presenter: request.presenter, ok: true)
                return
            }
            push(.ask(AskPush(request, now: ContinuousClock.now)))
        case .notification(let notification):
            guard gate.mayLearnAbout(notification.path) || notification.destination.map(gate.mayLearnAbout) == true else { return }
            push(.notify(NotifyPush(notification)))
        }
        flush()
    }

    private func answer(_ id: RequestID, _ body: Request.Answer) {
        guard presenters[body.presenter] != nil else {
            return fail(id, .notFound, "no presenter \(body.presenter) on this connection")
        }
        let accepted = context.presenters.answer(request: body.request, presenter: body.presenter, ok: body.verdict == .ok,
                                                 reason: body.reason.map { String($0.prefix(512)) })
        reply(id, Request.Answer.Reply(accepted: accepted))
    }

    private func unpresent(_ id: RequestID, _ body: Request.Unpresent) {
        guard let registration = presenters.removeValue(forKey: body.presenter) else {
            return fail(id, .notFound, "no presenter \(body.presenter) on this connection")
        }
        context.presenters.unregister(registration)
        context.presenterSessions[registration.id] = nil
        reply(id, Empty())
    }

    // MARK: Claims

    private func claim(_ id: RequestID, _ body: Request.Claim) {
        let readTexts = body.read ?? []
        let writeTexts = body.write ?? []
        let options = context.options
        guard !(readTexts.isEmpty && writeTexts.isEmpty) else {
            return fail(id, .badRequest, "name at least one path in \"read\" or \"write\"")
        }
        guard readTexts.count + writeTexts.count <= options.maxPathsPerClaim else {
            return fail(id, .limit, "at most \(options.maxPathsPerClaim) paths in one claim")
        }
        guard held.count + waiting.count < options.maxClaimsPerConnection else {
            return fail(id, .limit, "at most \(options.maxClaimsPerConnection) claims held or waiting per connection")
        }
        guard waiting[id] == nil else {
            return fail(id, .badRequest, "a claim with id \(id) is still waiting; use another id")
        }
        if let wait = body.wait, !(wait.isFinite && wait >= 0) {
            return fail(id, .badRequest, "\"wait\" is a number of seconds, 0 or more")
        }
        // A `read` claim is a read claim; a `write` claim is exclusive: nobody else sees or
        // changes the path (Docs/LOCKING.md, "Modes"). A path named in both lists is claimed exclusive.
        var modes: [MountPath: ClaimMode] = [:]
        for (texts, mode) in [(readTexts, ClaimMode.read), (writeTexts, .exclusive)] {
            for text in texts {
                switch admit(text) {
                case .failure(let detail): return fail(id, detail)
                case .success(let path): if modes[path] != .exclusive { modes[path] = mode }
                }
            }
        }
        let requests = modes.map { ClaimRequest($0.key, $0.value) }.sorted { $0.path < $1.path }
        let read = requests.filter { $0.mode == .read }.map(\.path.filePath)
        let write = requests.filter { $0.mode == .exclusive }.map(\.path.filePath)

        let started = ContinuousClock.now
        let nonblocking = body.nonblock == true || body.wait == 0
        let limit = body.wait.map { Duration.seconds(clamping: $0) } ?? options.defaultClaimWait
        let ask = Ask(read: read, write: write, started: started)
        switch context.authority.acquire(requests, owner: claimOwner, deadline: started.advanced(by: min(limit, options.maxClaimWait)),
                                         nonblocking: nonblocking) {
        case .held(let claims):
            grantClaim(id, claims, ask)
        case .refused(let refusal):
            refuseClaim(id, refusal, ask)
        case .waiting(let ticket):
            waiting[id] = Waiting(ticket: ticket, ask: ask)
            let context = self.context
            let sessionID = self.id
            ticket.whenDone { outcome in
                context.eventLoop.execute {
                    if let session = context.sessions[sessionID] {
                        session.claimOutcome(id, outcome)
                    } else if case .success(let claims) = outcome {
                        context.authority.release(claims)
                    }
                }
            }
        }
    }

    private func grantClaim(_ id: RequestID, _ claims: HeldClaims, _ ask: Ask) {
        let claimID = nextClaimID
        nextClaimID += 1
        held[claimID] = Held(claims: claims, read: ask.read, write: ask.write)
        reply(id, Request.Claim.Reply(claim: claimID, read: ask.read, write: ask.write, waited: (ContinuousClock.now - ask.started).seconds))
    }

    private func refuseClaim(_ id: RequestID, _ refusal: ClaimRefusal, _ ask: Ask) {
        let now = ContinuousClock.now
        let waited = Self.format((now - ask.started).seconds)
        switch refusal {
        case .wouldBlock(let blockers):
            fail(id, .conflict, "\(Self.describe(blockers, now: now)) (not waiting: nonblock)",
                 blockers: blockers.map { ClaimHolderRecord($0, now: now) })
        case .timedOut(let blockers):
            fail(id, .timeout, "\(Self.describe(blockers, now: now)) (gave up after \(waited) s)",
                 blockers: blockers.map { ClaimHolderRecord($0, now: now) })
        case .hosts(.timedOut(let holders)):
            fail(id, .timeout, "held on other hosts: \(holders.joined(separator: "; ")) (gave up after \(waited) s)")
        case .hosts(.wouldBlock):
            fail(id, .conflict, "held on another host (not waiting: nonblock)")
        case .hosts(.cutOff(let reason)):
            fail(id, .cutOff, "this host cannot reach the cluster's database: \(reason)")
        case .cancelled:
            fail(id, .cancelled, "the claim was cancelled before it was granted")
        }
    }

    func claimOutcome(_ id: RequestID, _ outcome: ClaimTicket.Outcome) {
        guard !isClosed, let pending = waiting.removeValue(forKey: id) else {
            if case .success(let claims) = outcome { context.authority.release(claims) }
            return
        }
        switch outcome {
        case .success(let claims): grantClaim(id, claims, pending.ask)
        case .failure(let refusal): refuseClaim(id, refusal, pending.ask)
        }
        flush()
    }

    private func release(_ id: RequestID, _ body: Request.Release) {
        guard let claim = held.removeValue(forKey: body.claim) else {
            return fail(id, .notFound, "no claim \(body.claim) is held on this connection")
        }
        context.authority.release(claim.claims)
        reply(id, Empty())
    }

    private func cancel(_ id: RequestID, _ body: Request.Cancel) {
        guard let pending = waiting[body.request], pending.ticket.cancel() else {
            // Not waiting, or its outcome is already on the way (perhaps "cancelled"): that reply will come.
            return reply(id, Request.Cancel.Reply(cancelled: false))
        }
        waiting[body.request] = nil
        fail(body.request, .cancelled, "the claim was cancelled before it was granted")
        reply(id, Request.Cancel.Reply(cancelled: true))
    }

    static func describe(_ blockers: [ClaimHolder], now: ContinuousClock.Instant) -> String {
        guard let first = blockers.first else { return "the paths are claimed by others" }
        let owner = ClaimOwnerRecord(first.owner)
        let more = blockers.count > 1 ? " and \(blockers.count - 1) more" : ""
        return "\(first.path) is held (\(ClaimModeName(first.mode))) by \(owner) for \(format((now - first.since).seconds)) s\(more)"
    }

    static func format(_ seconds: Double) -> String {
        let tenths = (seconds * 10).rounded() / 10
        return String(tenths)
    }

    // MARK: Status view

    /// This session's claims, for status.
    var heldClaims: [(claim: UInt64, read: [FilePath], write: [FilePath])] {
        held.map { ($0.key, $0.value.read, $0.value.write) }.sorted { $0.claim < $1.claim }
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
