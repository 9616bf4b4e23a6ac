import CoordFSCore
import Glibc
import Logging
import Synchronization

/// Carries this host's committed changes to the other hosts of the cluster, and theirs to this
/// host, through the `coordfs_events` table.
///
/// One thread (`ClusterEventThread`) with its own connection (never the session's, whose
/// round trips prove the host's grants) does all the talking; one connection serves both
/// directions because the inserts are short and a second connection would only add a second
/// reconnect path:
///
/// - **Out.** `publish` only appends to a bounded queue in memory, so a FUSE request never
///   waits for the database. The thread inserts what is queued in batches, each in one
///   transaction with its `pg_notify(channel, 'events CURSOR')`. The transaction first takes a
///   transaction-level advisory lock (the cluster's key, -1), so cursors are handed out in
///   commit order: a reader that has seen cursor N can never later meet a row below N. While
///   the database is unreachable the queue keeps filling; once it is full, further events are
///   dropped and a `resync` row goes in their place, so no gap goes unannounced.
/// - **In.** The thread LISTENs on the cluster's channel. A notification is only a hint: on
///   each one, after every (re)connection, and on a one-second tick, it reads the rows of other
///   hosts after its cursor, in cursor order, and hands them to `apply`. The cursor starts at
///   the table's end when the mount starts (history is not replayed).
/// - **Retention.** See `EventRetention`; a host whose cursor is below the trimmed horizon gets
///   `ClusterResync.fellBehind`.
/// - **Hosts.** On the tick it also reads the cluster's hosts: the pids of live peer daemons
///   on this boot (`isPeerDaemon`, for the watch of a backing shared on this machine), and
///   hosts that died. A host that died without a clean leave may have committed changes it
///   never published: the first host to notice inserts one `lost` row for it (under the same
///   lock, unless one, or the dead host's `left` row, is there already), which every host reads
///   as a resync. A host that stops cleanly inserts `left` after its last events.
///
/// Sendable: the queue and the peer set are behind their locks; the thread's state is its own.
/// `stop()` must be called: the thread holds the instance until then.
public final class ClusterEvents: Sendable {
    public static let defaultQueueCapacity = 65_536
    /// Rows read per statement, and rows inserted per transaction.
    static let readLimit = 1_000
    static let insertLimit = 256
    /// How often the thread reads without a hint, and looks at the hosts.
    static let tick: Duration = .seconds(1)
    /// The least time between two inserts (unless a whole batch is queued): a lone event goes
    /// out at once; one that follows an insert closely waits `batchInterval`, and once events
    /// come faster than that (the last insert carried several), `streamInterval`. Without it,
    /// a `tar xf` cost one transaction (and a wake-up of the database and of this thread) per
    /// event, about a tenth of its time on two cores shared with the database.
    static let batchInterval: Duration = .milliseconds(2)
    static let streamInterval: Duration = .milliseconds(20)

    /// The host as it registered first; `currentHost` tells what it is now.
    public let host: ClusterHost
    /// The host as the session knows it now: a session that reconnected registered again,
    /// under a new id. Its events go out under that id; rows under any id it had are its own.
    let currentHost: (@Sendable () -> ClusterHost)?
    let configuration: ClusterConfiguration
    let logger: Logger
    let retention: EventRetention
    let queueCapacity: Int
    let apply: @Sendable (RemoteBatch) -> Void
    let bootID = HostRegistration.bootID()

    struct Outbox {
        var events: [ChangeEvent] = []
        /// Events were dropped since the last insert: a `resync` row goes after what is queued.
        var overflowed = false
        var dropped = 0
        var stopping = false
    }

    /// Guards the events waiting to be inserted. A leaf (Docs/LOCKING.md): `publish` takes it on
    /// a FUSE worker, the event thread to take a batch and to remove it once committed.
    let outbox = Mutex(Outbox())
    /// The pids of live peer daemons on this boot, as of the last tick. A leaf: the watch's
    /// thread reads it, the event thread replaces it.
    let peers = Mutex<Set<Int32>>([])
    /// An eventfd that wakes the thread (something queued, or stop).
    let wake: Int32
    /// The thread, until `stop` joins it. A leaf.
    private let thread = Mutex<pthread_t?>(nil)

