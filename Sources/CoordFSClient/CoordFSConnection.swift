import Glibc
import NIOCore
import NIOPosix
import Synchronization
import SystemPackage

// Why SwiftNIO here rather than plain sockets: replies and pushes arrive interleaved on one
// socket at any time, so something must read continuously and route each line to whoever
// waits for it. NIO does that on a shared event loop with non-blocking I/O (no reader thread
// per connection, no blocking read inside async code), and the package builds it anyway for
// the server. The socket itself is created by `ControlSocketAddress`, close-on-exec, and
// handed to NIO connected. (A command that only takes claims and waits uses the blocking
// `ClaimConnection` instead: NIO's threads would cost it more than its whole exchange.)

/// A connection to a mount's control socket.
///
/// ```swift
/// let mount = try await CoordFSConnection.connect(toMountOf: "/mnt/shared")
/// for try await message in try await mount.subscribe("/", recursive: true) { … }
/// try await mount.coordinate(writing: ["/counter"]) { … }
/// ```
///
/// Paths given to a connection are mount-relative ("/a/b"); `ControlLocation.locate` turns a
/// local path into one. Paths are `FilePath`s: any bytes, as Linux names are, travel exactly.
public final class CoordFSConnection: Sendable {
    /// What the server said in reply to `hello`.
    public let server: Request.Hello.Reply
    /// Where the connection was found, when it was found from a path.
    public let location: ControlLocation?
    public let socketPath: String

    private let channel: any Channel
    let core: ConnectionCore

    private init(channel: any Channel, core: ConnectionCore, server: Request.Hello.Reply, socketPath: String, location: ControlLocation?) {
        self.channel = channel
        self.core = core
        self.server = server
        self.socketPath = socketPath
        self.location = location
    }

    /// The name a client gives by default: the program's name.
    public static var defaultClientName: String {
        CommandLine.arguments.first.map { String($0.split(separator: "/").last ?? "swift") } ?? "swift"
    }

    /// Where the mount that holds `path` takes requests, and the path's name there (from its
    /// `user.coordfs.control` attribute, or its directory's when it does not exist yet).
    public static func locate(from path: FilePath) throws(CoordFSError) -> ControlLocation {
        try ControlLocation.locate(path)
    }

    /// Connects to the mount that holds `path` (found through its `user.coordfs.control` attribute).
    public static func connect(toMountOf path: FilePath, client: String = defaultClientName) async throws(CoordFSError) -> CoordFSConnection {
        let location = try ControlLocation.locate(path)
        return try await connect(socketPath: location.socket, client: client, location: location)
    }

    /// Connects to a control socket and says hello.
    public static func connect(socketPath: String, client: String = defaultClientName) async throws(CoordFSError) -> CoordFSConnection {
        try await connect(socketPath: socketPath, client: client, location: nil)
    }

