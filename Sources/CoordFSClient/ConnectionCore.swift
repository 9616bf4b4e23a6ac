import NIOCore
import Synchronization

/// The routing table of one connection: requests waiting for their replies, and where each
/// subscription's and presenter's pushes go.
///
/// Sendable: all mutable state is in `state`, behind its lock. Lines are read on the
/// connection's event loop only, in order, so a subscription's sink is registered (when its
/// reply is read) before any of its pushes is.
final class ConnectionCore: Sendable {
    enum Registration: Sendable {
        case none
        case subscription(SubscriptionSink)
        case presenter(PresenterSink)
    }

    private struct Pending {
        let continuation: CheckedContinuation<[UInt8], any Error>
        let registration: Registration
    }

    private struct State {
        var channel: (any Channel)?
        var pending: [RequestID: Pending] = [:]
        var subscriptions: [UInt64: SubscriptionSink] = [:]
        var presenters: [UInt64: PresenterSink] = [:]
        var nextID: Int64 = 1
        var closed: CoordFSError?
        var farewell: String?
        /// Claims the server broke, not yet taken (`CoordFSConnection.takeBrokenClaims`).
        var broken: [BrokenPush] = []
    }

    /// Guards every field of `State`.
    private let state = Mutex(State())

    func attach(_ channel: any Channel) {
        state.withLock { $0.channel = channel }
    }

    func makeRequestID() -> RequestID {
        state.withLock { state in
            defer { state.nextID += 1 }
            return .number(state.nextID)
        }
    }

    /// Sends a request and waits for its reply line; a server error is thrown as `ErrorDetail`.
    func send(_ request: Request, id: RequestID? = nil, registering registration: Registration = .none) async throws -> [UInt8] {
        let id = id ?? makeRequestID()
        let line = try WireFormat.line(RequestEnvelope(id: id, request: request))
        return try await withCheckedThrowingContinuation { continuation in
            let channel: (any Channel)? = state.withLock { state in
                if let closed = state.closed {
                    continuation.resume(throwing: closed)
                    return nil
                }
                state.pending[id] = Pending(continuation: continuation, registration: registration)
                return state.channel
            }
            channel?.writeAndFlush(channel!.allocator.buffer(bytes: line)).whenFailure { [self] error in
                failRequest(id, CoordFSError.closed(reason: "\(error)"))
            }
        }
    }

    /// Sends a request whose reply nobody waits for (a `cancel` from a cancellation handler).
    func sendWithoutReply(_ request: Request) {
        guard let line = try? WireFormat.line(RequestEnvelope(id: .text("unawaited"), request: request)),
              let channel = state.withLock({ $0.closed == nil ? $0.channel : nil }) else { return }
        channel.writeAndFlush(channel.allocator.buffer(bytes: line), promise: nil)
    }

    private func failRequest(_ id: RequestID, _ error: any Error) {
        state.withLock { $0.pending.removeValue(forKey: id) }?.continuation.resume(throwing: error)
    }

    // MARK: Incoming (on the event loop)

    func complete(id: RequestID?, line: [UInt8], error: ErrorDetail?) {
        guard let id, let pending = state.withLock({ $0.pending.removeValue(forKey: id) }) else { return }
        if let error {
            pending.continuation.resume(throwing: error)
            return
        }
        switch pending.registration {
        case .none:
            break
        case .subscription(let sink):
            if let reply = try? WireFormat.decodeReplyBody(Request.Subscribe.Reply.self, from: line) {
                state.withLock { $0.subscriptions[reply.subscription] = sink }
            }
        case .presenter(let sink):
            if let reply = try? WireFormat.decodeReplyBody(Request.Present.Reply.self, from: line) {
                state.withLock { $0.presenters[reply.presenter] = sink }
            }
        }
        pending.continuation.resume(returning: line)
    }

    func route(_ push: Push) {
        switch push {
        case .event(let body):
            state.withLock { $0.subscriptions[body.subscription] }?.offer(.event(body.event))
        case .overflow(let body):
            state.withLock { $0.subscriptions[body.subscription] }?.offer(.overflow(body.marker))
        case .ask(let body):
            state.withLock { $0.presenters[body.presenter] }?.continuation.yield(.ask(body))
        case .notify(let body):
            state.withLock { $0.presenters[body.presenter] }?.continuation.yield(.notify(body))
        case .broken(let body):
            state.withLock { $0.broken.append(body) }
        case .bye(let body):
            state.withLock { $0.farewell = body.reason }
        }
    }

    /// The claims the server broke since the last call.
    func takeBrokenClaims() -> [BrokenPush] {
        state.withLock { state in
            defer { state.broken.removeAll() }
            return state.broken
        }
    }

    func dropSubscription(_ id: UInt64) {
        state.withLock { $0.subscriptions.removeValue(forKey: id) }?.finish(throwing: nil)
    }

    func dropPresenter(_ id: UInt64) {
        state.withLock { $0.presenters.removeValue(forKey: id) }?.continuation.finish()
    }

    /// Ends everything: waiting requests fail, subscriptions end (with `error` when the end was
    /// not asked for), presenters stop.
    func shutDown(because reason: String, error: CoordFSError?) {
        let (pending, subscriptions, presenters, closed) = state.withLock { state in
            let reason = state.farewell.map { "the server said: \($0)" } ?? reason
            let closed = state.closed ?? CoordFSError.closed(reason: reason)
            state.closed = closed
            defer {
                state.pending.removeAll()
                state.subscriptions.removeAll()
                state.presenters.removeAll()
            }
            return (Array(state.pending.values), Array(state.subscriptions.values), Array(state.presenters.values), closed)
        }
        for request in pending { request.continuation.resume(throwing: closed) }
        for sink in subscriptions { sink.finish(throwing: error == nil ? nil : closed) }
        for sink in presenters { sink.continuation.finish() }
    }
}

/// Reads the server's lines and hands them to the core.
final class ClientHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let core: ConnectionCore
    /// Server lines can be long (a large status); the bound only stops a runaway.
    private var framer = LineFramer(maxLineBytes: 64 << 20)
    private let decoder = WireFormat.makeDecoder()

    init(core: ConnectionCore) {
        self.core = core
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        unwrapInboundIn(data).withUnsafeReadableBytes { framer.append($0) }
        while let frame = framer.next() {
            guard case .line(let line) = frame else { continue }
            do {
                switch try ServerLine.classify(line, decoder: decoder) {
                case .push(let push): core.route(push)
                case .reply(let id, let error): core.complete(id: id, line: line, error: error)
                }
            } catch {
                core.shutDown(because: "the server sent a line this client cannot read", error: .protocolViolation("\(error)"))
                context.close(promise: nil)
                return
            }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        core.shutDown(because: "the server closed the connection", error: .closed(reason: "the server closed the connection"))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
