import CoordFSCore
import Glibc
import Logging
import Synchronization

/// How long the cluster's events table keeps rows: at most `rows` per cluster, none older than
/// `age`. A host whose cursor falls below what is kept (cut off from the database for longer)
/// gets a resync. Any host trims, every `trimInterval` on its own clock; trimming twice is
/// harmless.
public struct EventRetention: Sendable {
    public var rows: Int = 100_000
    public var age: Duration = .seconds(600)
    public var trimInterval: Duration = .seconds(30)

    public init() {}
}

/// Carries this host's committed changes to the other hosts of the cluster, and theirs to this
/// host, through the `coordfs_events` table.
///
/// One thread with its own connection (never the session's, whose round trips prove the
/// host's grants) does all the talking; one connection serves both directions because the
/// inserts are short and a second connection would only add a second reconnect path:
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
        let loop: EventLoop
        do throws(DatabaseError) {
            let connection = try DatabaseConnection(conninfo: configuration.conninfo, parameters: ClusterEvents.connectionParameters(configuration))
            try connection.execute("LISTEN \(configuration.channel)")
            let start = try connection.execute("""
                SELECT greatest(coalesce(max(cursor), 0),
                                coalesce((SELECT trimmed_through FROM coordfs_event_horizon WHERE cluster = $1), 0))
                FROM coordfs_events WHERE cluster = $1
                """, [.text(configuration.name)]).integer(0, 0) ?? 0
            loop = EventLoop(events: self, connection: connection, cursor: start)
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
    let loop: EventLoop
    init(_ loop: EventLoop) { self.loop = loop }
}

/// The event thread's state and work. Used by that thread alone (and by `init` before it starts).
final class EventLoop {
    private let events: ClusterEvents
    private var connection: DatabaseConnection?
    /// The last row of the table this host has read (or skipped as its own).
    private(set) var cursor: Int64
    /// Every id this host has had (see `ClusterEvents.currentHost`).
    private var ownIDs: Set<Int64>
    /// Hosts seen alive at the last look, by id, with their names.
    private var alive: [Int64: String] = [:]
    /// Names of hosts ever seen, for rows whose host has gone since.
    private var names: [Int64: String] = [:]
    private let clock = ContinuousClock()
    private var lastTick: ContinuousClock.Instant
    private var lastTrim: ContinuousClock.Instant
    /// When the last insert was sent, and how many events it carried (see `ClusterEvents.batchInterval`).
    private var lastFlush: ContinuousClock.Instant
    private var lastFlushCount = 0

    private var configuration: ClusterConfiguration { events.configuration }
    private var name: DatabaseValue { .text(configuration.name) }
    private var lockKey: DatabaseValue { .integer(Int64(configuration.lockKey)) }
    /// Every id this host has had, as a bigint[] parameter.
    private var ownIDList: DatabaseValue { .text("{" + ownIDs.sorted().map(String.init).joined(separator: ",") + "}") }

    /// This host as it is registered now.
    private func me() -> ClusterHost {
        let host = events.currentHost?() ?? events.host
        if ownIDs.insert(host.id).inserted {
            events.logger.notice("cluster events: this host registered again; its events go out under its new id", metadata: ["id": "\(host.id)"])
        }
        return host
    }

    init(events: ClusterEvents, connection: DatabaseConnection, cursor: Int64) {
        self.events = events
        self.connection = connection
        self.cursor = cursor
        ownIDs = [events.host.id]
        lastTick = clock.now
        lastFlush = clock.now - ClusterEvents.batchInterval
        // Hosts trim at different moments: a random share of the interval first.
        lastTrim = clock.now - .milliseconds(Int64.random(in: 0...max(events.retention.trimInterval.milliseconds, 1)))
    }

    func run() {
        var lastAttempt = clock.now - ClusterEvents.tick
        while true {
            let stopping = events.outbox.withLock { $0.stopping }
            if stopping {
                finish()
                return
            }
            if connection == nil {
                if clock.now - lastAttempt >= ClusterEvents.tick {
                    lastAttempt = clock.now
                    reconnect()
                }
                if connection == nil {
                    waitForWake(timeout: ClusterEvents.tick - (clock.now - lastAttempt))
                    continue
                }
            }
            do throws(DatabaseError) {
                let flushAt = try flushIfDue()
                let (hinted, woken) = try waitForInput(until: flushAt)
                if woken { drainWake() }
                let due = clock.now - lastTick >= ClusterEvents.tick
                if hinted || due { try readRemote() }
                if due {
                    lastTick = clock.now
                    try refreshHosts(announcingDeaths: true)
                    if clock.now - lastTrim >= events.retention.trimInterval {
                        lastTrim = clock.now
                        try trim()
                    }
                }
            } catch {
                lost(error)
            }
        }
    }