    /// Connects (its own connection), finds where the table ends and starts the thread.
    /// Throws when the database cannot be reached: the mount says so and does not start.
    public init(configuration: ClusterConfiguration, host: ClusterHost, logger: Logger,
                retention: EventRetention = EventRetention(), queueCapacity: Int = ClusterEvents.defaultQueueCapacity,
                currentHost: (@Sendable () -> ClusterHost)? = nil,
                apply: @escaping @Sendable (RemoteBatch) -> Void) throws(DatabaseError) {
        self.configuration = configuration
        self.host = host
        self.currentHost = currentHost
        self.logger = logger
        self.retention = retention
        self.queueCapacity = queueCapacity
        self.apply = apply
        do {
            wake = try Syscall.eventCounter().release()
        } catch {
            throw DatabaseError("cannot make the event thread's wake-up descriptor: \(error)")
        }
        let loop: ClusterEventThread
        do throws(DatabaseError) {
            let connection = try DatabaseConnection(conninfo: configuration.conninfo, parameters: ClusterEvents.connectionParameters(configuration))
            try connection.execute("LISTEN \(configuration.channel)")
            let start = try connection.execute("""
                SELECT greatest(coalesce(max(cursor), 0),
                                coalesce((SELECT trimmed_through FROM coordfs_event_horizon WHERE cluster = $1), 0))
                FROM coordfs_events WHERE cluster = $1
                """, [.text(configuration.name)]).integer(0, 0) ?? 0
            loop = ClusterEventThread(events: self, connection: connection, cursor: start)
            try loop.refreshHosts(announcingDeaths: false)
            // Hosts that are up refresh their peer sets now, not at their next tick.
            try connection.execute("SELECT pg_notify($1, 'joined')", [.text(configuration.channel)])
        } catch {
            close(wake)
            throw error
        }
        let handOver = LoopHandOver(loop)
        do {
            let spawned = try Threads.spawn { handOver.loop.run() }
            thread.withLock { $0 = spawned }
        } catch {
            close(wake)
            throw DatabaseError("cannot start the event thread: \(error)")
        }
    }

    deinit {
        close(wake)
    }

    /// Queues a change this host committed for the other hosts. Never waits for the database;
    /// when the queue is full the event is dropped and the others are told to resynchronise.
    public func publish(_ event: ChangeEvent) {
        let wasEmpty: Bool? = outbox.withLock { outbox in
            guard !outbox.stopping else { return nil }
            let wasEmpty = outbox.events.isEmpty && !outbox.overflowed
            if outbox.events.count >= queueCapacity {
                outbox.overflowed = true
                outbox.dropped += 1
            } else {
                outbox.events.append(event)
            }
            return wasEmpty
        }
        if wasEmpty == true { signal() }
    }

    /// Whether `pid` is a live peer daemon of the cluster on this machine (same boot): its
    /// writes to a backing shared on this machine are told by its own events.
    public func isPeerDaemon(pid: Int32) -> Bool {
        peers.withLock { $0.contains(pid) }
    }

    /// Inserts what is still queued (when the database is reachable), says that this host left
    /// cleanly, and ends the thread. Idempotent.
    public func stop() {
        outbox.withLock { $0.stopping = true }
        signal()
        guard let running = thread.withLock({ $0.take() }) else { return }
        pthread_join(running, nil)
    }

    /// Events queued and not yet inserted.
    public var pending: Int {
        outbox.withLock { $0.events.count }
    }

    /// The cluster's settings, with a name of its own in pg_stat_activity (later keywords win).
    static func connectionParameters(_ configuration: ClusterConfiguration) -> [(String, String)] {
        configuration.connectionParameters + [("application_name", "coordfs events")]
    }

    func signal() {
        var one: UInt64 = 1
        _ = Glibc.write(wake, &one, 8)
    }
}

/// Carries the loop, made on the starting thread, to the event thread, which alone uses it.
private final class LoopHandOver: @unchecked Sendable {
    let loop: ClusterEventThread
    init(_ loop: ClusterEventThread) { self.loop = loop }
}
