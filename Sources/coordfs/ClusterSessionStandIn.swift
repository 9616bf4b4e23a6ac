import CoordFSCluster
import CoordFSCore
import Logging
import Synchronization

// A stand-in with the API of CoordFSCluster's `ClusterSession` (the cluster-grants branch), so
// that the mount's start-up, failure and leave can be built and tested first. It registers
// the host (an unreachable database fails the mount) and covers every claim at once. This
// file goes when the real session is merged.

/// The host's session in its cluster (stand-in: registration only).
///
/// Sendable: the connection is touched under its mutex only.
final class ClusterSession: Sendable {
    let host: ClusterHost
    let coverage: any HostCoverage = CoverEverything()
    private let configuration: ClusterConfiguration
    private let connection: Mutex<DatabaseConnection?>

    init(configuration: ClusterConfiguration, mountpoint: [UInt8], logger: Logger) throws(DatabaseError) {
        let connection = try DatabaseConnection(conninfo: configuration.conninfo, parameters: configuration.connectionParameters)
        host = try HostRegistration.register(on: connection, configuration: configuration, mountpoint: mountpoint)
        self.configuration = configuration
        self.connection = Mutex(connection)
    }

    /// Leaves: the host's row goes, and the session with its lock.
    func stop() {
        connection.withLock { connection in
            _ = try? connection?.execute("DELETE FROM coordfs_hosts WHERE cluster = $1 AND host_id = $2",
                                         [.text(configuration.name), .integer(host.id)])
            connection = nil
        }
    }
}

/// Covers every request at once (the stand-in's coverage: other hosts are not asked).
private final class CoverEverything: HostCoverage {
    private let ids = Atomic<UInt64>(0)
    func coverNow(_ requests: [ClaimRequest]) -> CoverageUse? {
        CoverageUse(id: ids.add(1, ordering: .relaxed).newValue, requests: requests, fence: 0)
    }
    func cover(_ requests: [ClaimRequest], deadline: ContinuousClock.Instant, nonblocking: Bool,
               onOutcome: @escaping @Sendable (CoverageOutcome) -> Void) -> CoverageTicket {
        onOutcome(.covered(coverNow(requests)!))
        return CoverageTicket(id: 0)
    }
    func cancel(_ ticket: CoverageTicket) -> Bool { false }
    func release(_ use: CoverageUse) {}
    func stillHolds(_ use: CoverageUse) -> Bool { true }
}