    // MARK: Connection

    private func reconnect() {
        do throws(DatabaseError) {
            let made = try DatabaseConnection(conninfo: configuration.conninfo, parameters: ClusterEvents.connectionParameters(configuration))
            try made.execute("LISTEN \(configuration.channel)")
            connection = made
            events.logger.notice("cluster events: connected again; catching up", metadata: ["cursor": "\(cursor)"])
            try readRemote()
            try refreshHosts(announcingDeaths: true)
        } catch {
            lost(error)
        }
    }

    private func lost(_ error: DatabaseError) {
        if connection != nil {
            events.logger.warning("cluster events: lost the database connection; reconnecting every second",
                                  metadata: ["error": "\(error)", "queued": "\(events.pending)"])
        }
        connection = nil
    }

    /// Inserts what is queued if the last insert is `batchInterval` old or a whole batch waits;
    /// otherwise returns when to.
    private func flushIfDue() throws(DatabaseError) -> ContinuousClock.Instant? {
        let queued = events.outbox.withLock { $0.events.count + ($0.overflowed ? 1 : 0) }
        guard queued > 0 else { return nil }
        let due = lastFlush + (lastFlushCount > 1 ? ClusterEvents.streamInterval : ClusterEvents.batchInterval)
        if queued < ClusterEvents.insertLimit && clock.now < due { return due }
        lastFlush = clock.now
        lastFlushCount = queued
        try flush(once: true)
        return nil
    }

    /// Waits for the server or a wake-up, up to the next tick (or `flushAt`). Returns whether a
    /// notification from another session came, and whether the wake-up descriptor fired.
    private func waitForInput(until flushAt: ContinuousClock.Instant? = nil) throws(DatabaseError) -> (hinted: Bool, woken: Bool) {
        guard let connection else { return (false, false) }
        let own = connection.serverPID
        func hint() throws(DatabaseError) -> Bool {
            var hinted = false
            for notification in try connection.notifications() {
                if notification.payload == "joined" { try refreshHosts(announcingDeaths: false) }
                if notification.senderPID != own { hinted = true }
            }
            return hinted
        }
        // A notification that came during this thread's last statement was read with its
        // result, off the socket: polling would not see it until the tick.
        if try hint() { return (true, false) }
        var remaining = ClusterEvents.tick - (clock.now - lastTick)
        if let flushAt { remaining = min(remaining, flushAt - clock.now) }
        let ready = (try? Syscall.waitReadable([connection.socket, events.wake], timeout: Int32(clamping: max(remaining.milliseconds, 0)))) ?? []
        let hinted = ready.contains(0) ? try hint() : false
        return (hinted, ready.contains(1))
    }

    private func waitForWake(timeout: Duration) {
        if let ready = try? Syscall.waitReadable([events.wake], timeout: Int32(clamping: max(timeout.milliseconds, 0))), !ready.isEmpty {
            drainWake()
        }
    }

    private func drainWake() {
        var count: UInt64 = 0
        _ = Glibc.read(events.wake, &count, 8)
    }

    /// A clean end: what is queued goes in (when the database is there), then the `left` row.
    private func finish() {
        guard connection != nil else {
            let pending = events.pending
            if pending > 0 {
                events.logger.warning("cluster events: unmounting without the database; queued events are not published", metadata: ["queued": "\(pending)"])
            }
            return
        }
        do throws(DatabaseError) {
            try flush()
            try transaction { (connection) throws(DatabaseError) in
                try connection.execute("""
                    INSERT INTO coordfs_events (cluster, host_id, kind, path, is_directory, pid, uid, process)
                    VALUES ($1, $2, 'left', '\\x2f'::bytea, true, 0, 0, $3)
                    """, [name, .integer(me().id), .text(me().hostname)])
            }
        } catch {
            events.logger.warning("cluster events: could not publish the last events", metadata: ["error": "\(error)"])
        }
        connection = nil
    }

