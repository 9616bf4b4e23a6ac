import Glibc

/// Who this host is in its cluster, once registered: the id other hosts know it by and the
/// name status shows.
public struct ClusterHost: Sendable, Hashable {
    public let id: Int64
    public let hostname: String
    public let pid: Int32
}

/// Makes the tables if they are missing, registers this mount as a host and takes its
/// liveness lock, all on `connection`, which becomes the host's session: when that session
/// ends (the process dies, the network or the server goes), the lock goes with it and other
/// hosts reap the row and its grants.
public enum HostRegistration {
    /// `succeeding`: the ids this daemon registered under before (it lost its session and
    /// came back): the other hosts do not take those for dead.
    public static func register(on connection: DatabaseConnection, configuration: ClusterConfiguration,
                                mountpoint: [UInt8], succeeding: [Int64] = []) throws(DatabaseError) -> ClusterHost {
        try connection.inTransaction { () throws(DatabaseError) in
            for statement in ClusterSchema.statements { try connection.execute(statement) }
            let version = try connection.execute("SELECT max(version) FROM coordfs_schema").integer(0, 0) ?? 0
            guard version <= ClusterSchema.version else {
                throw DatabaseError("the cluster's tables were made by a newer coordfs (schema \(version), this one knows \(ClusterSchema.version))")
            }
        }
        let hostname = Self.hostname()
        let pid = getpid()
        // The row and its liveness lock appear together (the session-level lock outlives the
        // COMMIT): a row seen without its lock is always a dead host's, never one registering,
        // so reaping can never take a live host's row.
        try connection.execute("BEGIN")
        do throws(DatabaseError) {
            let rows = try connection.execute("""
                INSERT INTO coordfs_hosts (cluster, host_id, hostname, boot_id, pid, mountpoint, server_pid, lease_ms, succeeds)
                VALUES ($1, nextval('coordfs_host_ids'), $2, $3, $4::int, $5, pg_backend_pid(), $6::bigint, $7::bigint[])
                RETURNING host_id
                """, [.text(configuration.name), .text(hostname), .text(bootID()), .integer(Int64(pid)), .bytes(mountpoint),
                      .integer(configuration.leaseValidity.components.seconds * 1000
                               + configuration.leaseValidity.components.attoseconds / 1_000_000_000_000_000),
                      .text("{" + succeeding.map(String.init).joined(separator: ",") + "}")])
            guard let id = rows.integer(0, 0) else { throw DatabaseError("registering the host returned no id") }
            try connection.execute("SELECT pg_advisory_lock($1::int, $2::int)",
                                   [.integer(Int64(configuration.lockKey)), .integer(id)])
            try connection.execute("COMMIT")
            return ClusterHost(id: id, hostname: hostname, pid: pid)
        } catch {
            _ = try? connection.execute("ROLLBACK")
            throw error
        }
    }

    /// SQL true when host `h` (a row of coordfs_hosts in scope) may still trust its grants: its
    /// last proof's lease is not over, by the server's clock, with a margin for clocks that run
    /// at slightly different rates (a tenth, and 100 ms).
    public static let leaseRunsCondition = "h.proved_at + (h.lease_ms * 11 / 10 + 100) * interval '1 millisecond' > clock_timestamp()"

    /// SQL true when host `host_id` (a column in scope) of cluster key `$key` holds its liveness lock.
    public static func isAliveCondition(hostColumn: String, keyParameter: String) -> String {
        """
        EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
                AND l.classid::bigint = (\(keyParameter)::int)::bigint & 4294967295 AND l.objid::bigint = \(hostColumn))
        """
    }

    static func hostname() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count) == 0 else { return "unknown" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// This boot's id: with the pid it tells a daemon on the same machine (whose writes the
    /// backing watch sees) from one elsewhere.
    static func bootID() -> String {
        guard let file = fopen("/proc/sys/kernel/random/boot_id", "r") else { return "" }
        defer { fclose(file) }
        var buffer = [CChar](repeating: 0, count: 64)
        guard fgets(&buffer, Int32(buffer.count), file) != nil else { return "" }
        return String(decoding: buffer.prefix { $0 != 0 && $0 != 10 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
