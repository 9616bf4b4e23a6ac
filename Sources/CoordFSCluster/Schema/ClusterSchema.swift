/// The tables a cluster keeps in its database, made on first use by whichever host comes
/// first (idempotent, under a transaction-level advisory lock so two first hosts do not race).
/// Every row names its cluster, so several clusters may share one database.
///
/// - `coordfs_hosts`: the live mounts. A host holds a session-level advisory lock for as long
///   as its session lives (key: the cluster's `lockKey` in the high half, the host id in the low
///   half); a row whose lock nobody holds is a dead host's, and any host may reap it once the
///   lease of its last proof (`proved_at` + `lease_ms`) is over.
/// - `coordfs_grants`: what each host may do without asking: a path (and its subtree) in a
///   claim mode, with the fence it was granted under.
/// - `coordfs_requests`: hosts waiting for a grant, in arrival order (`ticket`).
/// - `coordfs_events`: committed changes with a cursor that only grows, for other hosts'
///   caches and subscribers (CoordFSCluster/Events/ClusterEvents.swift).
/// - `coordfs_event_horizon`: the cursor up to which a cluster's events were trimmed: a host
///   whose cursor is below it missed some and must resynchronise.
public enum ClusterSchema {
    /// Bumped when the tables change shape; a host refuses a database made by a newer version.
    public static let version = 1

    public static let statements: [String] = [
        "SELECT pg_advisory_xact_lock(hashtext('coordfs schema'))",
        """
        CREATE TABLE IF NOT EXISTS coordfs_schema (version int NOT NULL)
        """,
        """
        CREATE SEQUENCE IF NOT EXISTS coordfs_host_ids MAXVALUE 2147483647 CYCLE
        """,
        """
        CREATE TABLE IF NOT EXISTS coordfs_hosts (
            cluster text NOT NULL,
            host_id bigint NOT NULL,
            hostname text NOT NULL,
            boot_id text NOT NULL,
            pid int NOT NULL,
            mountpoint bytea NOT NULL,
            server_pid int NOT NULL,
            joined timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (cluster, host_id)
        )
        """,
        // When the host last proved its session (the server's clock), and for how long after
        // that it may trust its grants: a host whose session ended is reaped only once that
        // time is over (Grants/GrantFunctions.swift, `coordfs_reap`).
        """
        ALTER TABLE coordfs_hosts ADD COLUMN IF NOT EXISTS proved_at timestamptz NOT NULL DEFAULT now()
        """,
        """
        ALTER TABLE coordfs_hosts ADD COLUMN IF NOT EXISTS lease_ms bigint NOT NULL DEFAULT 3000
        """,
        // The ids the same daemon had before it lost its session and registered again: those
        // hosts did not die (ClusterEventThread+Hosts.swift).
        """
        ALTER TABLE coordfs_hosts ADD COLUMN IF NOT EXISTS succeeds bigint[] NOT NULL DEFAULT '{}'
        """,
        """
        CREATE SEQUENCE IF NOT EXISTS coordfs_fences
        """,
        """
        CREATE TABLE IF NOT EXISTS coordfs_grants (
            cluster text NOT NULL,
            host_id bigint NOT NULL,
            path bytea NOT NULL,
            mode smallint NOT NULL,
            fence bigint NOT NULL,
            since timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (cluster, host_id, path, mode)
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS coordfs_requests (
            cluster text NOT NULL,
            ticket bigserial,
            host_id bigint NOT NULL,
            path bytea NOT NULL,
            mode smallint NOT NULL,
            since timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (cluster, ticket)
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS coordfs_events (
            cluster text NOT NULL,
            cursor bigserial,
            host_id bigint NOT NULL,
            kind text NOT NULL,
            path bytea NOT NULL,
            destination bytea,
            is_directory boolean NOT NULL,
            size bigint,
            pid int NOT NULL,
            uid bigint NOT NULL,
            process text NOT NULL,
            at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (cluster, cursor)
        )
        """,
        // For events about versions, the version's id (the hosts share the version store).
        """
        ALTER TABLE coordfs_events ADD COLUMN IF NOT EXISTS version bigint
        """,
        """
        CREATE TABLE IF NOT EXISTS coordfs_event_horizon (
            cluster text PRIMARY KEY,
            trimmed_through bigint NOT NULL
        )
        """,
        """
        INSERT INTO coordfs_schema (version) SELECT \(version) WHERE NOT EXISTS (SELECT 1 FROM coordfs_schema)
        """,
    ]
}