    /// Runs `body` in a transaction that holds the cluster's event lock, so cursors are given
    /// in commit order.
    private func transaction(_ body: (DatabaseConnection) throws(DatabaseError) -> Void) throws(DatabaseError) {
        guard let connection else { throw DatabaseError("not connected", connectionLost: true) }
        try connection.execute("BEGIN")
        do throws(DatabaseError) {
            try connection.execute("SELECT pg_advisory_xact_lock($1::int, -1)", [lockKey])
            try body(connection)
            try connection.execute("COMMIT")
        } catch {
            if !error.connectionLost { _ = try? connection.execute("ROLLBACK") }
            throw error
        }
    }

    // MARK: Out

    /// Inserts what is queued, a batch per transaction, each with its NOTIFY. A batch leaves
    /// the queue only once committed. `once`: one batch only (what came during its round trip
    /// waits for the next, see `flushIfDue`); otherwise until the queue is empty.
    func flush(once: Bool = false) throws(DatabaseError) {
        var inserted = false
        while !(once && inserted) {
            inserted = true
            let (batch, overflowed): ([ChangeEvent], Bool) = events.outbox.withLock { outbox in
                (Array(outbox.events.prefix(ClusterEvents.insertLimit)), outbox.overflowed)
            }
            let resyncRow = overflowed && batch.count < ClusterEvents.insertLimit
            if batch.isEmpty && !resyncRow { return }
            do throws(DatabaseError) {
                try insert(batch, resync: resyncRow)
            } catch {
                guard error.connectionLost else {
                    // The server refused these rows (not the connection): never retried forever.
                    events.logger.error("cluster events: the database refused events; the other hosts are told to resynchronise",
                                        metadata: ["error": "\(error)", "events": "\(batch.count)"])
                    events.outbox.withLock { outbox in
                        outbox.events.removeFirst(min(batch.count, outbox.events.count))
                        // A refused resync row is not tried again: nothing better can be said.
                        outbox.overflowed = !resyncRow
                    }
                    continue
                }
                throw error
            }
            events.outbox.withLock { outbox in
                outbox.events.removeFirst(batch.count)
                if resyncRow {
                    events.logger.warning("cluster events: the queue overflowed; the other hosts are told to resynchronise",
                                          metadata: ["dropped": "\(outbox.dropped)"])
                    outbox.overflowed = false
                    outbox.dropped = 0
                }
            }
        }
    }

    /// One statement, so one round trip: its own transaction, which takes the event lock before
    /// the first row is made (each row joins the lock's one row, so none exists before it). The
    /// rows go as one array per column, so the statement's text is the same whatever their
    /// number; they are inserted in the queue's order (cursors follow it).
    private func insert(_ batch: [ChangeEvent], resync: Bool) throws(DatabaseError) {
        guard let connection else { throw DatabaseError("not connected", connectionLost: true) }
        let host = me()
        var kinds: [String] = [], paths: [[UInt8]?] = [], destinations: [[UInt8]?] = [], directories: [Bool] = []
        var sizes: [Int64?] = [], pids: [Int64?] = [], uids: [Int64?] = [], processes: [String] = []
        for event in batch {
            kinds.append(event.kind.rawValue)
            paths.append(event.path.bytes)
            destinations.append(event.destination?.bytes)
            directories.append(event.isDirectory)
            sizes.append(event.size)
            pids.append(Int64(event.origin.pid))
            uids.append(Int64(event.origin.uid))
            processes.append(event.origin.processName)
        }
        if resync {
            kinds.append("resync")
            paths.append(MountPath.root.bytes)
            destinations.append(nil)
            directories.append(true)
            sizes.append(nil)
            pids.append(0)
            uids.append(0)
            processes.append(host.hostname)
        }
        try connection.execute("""
            WITH locked AS MATERIALIZED (SELECT pg_advisory_xact_lock($4::int, -1)),
            inserted AS (
                INSERT INTO coordfs_events (cluster, host_id, kind, path, destination, is_directory, size, pid, uid, process)
                SELECT $1, $2, v.kind, decode(v.path, 'hex'), decode(v.destination, 'hex'), v.is_directory, v.size, v.pid, v.uid, v.process
                FROM locked, unnest($5::text[], $6::text[], $7::text[], $8::boolean[], $9::bigint[], $10::int[], $11::bigint[], $12::text[])
                    WITH ORDINALITY AS v(kind, path, destination, is_directory, size, pid, uid, process, n)
                ORDER BY v.n
                RETURNING cursor)
            SELECT pg_notify($3, 'events ' || max(cursor)) FROM inserted
            """, [name, .integer(host.id), .text(configuration.channel), lockKey,
                  .text(ArrayLiteral.texts(kinds)), .text(ArrayLiteral.hex(paths)), .text(ArrayLiteral.hex(destinations)),
                  .text(ArrayLiteral.booleans(directories)), .text(ArrayLiteral.integers(sizes)), .text(ArrayLiteral.integers(pids)),
                  .text(ArrayLiteral.integers(uids)), .text(ArrayLiteral.texts(processes))])
    }

