import CoordFSCore
import Logging
import Synchronization

// Out: this host's queued events inserted into the events table, a batch per transaction
// with its NOTIFY, in the queue's order.
extension ClusterEventThread {
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
        var sizes: [Int64?] = [], pids: [Int64?] = [], uids: [Int64?] = [], processes: [String] = [], versions: [Int64?] = []
        for event in batch {
            kinds.append(event.kind.rawValue)
            paths.append(event.path.bytes)
            destinations.append(event.destination?.bytes)
            directories.append(event.isDirectory)
            sizes.append(event.size)
            pids.append(Int64(event.origin.pid))
            uids.append(Int64(event.origin.uid))
            processes.append(event.origin.processName)
            versions.append(event.version)
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
            versions.append(nil)
        }
        try connection.execute("""
            WITH locked AS MATERIALIZED (SELECT pg_advisory_xact_lock($4::int, -1)),
            inserted AS (
                INSERT INTO coordfs_events (cluster, host_id, kind, path, destination, is_directory, size, pid, uid, process, version)
                SELECT $1, $2, v.kind, decode(v.path, 'hex'), decode(v.destination, 'hex'), v.is_directory, v.size, v.pid, v.uid, v.process,
                       v.version
                FROM locked, unnest($5::text[], $6::text[], $7::text[], $8::boolean[], $9::bigint[], $10::int[], $11::bigint[], $12::text[],
                                    $13::bigint[])
                    WITH ORDINALITY AS v(kind, path, destination, is_directory, size, pid, uid, process, version, n)
                ORDER BY v.n
                RETURNING cursor)
            SELECT pg_notify($3, 'events ' || max(cursor)) FROM inserted
            """, [name, .integer(host.id), .text(configuration.channel), lockKey,
                  .text(ArrayLiteral.texts(kinds)), .text(ArrayLiteral.hex(paths)), .text(ArrayLiteral.hex(destinations)),
                  .text(ArrayLiteral.booleans(directories)), .text(ArrayLiteral.integers(sizes)), .text(ArrayLiteral.integers(pids)),
                  .text(ArrayLiteral.integers(uids)), .text(ArrayLiteral.texts(processes)), .text(ArrayLiteral.integers(versions))])
    }
}
