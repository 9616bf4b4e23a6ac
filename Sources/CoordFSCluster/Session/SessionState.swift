import CoordFSCore
import Glibc
import Logging
import Synchronization

/// An operation waiting for coverage through the database.
struct CoverageWaiter {
    let requests: [ClaimRequest]
    let deadline: ContinuousClock.Instant
    let nonblocking: Bool
    let onOutcome: @Sendable (CoverageOutcome) -> Void
    /// Its rows in coordfs_requests under the current session (empty: not queued there).
    var tickets: [Int64] = []
    /// Asked in the current session at least once: later attempts wait for a wake-up.
    var asked = false
    /// Who it waits for, as the last attempt found them.
    var holders: [String] = []
}

/// Everything the session thread and the callers of `ClusterCoverage` share.
struct SessionState {
    var host: ClusterHost
    /// The session is up (false from the moment it is found lost until it is back).
    var connected = true
    /// Grows each time the session is lost: every `CoverageUse` of an older fence no longer holds.
    var fence: UInt64 = 1
    /// When the last round trip that succeeded was sent: the proof that the session (and with it
    /// every grant) stood at that moment.
    var lastProof: ContinuousClock.Instant
    /// Why the database cannot be reached, while it cannot.
    var problem: String?
    var held = HostGrants()
    var nextID: UInt64 = 1
    var waiters: [UInt64: CoverageWaiter] = [:]
    /// Tickets of cancelled requests, to take out of the database.
    var withdrawals: [Int64] = []
    /// Something changed that may let this host give back grants (a use released).
    var recallDue = false
    /// Work that needs the connection (status), run by the session thread.
    var jobs: [@Sendable (SessionLink?) -> Void] = []
    var stopping = false

    init(host: ClusterHost, lastProof: ContinuousClock.Instant) {
        self.host = host
        self.lastProof = lastProof
    }

    mutating func takeID() -> UInt64 {
        defer { nextID += 1 }
        return nextID
    }

    /// A use of the current fence, counted among the uses a recall keeps grants for.
    mutating func makeUse(_ requests: [ClaimRequest]) -> CoverageUse {
        let use = CoverageUse(id: takeID(), requests: requests, fence: fence)
        held.uses[use.id] = requests
        return use
    }

    func leaseHolds(validity: Duration, now: ContinuousClock.Instant = .now) -> Bool {
        connected && now - lastProof < validity
    }
}

/// What the session thread and the callers share, and how they wake the thread.
///
/// Sendable: constants, the state behind its `Mutex`, an atomic counter, and the eventfd
/// (a number written from any thread; closed at deinit, after the thread ended).
final class SessionShared: Sendable {
    let configuration: ClusterConfiguration
    let mountpoint: [UInt8]
    let logger: Logger
    /// Guards the host's grants, uses, waiters, fence and lease. A leaf: nothing else is
    /// locked while it is held, no callback runs and no round trip is made under it.
    let state: Mutex<SessionState>
    /// Round trips that asked for grants (coordfs_acquire), for the tests and status: an
    /// uncontended host makes one, then none.
    let grantRoundTrips = Atomic<UInt64>(0)
    /// Written to wake the session thread from its poll.
    let wake: Int32

    init(configuration: ClusterConfiguration, mountpoint: [UInt8], logger: Logger, host: ClusterHost,
         lastProof: ContinuousClock.Instant, wake: consuming OwnedDescriptor) {
        self.configuration = configuration
        self.mountpoint = mountpoint
        self.logger = logger
        self.state = Mutex(SessionState(host: host, lastProof: lastProof))
        self.wake = wake.release()
    }

    deinit {
        close(wake)
    }

    func signal() {
        var one: UInt64 = 1
        _ = Glibc.write(wake, &one, 8)
    }
}