    // MARK: In

    /// Hands every row of other hosts after the cursor to `apply`, in order.
    func readRemote() throws(DatabaseError) {
        guard let connection else { return }
        _ = me()
        while true {
            let before = cursor
            let rows = try connection.execute("""
                SELECT e.cursor, e.host_id, e.kind, e.path, e.destination, e.is_directory, e.size, e.pid, e.uid, e.process, h.hostname
                FROM coordfs_events e LEFT JOIN coordfs_hosts h ON h.cluster = e.cluster AND h.host_id = e.host_id
                WHERE e.cluster = $1 AND e.cursor > $2 AND NOT e.host_id = ANY($3::bigint[])
                ORDER BY e.cursor LIMIT \(ClusterEvents.readLimit)
                """, [name, .integer(cursor), ownIDList])
            // Read after the rows: a trim that took rows this read could not see shows here.
            let horizon = try connection.execute("SELECT trimmed_through FROM coordfs_event_horizon WHERE cluster = $1",
                                                 [name])
            var items: [RemoteBatch.Item] = []
            if horizon.count > 0, let trimmed = horizon.integer(0, 0), trimmed > before {
                items.append(.resync(.fellBehind))
                cursor = max(cursor, trimmed)
            }
            for index in 0..<rows.count {
                guard let rowCursor = rows.integer(index, 0) else { continue }
                cursor = max(cursor, rowCursor)
                if let item = self.item(rows, index) { items.append(item) }
            }
            if !items.isEmpty { events.apply(RemoteBatch(items)) }
            if rows.count < ClusterEvents.readLimit { return }
        }
    }

    /// One row as what `apply` takes; nil for rows that tell nothing to apply (`left`, or a
    /// path this version cannot read).
    private func item(_ rows: DatabaseRows, _ index: Int) -> RemoteBatch.Item? {
        let hostID = rows.integer(index, 1) ?? 0
        let process = rows.text(index, 9) ?? ""
        if let hostname = rows.text(index, 10) { names[hostID] = hostname }
        let kindText = rows.text(index, 2) ?? ""
        switch kindText {
        case "left":
            return nil
        case "lost":
            return .resync(.hostDied(EventHost(id: hostID, name: process)))
        case "resync":
            return .resync(.publisherOverflowed(EventHost(id: hostID, name: process)))
        default:
            break
        }
        guard let kind = ChangeKind(rawValue: kindText),
              let path = rows.bytes(index, 3).flatMap({ MountPath(bytes: $0) }) else {
            events.logger.warning("cluster events: a row this version cannot read", metadata: ["kind": "\(kindText)"])
            return nil
        }
        let host = EventHost(id: hostID, name: names[hostID] ?? "host \(hostID)")
        let uid = rows.integer(index, 8).flatMap { UInt32(exactly: $0) } ?? EventOrigin.unknownUID
        let origin = EventOrigin(pid: Int32(truncatingIfNeeded: rows.integer(index, 7) ?? 0), uid: uid, processName: process, host: host)
        return .change(RemoteChange(cursor: rows.integer(index, 0) ?? 0, kind: kind, path: path,
                                    destination: rows.bytes(index, 4).flatMap { MountPath(bytes: $0) },
                                    isDirectory: rows.boolean(index, 5) ?? false, size: rows.integer(index, 6),
                                    origin: origin))
    }

