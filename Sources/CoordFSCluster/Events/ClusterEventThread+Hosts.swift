import CoordFSCore
import Logging
import Synchronization

// Hosts: the cluster's live hosts (peer daemons on this boot), and the `lost` row that
// tells every host of one that died without a clean leave.
extension ClusterEventThread {
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
        try settleDeaths(dead)
    }

    /// Announces each dead host once it has stayed dead for `deathGrace` without a successor:
    /// a daemon that lost its session (a database restart or failover ends them all) and
    /// registered again names its former ids (`succeeds`), and its queued events follow under
    /// the new one, so nothing of it was lost and nobody need resynchronise.
    private func settleDeaths(_ dead: [EventHost]) throws(DatabaseError) {
        let now = ContinuousClock.now
        for host in dead where deadSince[host.id] == nil && !announced.contains(host.id) {
            deadSince[host.id] = (host, now)
        }
        guard !deadSince.isEmpty, let connection else { return }
        let rows = try connection.execute("SELECT DISTINCT unnest(succeeds) FROM coordfs_hosts WHERE cluster = $1", [name])
        let succeeded = Set((0..<rows.count).compactMap { rows.integer($0, 0) })
        for (id, entry) in deadSince {
            if succeeded.contains(id) {
                deadSince[id] = nil
                announced.insert(id)
            } else if now - entry.since >= configuration.deathGrace {
                try announceDeath(of: entry.host)
                deadSince[id] = nil
                announced.insert(id)
            }
        }
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
}
