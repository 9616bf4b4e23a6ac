import CoordFSCore

/// The host's session connection and what it is registered as: one per (re)connection, used
/// by the session thread alone (so not Sendable, as `DatabaseConnection`). Each method is one
/// round trip, one transaction.
final class SessionLink {
    let connection: DatabaseConnection
    let host: ClusterHost
    /// Stamped on this session's grant rows (`coordfs_fences`): tells a grant of this session
    /// from one of an earlier session of the same mount in the tables.
    let fence: Int64
    private let configuration: ClusterConfiguration

    /// Connects, registers the host (its liveness lock taken), installs the grant functions
    /// and listens on the cluster's channel.
    /// `succeeding`: the ids this daemon had before (see `HostRegistration.register`).
    init(configuration: ClusterConfiguration, mountpoint: [UInt8], succeeding: [Int64] = []) throws(DatabaseError) {
        let connection = try DatabaseConnection(conninfo: configuration.conninfo, parameters: configuration.connectionParameters)
        host = try HostRegistration.register(on: connection, configuration: configuration, mountpoint: mountpoint,
                                             succeeding: succeeding)
        try connection.install(GrantFunctions.statements)
        fence = try connection.execute("SELECT nextval('coordfs_fences')").integer(0, 0) ?? 0
        try connection.execute("LISTEN \(configuration.channel)")
        self.connection = connection
        self.configuration = configuration
    }

    private var common: [DatabaseValue] {
        [.text(configuration.name), .integer(Int64(configuration.lockKey)), .text(configuration.channel), .integer(host.id)]
    }

    /// What `coordfs_acquire` answered.
    struct Reply {
        var granted: [HeldGrant] = []
        var tickets: [Int64] = []
        var holders: [String] = []
        /// The hosts among `holders` that hold conflicting grants (the others queued earlier).
        var grantHolders: [Int64] = []
        var waiting: [QueuedRequest] = []
    }

    /// `recall`: a queued request asked again tells its holders again.
    func acquire(_ requests: [ClaimRequest], tickets: [Int64], nonblocking: Bool, recall: Bool) throws(DatabaseError) -> Reply {
        let rows = try connection.execute("""
            SELECT * FROM coordfs_acquire($1, $2::int, $3, $4::bigint, $5::bigint, $6::text[], $7::smallint[], $8::bigint[],
                                          $9::boolean, $10::boolean)
            """, common + [.integer(fence), .text(Self.hexArray(requests.map(\.path))),
                           .text(Self.array(requests.map { Int64($0.mode.rawValue) })), .text(Self.array(tickets)),
                           .boolean(nonblocking), .boolean(recall)])
        return Self.reply(rows)
    }

    /// Gives back `dropped`, holding `added` in their place; returns the other hosts' queue.
    func replace(dropping dropped: [HeldGrant], adding added: [HeldGrant]) throws(DatabaseError) -> [QueuedRequest] {
        let rows = try connection.execute("""
            SELECT * FROM coordfs_replace($1, $2::int, $3, $4::bigint, $5::bigint, $6::text[], $7::smallint[], $8::text[], $9::smallint[])
            """, common + [.integer(fence),
                           .text(Self.hexArray(dropped.map(\.path))), .text(Self.array(dropped.map { Int64($0.mode.rawValue) })),
                           .text(Self.hexArray(added.map(\.path))), .text(Self.array(added.map { Int64($0.mode.rawValue) }))])
        return Self.reply(rows).waiting
    }

    func withdraw(_ tickets: [Int64]) throws(DatabaseError) {
        try connection.execute("SELECT coordfs_withdraw($1, $2::int, $3, $4::bigint, $5::bigint[])",
                               common + [.text(Self.array(tickets))])
    }

    /// Tells the host that recalled this one that it gave back what it could.
    func answer() throws(DatabaseError) {
        try connection.execute("SELECT coordfs_answer($1, $2::bigint)", [.text(configuration.channel), .integer(host.id)])
    }

    func waiting() throws(DatabaseError) -> [QueuedRequest] {
        Self.reply(try connection.execute("SELECT * FROM coordfs_waiting($1, $2::bigint)",
                                          [.text(configuration.name), .integer(host.id)])).waiting
    }

