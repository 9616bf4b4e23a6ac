import CoordFSCore
import Glibc
import Logging
import Synchronization

/// The event thread's state and work. Used by that thread alone (and by `init` before it starts).
final class ClusterEventThread {
    let events: ClusterEvents
    var connection: DatabaseConnection?
    /// The last row of the table this host has read (or skipped as its own).
    var cursor: Int64
    /// Every id this host has had (see `ClusterEvents.currentHost`).
    var ownIDs: Set<Int64>
    /// Hosts seen alive at the last look, by id, with their names.
    var alive: [Int64: String] = [:]
    /// Names of hosts ever seen, for rows whose host has gone since.
    var names: [Int64: String] = [:]
    /// Hosts found dead and not announced yet, with when they were first found so: they have
    /// `deathGrace` to come back under a new id (`succeeds`) before they are.
    var deadSince: [Int64: (host: EventHost, since: ContinuousClock.Instant)] = [:]
    /// Hosts whose death this thread announced (or found announced): not looked at again.
    var announced: Set<Int64> = []
    private let clock = ContinuousClock()
    private var lastTick: ContinuousClock.Instant
    private var lastTrim: ContinuousClock.Instant
    /// When the last insert was sent, and how many events it carried (see `ClusterEvents.batchInterval`).
    private var lastFlush: ContinuousClock.Instant
    private var lastFlushCount = 0

    var configuration: ClusterConfiguration { events.configuration }
    var name: DatabaseValue { .text(configuration.name) }
    var lockKey: DatabaseValue { .integer(Int64(configuration.lockKey)) }
    /// Every id this host has had, as a bigint[] parameter.
    var ownIDList: DatabaseValue { .text("{" + ownIDs.sorted().map(String.init).joined(separator: ",") + "}") }

    /// This host as it is registered now.
    func me() -> ClusterHost {
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
    func transaction(_ body: (DatabaseConnection) throws(DatabaseError) -> Void) throws(DatabaseError) {
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
}

extension Duration {
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
