import CoordFSCore

/// The cluster as its database shows it, for `coordfs status`.
///
/// Sendable: values only.
public struct ClusterStatus: Sendable {
    public struct Host: Sendable {
        public let id: Int64
        public let hostname: String
        public let pid: Int32
        public let mountpoint: [UInt8]
        /// Its session still holds its liveness lock (false: reaped at the next heartbeat).
        public let alive: Bool
        /// This mount's own row.
        public let isSelf: Bool
    }

    /// A grant held, or a request waiting; `age` by the database's clock (no skew between hosts).
    public struct Entry: Sendable {
        public let host: Int64
        public let path: [UInt8]
        public let mode: ClaimMode
        public let age: Duration
    }

    public let hosts: [Host]
    public let grants: [Entry]
    /// In arrival order (the order they will be granted in, conflicts allowing).
    public let waiting: [Entry]
    /// This host can reach the database; when false the lists are empty.
    public let connected: Bool
    /// Why not, when not.
    public let problem: String?
}
