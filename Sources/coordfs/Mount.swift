import ArgumentParser
import CoordFSCluster
import CoordFSCore
import CoordFSExec
import CoordFSFuse
import CoordFSMetrics
import CoordFSProtocol
import CoordFSServer
import CoordFSVersions
import Glibc
import Logging

/// The environment variable through which a background parent gives its daemon the pipe
/// on which the daemon says "ready" once the mount is up.
private let readyDescriptorVariable = "COORDFS_READY_FD"

struct Mount: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Mount BACKING at MOUNTPOINT, coordinated.",
        discussion: """
        Returns once the mount is ready and keeps serving in the background, as FUSE tools do; \
        --foreground keeps it attached (for systemd and debugging). Stop it with \
        'coordfs unmount MOUNTPOINT', or with SIGINT/SIGTERM to the daemon.
        """
    )

    // Paths here are taken as text (an argument that is not UTF-8 is read with U+FFFD, see
    // `ExactArguments`); paths inside the mount are bytes.
    @Argument(help: "The directory whose contents the mount shows.", completion: .directory, transform: ExactArguments.display)
    var backing: String

    @Argument(help: "An empty directory to mount on.", completion: .directory, transform: ExactArguments.display)
    var mountpoint: String

    @Flag(name: [.short, .long], help: "Stay attached to the terminal; log to standard error.")
    var foreground = false

    @Flag(help: "Let users other than the one mounting use the mount (permissions are still checked).")
    var allowOther = false

    @Option(help: ArgumentHelp("Seconds the kernel may cache attributes.", valueName: "seconds"))
    var attrTimeout: Double = 86_400

    @Option(help: ArgumentHelp("Seconds the kernel may cache name lookups.", valueName: "seconds"))
    var entryTimeout: Double = 86_400

    @Flag(help: "Turn kernel caching of attributes, names and pages off (every call reaches the daemon).")
    var noKernelCache = false

    @Flag(help: "Mount read-only: every change fails with EROFS; events and claims are served (mount -o remount,rw makes it writable).")
    var readOnly = false

    @Flag(help: "Use the kernel's writeback cache (small writes are gathered before they reach the daemon).")
    var writebackCache = false

    @Flag(inversion: .prefixedNo, help: "Move read data from the backing into the kernel with splice(2) instead of a copy.")
    var spliceReads = true

    @Flag(help: "Move written data from the kernel with splice(2) as well (changes how the backing allocates blocks for some write patterns).")
    var spliceWrites = false

    @Option(help: ArgumentHelp("Worker threads at most.", valueName: "count"))
    var threads: UInt32 = 16

    @Option(help: ArgumentHelp("Nodes the kernel may keep cached before it is asked to forget some (each holds a descriptor; default: three quarters of the descriptor limit).", valueName: "count"))
    var maxNodes: Int?

    @Option(help: ArgumentHelp("Seconds an operation waits for a conflicting claim before it fails with EBUSY (default 30).", valueName: "seconds"))
    var claimTimeout: Double = 30

    @Option(help: ArgumentHelp("Events kept for subscribers to replay (--since) at most (default 65536).", valueName: "count"))
    var eventHistory: Int = EventHub.defaultHistoryCapacity

    @Option(help: ArgumentHelp("MiB the kept events may take at most; the oldest go first (default 16).", valueName: "MiB"))
    var eventHistoryMib: Int = EventHub.defaultHistoryBytes >> 20

    @Option(help: ArgumentHelp("What one user may keep in the daemon over all its connections, KIND=N (repeatable): connections (default 64), subscriptions (1024), presenters (256), claims held or waiting (1024), asks unanswered by its presenters (256). Root and the user who mounted are not limited.", valueName: "kind=n"))
    var userLimit: [String] = []

    @Option(help: ArgumentHelp("Seconds a claim of one user may keep another user waiting before it is broken and its holder told (default 45, and never past --claim-timeout; 0: never).", valueName: "seconds"))
    var breakTime: Double = 45

    @Flag(help: "Opens for reading hold a read claim until closed: writers wait for readers.")
    var strictReads = false

    @Option(help: ArgumentHelp("What a commit syncs: none (rename only), replacing (fsync a file before it replaces an existing one; default), file (fsync every commit), full (also the directory).", valueName: "level"))
    var durability: Durability = .recommended

    @Flag(help: "Stage saves in named hidden temps even where the backing has unnamed files (O_TMPFILE), as on filesystems without them.")
    var namedTemps = false

    @Option(name: .customLong("in-place"), help: ArgumentHelp("A name or path pattern of files written in place instead of atomically (repeatable; adds to the defaults: SQLite, *.log, ...).", valueName: "pattern"), transform: ExactArguments.display)
    var inPlacePatterns: [String] = []

    @Flag(help: "Use only the --in-place patterns given, not the defaults.")
    var noDefaultInPlace = false

    @Option(help: ArgumentHelp("Files larger than this many MiB are written in place where the backing cannot clone them (on XFS and btrfs a save's copy is a reflink, whatever the size); 0: no limit; default 128.", valueName: "MiB"))
    var inPlaceLargerThan: Int64 = InPlacePolicy.defaultLargerThan >> 20

    @Option(help: ArgumentHelp("Seconds an access waits for presenters to answer before it goes on without them (default 5).", valueName: "seconds"))
    var presenterTimeout: Double = 5

    @Option(help: ArgumentHelp("Where the control socket goes (default: a name in /run/coordfs, or the user's runtime directory). Clients find it from the mount.", valueName: "path"), completion: .file(), transform: ExactArguments.display)
    var socket: String?

    @Option(help: ArgumentHelp("Permissions of the control socket, in octal (default 600: only the mounting user; 666 lets every user connect, each seeing only what it could read).", valueName: "mode"))
    var socketMode: String = "600"

    @Flag(help: "Keep what saves replace and deletes remove as versions, in .coordfs-versions at the backing's root (coordfs versions lists and restores them).")
    var versions = false

    @Flag(help: "With --versions: a save that meets a change made behind the mount keeps that version as a conflict version only, not also beside the file as NAME.conflict-….")
    var noConflictCopies = false

    @Option(help: ArgumentHelp("Which versions stay: staggered (one per 30 s for the last hour, per hour for the last day, per day for 30 days, per week after) or all.", valueName: "how"))
    var versionsKeep: VersionRetention.Thinning = .staggered

    @Option(help: ArgumentHelp("Versions older than this many days go, whatever --versions-keep says; 0: none goes for its age.", valueName: "days"))
    var versionsMaxAge: Double = 365

    @Option(help: ArgumentHelp("The most of the backing's room (free space plus the store) the versions may take, in percent: past it the oldest go.", valueName: "percent"))
    var versionsSpaceShare: Double = VersionRetention.defaultSpaceShare * 100

    @Option(help: ArgumentHelp("Below this much free space in the backing, new versions are not kept and saves go on.", valueName: "MiB"))
    var versionsMinFree: Int64 = VersionRetention.defaultMinimumFreeBytes >> 20

    @Option(help: ArgumentHelp("Where the backing cannot clone (ext4, tmpfs), files up to this size are copied to keep a version before a change in place or an append; 0: those keep none.", valueName: "MiB"))
    var versionsCopyUpTo: Int64 = 0

    @Option(name: .customLong("versions-exclude"), help: ArgumentHelp("A name or path pattern of files whose versions are not kept (repeatable).", valueName: "pattern"), transform: ExactArguments.display)
    var versionsExclude: [String] = []

    @Flag(help: "Do not watch the backing for changes made directly in it (for setups where everything goes through the mount: no watch, day-long caches).")
    var noWatchBacking = false

    @Option(help: ArgumentHelp("How to watch the backing: fanotify (names the process when run as root) or inotify (default: fanotify where the kernel allows it).", valueName: "method"))
    var watchBacking: WatchMethod?

    @Option(help: ArgumentHelp("Serve Prometheus metrics at http://ADDRESS/metrics, on loopback only: 127.0.0.1:PORT, [::1]:PORT or localhost:PORT (default: none).", valueName: "address"))
    var metrics: String?

    @Option(help: ArgumentHelp("Coordinate with the other hosts that mount the same shared folder through this PostgreSQL database: a libpq URI (postgres://...) or key=value string. It shows in ps: prefer --cluster-file or the COORDFS_CLUSTER variable for one with a password.", valueName: "conninfo"))
    var cluster: String?

    @Option(help: ArgumentHelp("Read --cluster's connection string from the first line of this file (for fstab: -o cluster_file=PATH).", valueName: "path"), completion: .file(), transform: ExactArguments.display)
    var clusterFile: String?

    @Option(help: ArgumentHelp("Mounts naming the same database and cluster name form one coordinated folder (default: default).", valueName: "name"))
    var clusterName: String?

    @Option(help: ArgumentHelp("trace, debug, info, notice, warning, error or critical.", valueName: "level"))
    var logLevel: Logger.Level = .notice

    @Option(help: ArgumentHelp("Where a background mount writes its log (default: discarded).", valueName: "path"), completion: .file(), transform: ExactArguments.display)
    var logFile: String?

    /// The `--user-limit KIND=N` options over the defaults.
    var userLimits: UserLimits {
        get throws {
            var limits = UserLimits()
            for text in userLimit {
                let parts = text.split(separator: "=", maxSplits: 1).map(String.init)
                guard parts.count == 2, let value = Int(parts[1]), value >= 1, limits.set(parts[0], to: value) else {
                    throw ValidationError("--user-limit takes KIND=N with N at least 1 and KIND one of \(UserLimits.names.joined(separator: ", ")): \(text)")
                }
            }
            return limits
        }
    }

    func validate() throws {
        guard attrTimeout >= 0, entryTimeout >= 0 else { throw ValidationError("timeouts cannot be negative") }
        guard threads >= 1 else { throw ValidationError("--threads must be at least 1") }
        if let maxNodes, maxNodes < 64 { throw ValidationError("--max-nodes must be at least 64") }
        guard claimTimeout > 0 else { throw ValidationError("--claim-timeout must be more than 0") }
        guard breakTime >= 0, breakTime.isFinite else { throw ValidationError("--break-time must be 0 (never) or more") }
        _ = try userLimits
        guard eventHistory >= 1, eventHistoryMib >= 1 else { throw ValidationError("--event-history and --event-history-mib must be at least 1") }
        guard presenterTimeout > 0 else { throw ValidationError("--presenter-timeout must be more than 0") }
        guard socketPermissions != nil else { throw ValidationError("--socket-mode must be an octal mode such as 600 or 666") }
        if noWatchBacking, watchBacking != nil { throw ValidationError("--no-watch-backing and --watch-backing exclude each other") }
        if let problem = clusterChoice.problem { throw ValidationError(problem) }
        guard versionsMaxAge >= 0, versionsMaxAge.isFinite else { throw ValidationError("--versions-max-age must be 0 (no limit) or more days") }
        guard versionsSpaceShare > 0, versionsSpaceShare <= 100 else { throw ValidationError("--versions-space-share must be a percentage above 0, at most 100") }
        guard versionsMinFree >= 0 else { throw ValidationError("--versions-min-free cannot be negative") }
        guard versionsCopyUpTo >= 0, versionsCopyUpTo <= Int64.max >> 20 else { throw ValidationError("--versions-copy-up-to must be 0 (no copies) or more MiB") }
        if noConflictCopies && !versions { throw ValidationError("--no-conflict-copies needs --versions: without it the copy is the only record of the other version") }
    }

    /// What the `--versions-…` options say.
    var versionRetention: VersionRetention {
        VersionRetention(thinning: versionsKeep, maximumAge: versionsMaxAge == 0 ? nil : .seconds(versionsMaxAge * 86_400),
                         spaceShare: versionsSpaceShare / 100, minimumFreeBytes: versionsMinFree << 20, exclusions: versionsExclude,
                         copiesUpTo: versionsCopyUpTo << 20)
    }

    var clusterChoice: ClusterChoice { ClusterChoice(conninfo: cluster, file: clusterFile, name: clusterName) }

    /// `--socket-mode` as permission bits, nil when it is not an octal number up to 777.
    var socketPermissions: mode_t? {
        guard let mode = mode_t(socketMode, radix: 8), mode <= 0o777, mode & 0o600 == 0o600 else { return nil }
        return mode
    }

    /// The socket's path: as given (made absolute), or the default for this mountpoint.
    func socketPath(mountpoint: String) -> String {
        guard let socket else { return ControlSocket.defaultPath(forMountpoint: mountpoint, shared: socketPermissions! & 0o077 != 0) }
        if socket.hasPrefix("/") { return socket }
        var directory = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard getcwd(&directory, directory.count) != nil else { return socket }
        let bytes = directory.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        return String(decoding: bytes, as: UTF8.self) + "/" + socket
    }

    var mountOptions: MountOptions {
        var options = MountOptions()
        options.allowOther = allowOther
        options.readOnly = readOnly
        options.conflictCopies = !noConflictCopies
        options.attributeTimeout = noKernelCache ? 0 : attrTimeout
        options.entryTimeout = noKernelCache ? 0 : entryTimeout
        options.keepPageCache = !noKernelCache
        options.writebackCache = writebackCache
        options.spliceReads = spliceReads
        options.spliceWrites = spliceWrites
        options.maxThreads = threads
        options.maxIdleThreads = min(threads, 8)
        options.maxNodes = maxNodes
        options.claimTimeout = .milliseconds(Int64(claimTimeout * 1000))
        options.breakTime = breakTime == 0 ? nil : .milliseconds(Int64(breakTime * 1000))
        options.presenterAsksPerUser = ((try? userLimits) ?? UserLimits()).asks
        options.eventHistory = eventHistory
        options.eventHistoryBytes = eventHistoryMib << 20
        options.presenterTimeout = .milliseconds(Int64(presenterTimeout * 1000))
        options.strictReads = strictReads
        options.durability = durability
        options.namedTemps = namedTemps
        options.watchBacking = !noWatchBacking
        options.watchMethod = watchBacking
        options.inPlace = InPlacePolicy(patterns: (noDefaultInPlace ? [] : InPlacePolicy.defaultPatterns) + inPlacePatterns,
                                        largerThan: inPlaceLargerThan > 0 ? inPlaceLargerThan << 20 : nil)
        return options
    }

    func run() throws {
        let metricsAddress: MetricsAddress?
        do {
            metricsAddress = try metrics.map { (text) throws(MetricsAddressError) in try MetricsAddress(text) }
        } catch {
            throw CleanExit.failure(error.description)
        }
        // Read here for the message's sake; the daemon reads it again (nothing passes it on).
        do {
            _ = try clusterChoice.configuration()
        } catch {
            throw CleanExit.failure(error.description)
        }
        let paths: (backing: String, mountpoint: String)
        do {
            paths = try Preflight.mount(backing: backing, mountpoint: mountpoint, allowOther: allowOther)
        } catch {
            throw CleanExit.failure(error.description)
        }
        if foreground {
            let readyDescriptor = getenv(readyDescriptorVariable).flatMap { Int32(String(cString: $0)) }
            throw serve(paths, metricsAddress: metricsAddress, readyDescriptor: readyDescriptor)
        }
        throw Daemon.start(readyVariable: readyDescriptorVariable)
    }

    /// Mounts and serves in this process. With a ready descriptor (a background daemon), says
    /// "ready" on it once mounted and then lets go of the terminal.
    private func serve(_ paths: (backing: String, mountpoint: String), metricsAddress: MetricsAddress?,
                       readyDescriptor: Int32?) -> ExitCode {
        // Before the daemon's threads start (they take its name): "coordfs" in ps, top and
        // pgrep, not the name of the file it was started from ("exe", "coordfs-full").
        Syscall.nameThisThread("coordfs")
        var logger = Logger(label: "coordfs")
        logger.logLevel = logLevel
        if let readyDescriptor {
            setsid()
            // Only the ready pipe is ours to keep; it is descriptor 3 (see Daemon.start).
            Syscall.closeDescriptors(from: readyDescriptor + 1)
        }
        let socketPath = socketPath(mountpoint: paths.mountpoint)
        var options = mountOptions
        options.controlSocket = socketPath
        options.measuresRequests = metricsAddress != nil
        // Before anything that counts is made: swift-metrics instruments take their backend when created.
        let registry = metricsAddress.map { _ in MetricsBackend.bootstrap() }
        // Joined before the mount is made: a database that cannot be reached fails the mount.
        let cluster: ClusterSession?
        do {
            cluster = try joinCluster(mountpoint: paths.mountpoint, logger: logger)
        } catch {
            printError(error.description)
            return .failure
        }
        // Whatever ends the daemon from here on leaves the cluster cleanly.
        defer { cluster?.stop() }
        options.hostCoverage = cluster?.coverage
        // Stopped before the cluster is left (defers run last first): its last events go in first.
        var clusterEvents: ClusterEvents?
        defer { clusterEvents?.stop() }
        let session: MountSession
        let server: ControlServer
        do {
            // Other hosts' changes reach the mount through the inbox once it exists.
            let inbox = ChangeInbox()
            clusterEvents = try startClusterEvents(cluster, inbox, logger: logger)
            let link = clusterEvents.map { events in
                ClusterEventLink(publish: { events.publish($0) }, isPeerDaemon: { events.isPeerDaemon(pid: $0) })
            }
            session = try MountSession(backing: paths.backing, mountpoint: paths.mountpoint, options: options, cluster: link,
                                       inbox: inbox, versions: try openVersionStore(backing: paths.backing, cluster: cluster, logger: logger),
                                       logger: logger)
            // Listening before the mount appears: a client that finds the mount finds the socket.
            server = try startControlServer(socketPath, session.fileSystem.mount, cluster: cluster, logger: logger)
        } catch {
            printError("\(error)")
            return .failure
        }
        let metricsEndpoint: MetricsEndpoint?
        do {
            metricsEndpoint = try metricsAddress.map { (address) throws(MetricsEndpointError) in
                try startMetricsEndpoint(address, registry: registry!, session.fileSystem.mount, logger: logger)
            }
        } catch {
            server.stop()
            printError(error.description)
            return .failure
        }
        do {
            try session.mount()
        } catch {
            metricsEndpoint?.stop()
            server.stop()
            printError(error.description)
            return .failure
        }
        if let readyDescriptor {
            Daemon.detach(logFile: logFile)
            _ = "ready\n".withCString { write(readyDescriptor, $0, 6) }
            close(readyDescriptor)
        }
        // Under a service manager (systemd's Type=notify), which runs the foreground form.
        let manager = readyDescriptor == nil ? ServiceNotifier.fromEnvironment() : nil
        if let manager {
            let mount = session.fileSystem.mount
            let backing = paths.backing
            manager.announceReady(mountpoint: paths.mountpoint) {
                let claims = mount.claims.snapshot()
                let subscribers = mount.events.statistics().subscribers
                return "serving \(backing): \(claims.holders.count) claims held, \(claims.waiters.count) waiting, \(subscribers) subscribers"
            }
        }
        let status = session.serve(stopping: {
            manager?.stopping()
            // No request is served any more: what this mount committed goes to the cluster now.
            clusterEvents?.stop()
        })
        metricsEndpoint?.stop()
        server.stop()
        return ExitCode(status)
    }

    /// Starts carrying events between this mount and the other hosts of its cluster, nil
    /// without a cluster: other hosts' commits go to the mount through `inbox`, and the
    /// mount's own go to them (through the link made of the result).
    private func startClusterEvents(_ cluster: ClusterSession?, _ inbox: ChangeInbox, logger: Logger) throws(ClusterChoiceError) -> ClusterEvents? {
        guard let cluster, let configuration = try clusterChoice.configuration() else { return nil }
        let events: ClusterEvents
        do {
            events = try ClusterEvents(configuration: configuration, host: cluster.host, logger: logger,
                                       currentHost: { [cluster] in cluster.host },
                                       apply: { batch in inbox.applyRemote(batch) })
        } catch {
            throw ClusterChoiceError("cannot follow the cluster's events: \(error.oneLine)")
        }
        return events
    }

    /// Joins the cluster `--cluster` (or its file or variable) names, nil without one.
    /// - Throws: one line, without the connection string (it may hold a password).
    private func joinCluster(mountpoint: String, logger: Logger) throws(ClusterChoiceError) -> ClusterSession? {
        guard let configuration = try clusterChoice.configuration() else { return nil }
        do {
            let session = try ClusterSession(configuration: configuration, mountpoint: ExactArguments.bytes(of: mountpoint), logger: logger)
            logger.notice("joined the cluster", metadata: [
                "cluster": "\(configuration.name)", "host id": "\(session.host.id)", "hostname": "\(session.host.hostname)",
            ])
            return session
        } catch {
            throw ClusterChoiceError("cannot join the cluster \"\(configuration.name)\": \(error.oneLine)")
        }
    }

    /// The cluster's part of status, nil without a cluster.
    private func clusterStatus(_ session: ClusterSession?) -> (@Sendable () -> StatusReport.Cluster)? {
        guard let session else { return nil }
        let name = clusterName ?? "default"
        return { StatusReport.Cluster(session, name: name) }
    }

    /// Serves the Prometheus endpoint: what swift-metrics counted, and what the mount's tables hold now.
    private func startMetricsEndpoint(_ address: MetricsAddress, registry: PrometheusRegistry, _ mount: CoordinatedMount,
                                      logger: Logger) throws(MetricsEndpointError) -> MetricsEndpoint {
        let scraped = ScrapedSeries(registry: registry, mount: mount)
        return try MetricsEndpoint.start(address, registry: registry, update: { scraped.update() }, logger: logger)
    }

    /// The version store of `--versions`, nil without it (or on a read-only mount, which keeps none).
    /// The hosts of a cluster share the store's folder, and its index in the cluster's database.
    private func openVersionStore(backing: String, cluster: ClusterSession?, logger: Logger) throws(MountFailure) -> VersionStore? {
        guard versions, !readOnly else { return nil }
        var sharedIndex: ClusterVersionIndex?
        do {
            if let cluster, let configuration = try? clusterChoice.configuration() {
                sharedIndex = try ClusterVersionIndex(configuration: configuration, hostname: cluster.host.hostname)
            }
        } catch {
            throw MountFailure("cannot open the cluster's version index: \(error.oneLine)")
        }
        do {
            return try VersionStore(backing: backing, sharedIndex: sharedIndex, retention: versionRetention, logger: logger)
        } catch {
            throw MountFailure("cannot open the version store in \(backing)/\(VersionStore.folderName): \(error)")
        }
    }

    /// Serves the mount's events, presenters and claims on its control socket.
    private func startControlServer(_ socketPath: String, _ mount: CoordinatedMount, cluster: ClusterSession?,
                                    logger: Logger) throws(ControlSocketError) -> ControlServer {
        var serverOptions = ControlServer.Options()
        serverOptions.defaultClaimWait = .milliseconds(Int64(claimTimeout * 1000))
        serverOptions.perUser = (try? userLimits) ?? UserLimits()
        return try ControlServer.start(socketPath: socketPath, mode: socketPermissions!, mount: mount,
                                       logger: logger, options: serverOptions, cluster: clusterStatus(cluster))
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}

