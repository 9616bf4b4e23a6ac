/// Where a cluster's shared state lives and how this host talks to it: what `--cluster`
/// (a libpq URI or `key=value` string, from the option, a file or the environment) and
/// `--cluster-name` give, plus the connection settings that bound how long a lost host keeps
/// its grants (Docs/LOCKING.md, "Across hosts").
public struct ClusterConfiguration: Sendable {
    /// The libpq connection string. Never logged: it may carry a password.
    public var conninfo: String
    /// Mounts that name the same database and the same cluster name form one coordinated folder.
    public var name: String

    /// The server ends a session whose host stopped answering after this long at most: TCP
    /// keepalives (idle, then probes) and TCP_USER_TIMEOUT on the server's side of the socket,
    /// set per session. A dead host's grants go at that point.
    public var serverSideTimeout: Duration = .seconds(8)
    /// This host stops trusting its grants once its last confirmed round trip is this old:
    /// shorter than `serverSideTimeout`, so a host that lost its session stops before any
    /// other host can be granted what it held.
    public var leaseValidity: Duration = .seconds(3)
    /// How often the session proves itself (a round trip), and looks for dead hosts.
    public var heartbeat: Duration = .seconds(1)
    /// How long a host that lost its session may take to come back (registered again, naming
    /// the ids it had: `succeeds`) before the others take it for dead and resynchronise. A
    /// restart or failover of the database ends every session at once; the daemons live on
    /// and publish what they queued, so none of them is lost. Longer than a reconnection
    /// (every second) plus a standby's promotion.
    public var deathGrace: Duration = .seconds(10)

    public init(conninfo: String, name: String) {
        self.conninfo = conninfo
        self.name = name
    }

    /// libpq keywords laid over `conninfo`: client-side keepalives and timeouts so a dead
    /// server is noticed as fast as a dead host, and the server-side settings in `options`.
    public var connectionParameters: [(String, String)] {
        let seconds = Int(serverSideTimeout.components.seconds)
        let idle = max(seconds / 2, 1)
        let probes = max(seconds - idle, 1)
        return [
            ("application_name", "coordfs"),
            ("connect_timeout", "5"),
            ("keepalives", "1"),
            ("keepalives_idle", String(idle)),
            ("keepalives_interval", "1"),
            ("keepalives_count", String(probes)),
            ("tcp_user_timeout", String(seconds * 1000)),
            ("options", "-c client_min_messages=warning -c tcp_keepalives_idle=\(idle) -c tcp_keepalives_interval=1 -c tcp_keepalives_count=\(probes) -c tcp_user_timeout=\(seconds * 1000)"),
        ]
    }

    /// The one NOTIFY channel of the cluster (an identifier, so a hash of the name, never the
    /// name itself).
    public var channel: String { "coordfs_" + String(UInt32(truncatingIfNeeded: Self.stableHash(name)), radix: 16) }

    /// The cluster's key for advisory locks: the high 32 bits of each host's liveness lock
    /// (its low 32 bits are the host id), and the transaction lock that orders grant changes.
    public var lockKey: Int32 { Int32(truncatingIfNeeded: Self.stableHash(name)) }

    /// FNV-1a over the name's bytes: the same on every host and every run (Swift's `hashValue` is not).
    static func stableHash(_ text: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return hash
    }
}
