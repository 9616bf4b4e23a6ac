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
        /// What one user may keep over all its connections (not root, nor the mount's owner).
        public var perUser = UserLimits()
        /// How long a `claim` without `wait` waits.
        public var defaultClaimWait: Duration = .seconds(30)
        /// The longest wait a client may ask for.
        public var maxClaimWait: Duration = .seconds(86_400)
        /// Named in the `hello` reply and in status.
        public var serverName = "coordfs"
        /// How the mount watches its backing, for status; nil when it does not.
        public var backingWatch: String?
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
    /// Serves `mount`'s events, presenters and claims (across hosts, with its authority), each
    /// client shown only what its user could read in the backing. The other parameters are
    /// those of the form below.
    public static func start(socketPath: String, mode: mode_t = 0o600, mount: CoordinatedMount, logger: Logger,
                             options: Options = Options(),
                             cluster: (@Sendable () -> StatusReport.Cluster)? = nil) throws(ControlSocketError) -> ControlServer {
        var options = options
        options.backingWatch = mount.watchMethod?.rawValue
        return try start(socketPath: socketPath, mode: mode, hub: mount.events, presenters: mount.presenters, claims: mount.claims,
                         authority: mount.authority, access: BackingPathAccess(rootDescriptor: mount.nodes.root.directory),
                         logger: logger, options: options, cluster: cluster, versions: mount.versions)
    }

    /// - Parameters:
    ///   - socketPath: where the socket goes; its directory is created when missing.
    ///   - mode: the socket file's permissions: 0600 lets only the mounting user connect;
    ///     0666 lets everyone connect (each is still shown only what its uid could read).
    ///   - access: decides what each client's user may read (`BackingPathAccess` on the backing root).
    ///   - authority: with other hosts (`--cluster`), the mount's: explicit claims are covered
    ///     across hosts as the mount's operations are (and programs run under them nest in
    ///     them); nil: `claims` alone decide.
    ///   - cluster: the cluster's part of `status` (it may ask the database: it is called off
    ///     the server's loop); nil for a mount of one host.
    public static func start(socketPath: String, mode: mode_t = 0o600, hub: EventHub, presenters: PresenterRegistry,
                             claims: ClaimTable, authority: ClaimAuthority? = nil, access: any PathAccess, logger: Logger,
                             options: Options = Options(),
                             cluster: (@Sendable () -> StatusReport.Cluster)? = nil,
                             versions: (any VersionCatalog)? = nil) throws(ControlSocketError) -> ControlServer {
        let address = try ControlSocket.address(socketPath)
        try ControlSocket.prepareDirectory(of: socketPath, shared: mode & 0o077 != 0)
        try ControlSocket.removeStale(socketPath, at: address, waitingUpTo: options.previousServerGrace)
        let (descriptor, identity) = try ControlSocket.bind(socketPath, at: address, mode: mode)

        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let eventLoop = group.next()
        let context = ServerContext(eventLoop: eventLoop, hub: hub, presenters: presenters,
                                    authority: authority ?? ClaimAuthority(table: claims, hosts: nil), access: access,
                                    logger: logger, options: options, socketPath: socketPath, cluster: cluster, versions: versions)
        // A broken explicit claim is told to the session that held it.
        claims.onBreak { [weak context] breaks in
            guard let context else { return }
            context.eventLoop.execute { [weak context] in
                for broken in breaks {
                    guard let context, case .client(let session, _) = broken.owner else { continue }
                    context.sessions[session]?.claimBroken(broken)
                }
            }
        }
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