    // MARK: Hosts and retention

    /// Reads the cluster's hosts: the peer daemons on this boot, and (with `announcingDeaths`)
    /// hosts that died since the last look.
    func refreshHosts(announcingDeaths: Bool) throws(DatabaseError) {
        guard let connection else { return }
        _ = me()
        let rows = try connection.execute("""
            SELECT h.host_id, h.hostname, h.boot_id, h.pid, \(HostRegistration.isAliveCondition(hostColumn: "h.host_id", keyParameter: "$3"))
            FROM coordfs_hosts h WHERE h.cluster = $1 AND NOT h.host_id = ANY($2::bigint[])
            """, [name, ownIDList, lockKey])
        var nowAlive: [Int64: String] = [:]
        var dead: [EventHost] = []
        var peerPIDs: Set<Int32> = []
        for index in 0..<rows.count {
            guard let id = rows.integer(index, 0) else { continue }
            let hostname = rows.text(index, 1) ?? ""
            names[id] = hostname
            if rows.boolean(index, 4) == true {
                nowAlive[id] = hostname
                if rows.text(index, 2) == events.bootID, let pid = rows.integer(index, 3) { peerPIDs.insert(Int32(truncatingIfNeeded: pid)) }
            } else {
                dead.append(EventHost(id: id, name: hostname))
            }
        }
        // Alive at the last look and gone now: died and reaped already, or left cleanly (its
        // `left` row, checked below, tells). Not this host's own new registration, seen at the
        // last look before this thread learned the id was its own (it is left out of the query
        // now): announcing it would send every host a needless resync.
        for (id, hostname) in alive where nowAlive[id] == nil && !ownIDs.contains(id) && !dead.contains(where: { $0.id == id }) {
            dead.append(EventHost(id: id, name: hostname))
        }
        alive = nowAlive
        events.peers.withLock { $0 = peerPIDs }
        guard announcingDeaths else { return }
        for host in dead { try announceDeath(of: host) }
    }

    /// Inserts the dead host's `lost` row, unless a host did already or the host left cleanly.
    private func announceDeath(of host: EventHost) throws(DatabaseError) {
        try transaction { (connection) throws(DatabaseError) in
            let rows = try connection.execute("""
                WITH marked AS (
                    INSERT INTO coordfs_events (cluster, host_id, kind, path, is_directory, pid, uid, process)
                    SELECT $1, $2, 'lost', '\\x2f'::bytea, true, 0, 0, $3
                    WHERE NOT EXISTS (SELECT 1 FROM coordfs_events
                                      WHERE cluster = $1 AND host_id = $2 AND kind IN ('lost', 'left'))
                    RETURNING cursor)
                SELECT pg_notify($4, 'events ' || cursor) FROM marked
                """, [name, .integer(host.id), .text(host.name), .text(configuration.channel)])
            if rows.count > 0 {
                events.logger.warning("cluster events: a host died; every host resynchronises once",
                                      metadata: ["host": "\(host.name)", "id": "\(host.id)"])
            }
        }
    }

    /// Deletes rows beyond the retention and raises the horizon to the last one deleted.
    func trim() throws(DatabaseError) {
        guard let connection else { return }
        try connection.execute("""
            WITH cut AS (
                SELECT greatest(
                    coalesce((SELECT max(cursor) FROM coordfs_events
                              WHERE cluster = $1 AND at < now() - $2::bigint * interval '1 millisecond'), 0),
                    coalesce((SELECT cursor FROM coordfs_events WHERE cluster = $1
                              ORDER BY cursor DESC OFFSET $3::bigint LIMIT 1), 0)) AS through),
            gone AS (
                DELETE FROM coordfs_events WHERE cluster = $1 AND cursor <= (SELECT through FROM cut) RETURNING cursor)
            INSERT INTO coordfs_event_horizon (cluster, trimmed_through)
            SELECT $1, max(cursor) FROM gone HAVING count(*) > 0
            ON CONFLICT (cluster) DO UPDATE
            SET trimmed_through = greatest(coordfs_event_horizon.trimmed_through, excluded.trimmed_through)
            """, [name, .integer(events.retention.age.milliseconds), .integer(Int64(events.retention.rows))])
    }
}

extension Duration {
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