    private static func connect(socketPath: String, client: String, location: ControlLocation?) async throws(CoordFSError) -> CoordFSConnection {
        let descriptor = try ControlSocketAddress.connect(socketPath)
        let core = ConnectionCore()
        let channel: any Channel
        do {
            channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(ClientHandler(core: core))
                    }
                }
                .withConnectedSocket(descriptor)
                .get()
        } catch {
            Glibc.close(descriptor)
            throw .cannotConnect(socket: socketPath, reason: "\(error)")
        }
        core.attach(channel)
        do {
            let line = try await core.send(.hello(.init(version: ProtocolVersion.current, client: client)))
            let reply = try WireFormat.decodeReplyBody(Request.Hello.Reply.self, from: line)
            return CoordFSConnection(channel: channel, core: core, server: reply, socketPath: socketPath, location: location)
        } catch {
            channel.close(promise: nil)
            throw CoordFSError.wrap(error)
        }
    }

    /// Closes the connection: the server releases this connection's claims and registrations
    /// at once, and every subscription's sequence ends.
    public func close() {
        core.shutDown(because: "closed by this client", error: nil)
        channel.close(promise: nil)
    }

    deinit {
        channel.close(promise: nil)
    }

    // MARK: Requests

    /// Sends a request and decodes its reply body.
    func perform<Body: Codable & Sendable>(_ request: Request, _ type: Body.Type) async throws(CoordFSError) -> Body {
        do {
            return try WireFormat.decodeReplyBody(type, from: try await core.send(request))
        } catch {
            throw CoordFSError.wrap(error)
        }
    }

    /// Everything going on in the mount, as this connection's user may see it.
    public func status() async throws(CoordFSError) -> StatusReport {
        try await perform(.status(.init()), StatusReport.self)
    }

    // MARK: Events

    /// Subscribes to change events of `path` (a file; a directory and its entries; with
    /// `recursive` a whole subtree), optionally only `kinds`, optionally replaying from history
    /// everything after `since`. Iterate the result for events; it ends when the connection does.
    public func subscribe(_ path: FilePath, recursive: Bool = false, kinds: Set<EventKind>? = nil, since: UInt64? = nil,
                          bufferSize: Int = 4096) async throws(CoordFSError) -> EventStream {
        let sink = SubscriptionSink(bufferSize: bufferSize)
        let request = Request.subscribe(.init(path: path, recursive: recursive,
                                              kinds: kinds.map { EventKind.allCases.filter($0.contains) }, since: since))
        do {
            let line = try await core.send(request, registering: .subscription(sink))
            let reply = try WireFormat.decodeReplyBody(Request.Subscribe.Reply.self, from: line)
            return EventStream(reply: reply, sink: sink, connection: self)
        } catch {
            throw CoordFSError.wrap(error)
        }
    }

    func unsubscribe(_ id: UInt64) async throws(CoordFSError) {
        _ = try await perform(.unsubscribe(.init(subscription: id)), Empty.self)
        core.dropSubscription(id)
    }

    // MARK: Claims

    /// Explicit claims held by this connection (its process tree passes through them).
    public struct HeldClaim: Sendable, Hashable {
        public let id: UInt64
        public let reading: [FilePath]
        public let writing: [FilePath]
        /// Seconds spent waiting for it.
        public let waited: Double
    }

    /// Takes claims on several paths, all or none. Reading: nobody else changes them. Writing:
    /// nobody else sees or changes them. `timeout` is how long to wait for others to let go
    /// (`.zero`: not at all, failing with a `conflict` error; nil: the mount's claim timeout);
    /// a wait that runs out fails with a `timeout` error. Cancelling the task gives up the wait.
    public func claim(reading: [FilePath] = [], writing: [FilePath] = [], timeout: Duration? = nil) async throws(CoordFSError) -> HeldClaim {
        let body = Request.Claim(reading: reading, writing: writing, timeout: timeout)
        let id = core.makeRequestID()
        let core = self.core
        let reply: Request.Claim.Reply
        do {
            reply = try await withTaskCancellationHandler {
                try WireFormat.decodeReplyBody(Request.Claim.Reply.self, from: try await core.send(.claim(body), id: id))
            } onCancel: {
                core.sendWithoutReply(.cancel(.init(request: id)))
            }
        } catch {
            throw CoordFSError.wrap(error)
        }
        return HeldClaim(id: reply.claim, reading: reply.read, writing: reply.write, waited: reply.waited)
    }

    /// The claims of this connection the mount broke since the last call: each kept a process
    /// of another user waiting for the mount's break time, and is no longer held (releasing
    /// it is then `notFound`).
    public func takeBrokenClaims() -> [BrokenPush] {
        core.takeBrokenClaims()
    }

    public func release(_ claim: HeldClaim) async throws(CoordFSError) {
        _ = try await perform(.release(.init(claim: claim.id)), Empty.self)
    }

    /// Runs `body` while holding the claims, and releases them however it ends.
    public func coordinate<Result>(reading: [FilePath] = [], writing: [FilePath] = [], timeout: Duration? = nil,
                                   isolation: isolated (any Actor)? = #isolation,
                                   _ body: () async throws -> Result) async throws -> Result {
        let held = try await claim(reading: reading, writing: writing, timeout: timeout)
        do {
            let result = try await body()
            try? await release(held)
            return result
        } catch {
            try? await release(held)
            throw error
        }
    }

    // MARK: Presenters

    /// Registers `presenter` for `path`: it is asked the requests in `answering` before others
    /// access the item, and told of changes, moves and deletions. Ends with `registration.stop()`
    /// or when the connection closes.
    public func present(_ presenter: some Presenter, at path: FilePath,
                        answering: Set<AskKind> = Set(AskKind.allCases)) async throws(CoordFSError) -> PresenterRegistration {
        let sink = PresenterSink()
        let request = Request.present(.init(path: path, answers: AskKind.allCases.filter(answering.contains)))
        let reply: Request.Present.Reply
        do {
            reply = try WireFormat.decodeReplyBody(Request.Present.Reply.self, from: try await core.send(request, registering: .presenter(sink)))
        } catch {
            throw CoordFSError.wrap(error)
        }
        let task = Task { [self] in
            await PresenterLoop.run(presenter, id: reply.presenter, messages: sink.stream, connection: self)
        }
        return PresenterRegistration(id: reply.presenter, path: reply.path, connection: self, task: task)
    }

    func unpresent(_ id: UInt64) async throws(CoordFSError) {
        _ = try await perform(.unpresent(.init(presenter: id)), Empty.self)
        core.dropPresenter(id)
    }

    func answer(presenter: UInt64, request: UInt64, verdict: Request.Answer.Verdict, reason: String?) async {
        _ = try? await perform(.answer(.init(presenter: presenter, request: request, verdict: verdict, reason: reason)),
                               Request.Answer.Reply.self)
    }
}

extension CoordFSError {
    static func wrap(_ error: any Error) -> CoordFSError {
        switch error {
        case let error as CoordFSError: return error
        case let detail as ErrorDetail: return .server(detail)
        case let error as DecodingError: return .protocolViolation("\(error)")
        default: return .protocolViolation("\(error)")
        }
    }
}