    /// Reaps dead hosts (a new session, after a lost one); returns how many.
    @discardableResult
    func reap() throws(DatabaseError) -> Int64 {
        try connection.execute("SELECT coordfs_reap($1, $2::int, $3)", Array(common.prefix(3))).integer(0, 0) ?? 0
    }

    /// The heartbeat's round trip: proves the session (the only round trip that does: the
    /// server reaps a host whose session ended once this proof's lease is over), and reaps
    /// dead hosts; returns how many.
    @discardableResult
    func heartbeat() throws(DatabaseError) -> Int64 {
        try connection.execute("SELECT coordfs_heartbeat($1, $2::int, $3, $4::bigint)", common).integer(0, 0) ?? 0
    }

    /// Takes this host's row, grants and requests out: this session's, or (`id`) those of a
    /// session this host lost and no longer trusts (its fence grew), so that other hosts need
    /// not wait for that session's lease to run out.
    func leave(id: Int64? = nil) throws(DatabaseError) {
        try connection.execute("SELECT coordfs_leave($1, $2::int, $3, $4::bigint)", Array(common.prefix(3)) + [.integer(id ?? host.id)])
    }

    func status() throws(DatabaseError) -> ClusterStatus {
        let name = DatabaseValue.text(configuration.name)
        let hostRows = try connection.execute("""
            SELECT h.host_id, h.hostname, h.pid, h.mountpoint,
                   \(HostRegistration.isAliveCondition(hostColumn: "h.host_id", keyParameter: "$2"))
            FROM coordfs_hosts h WHERE h.cluster = $1 ORDER BY h.host_id
            """, [name, .integer(Int64(configuration.lockKey))])
        let hosts = (0..<hostRows.count).map { row in
            ClusterStatus.Host(id: hostRows.integer(row, 0) ?? 0, hostname: hostRows.text(row, 1) ?? "",
                               pid: Int32(truncatingIfNeeded: hostRows.integer(row, 2) ?? 0),
                               mountpoint: hostRows.bytes(row, 3) ?? [], alive: hostRows.boolean(row, 4) ?? false,
                               isSelf: hostRows.integer(row, 0) == host.id)
        }
        func entries(_ table: String, order: String) throws(DatabaseError) -> [ClusterStatus.Entry] {
            let rows = try connection.execute("""
                SELECT host_id, path, mode, (extract(epoch FROM now() - since) * 1000000)::bigint
                FROM \(table) WHERE cluster = $1 ORDER BY \(order)
                """, [name])
            return (0..<rows.count).map { row in
                ClusterStatus.Entry(host: rows.integer(row, 0) ?? 0, path: rows.bytes(row, 1) ?? [],
                                    mode: ClaimMode(rawValue: UInt8(truncatingIfNeeded: rows.integer(row, 2) ?? 0)) ?? .exclusive,
                                    age: .microseconds(rows.integer(row, 3) ?? 0))
            }
        }
        return ClusterStatus(hosts: hosts, grants: try entries("coordfs_grants", order: "path, host_id"),
                             waiting: try entries("coordfs_requests", order: "ticket"), connected: true, problem: nil)
    }

    // MARK: Values

    private static func reply(_ rows: DatabaseRows) -> Reply {
        var reply = Reply()
        for row in 0..<rows.count {
            let mode = rows.integer(row, 3).flatMap { ClaimMode(rawValue: UInt8(truncatingIfNeeded: $0)) }
            let path = rows.bytes(row, 2).flatMap { MountPath(bytes: $0) }
            switch rows.text(row, 0) {
            case "granted":
                if let path, let mode { reply.granted.append(HeldGrant(path, mode)) }
            case "ticket":
                if let ticket = rows.integer(row, 4) { reply.tickets.append(ticket) }
            case "holder", "ahead":
                reply.holders.append(rows.text(row, 5) ?? "host \(rows.integer(row, 1) ?? 0)")
                if rows.text(row, 0) == "holder", let host = rows.integer(row, 1) { reply.grantHolders.append(host) }
            case "waiting":
                if let path, let mode, let ticket = rows.integer(row, 4), let host = rows.integer(row, 1) {
                    reply.waiting.append(QueuedRequest(ticket: ticket, host: host, path: path, mode: mode))
                }
            default:
                break
            }
        }
        return reply
    }

    private static func hexArray(_ paths: [MountPath]) -> String { ArrayLiteral.hex(paths) }

    private static func array(_ numbers: [Int64]) -> String { ArrayLiteral.integers(numbers) }
}
