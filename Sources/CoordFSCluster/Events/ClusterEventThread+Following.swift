import CoordFSCore
import Logging

// In: other hosts' rows after this host's cursor, read in cursor order and handed to
// `apply`, with a resync where trimming took rows this host had not read.
extension ClusterEventThread {
    /// Hands every row of other hosts after the cursor to `apply`, in order.
    func readRemote() throws(DatabaseError) {
        guard let connection else { return }
        _ = me()
        while true {
            let before = cursor
            let rows = try connection.execute("""
                SELECT e.cursor, e.host_id, e.kind, e.path, e.destination, e.is_directory, e.size, e.pid, e.uid, e.process, h.hostname, e.version
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
                                    origin: origin, version: rows.integer(index, 11)))
    }
}
