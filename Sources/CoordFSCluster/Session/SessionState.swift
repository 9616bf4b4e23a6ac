import CoordFSCore
import Dispatch
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
    /// Nonblocking and queued behind grants only: the holders may merely cache them, so it
    /// waits for each holder's answer to the recall (`changed <host>`), and no later than this.
    var answerBy: ContinuousClock.Instant?
    /// The grant holders it waits for, and those that answered since it was queued.
    var grantHolders: Set<Int64> = []
    var answered: Set<Int64> = []

    /// When the session thread must end it if nothing else does.
    var due: ContinuousClock.Instant { answerBy.map { min($0, deadline) } ?? deadline }
}

/// Everything the session thread and the callers of `ClusterCoverage` share.
struct SessionState {
    var host: ClusterHost
    /// The ids this daemon registered under before `host` (it lost its session and came back).
    var formerHostIDs: [Int64] = []
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
    /// Signalled by the session thread as it ends, so `stop` waits for it a bounded time.
    let finished = DispatchSemaphore(value: 0)

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

    /// Ends waiter `id` at `deadline` if it still waits then (whoever comes first, this timer
    /// or the session thread, removes it under the lock: its outcome is given once). Its
    /// queued requests are left for the session thread to withdraw.
    /// A wait the session thread has not asked for yet is left to it a little longer (up to
    /// `unaskedGrace`): it asks before it looks at deadlines, so a request with no time to
    /// wait still gets what is free, and the timer only steps in for a thread that is stuck
    /// (at once when the lease lapsed: the thread has not proved the session for that long).
    func endWait(_ id: UInt64, at deadline: ContinuousClock.Instant) {
        arm(at: deadline) { [self] in endWaitNow(id, deadline: deadline) }
    }

    static let unaskedGrace: Duration = .seconds(1)

    private func arm(at instant: ContinuousClock.Instant, _ body: @escaping @Sendable () -> Void) {
        let (seconds, attoseconds) = (instant - .now).components
        let nanoseconds = max(seconds * 1_000_000_000 + attoseconds / 1_000_000_000, 0) + 1_000_000
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(clamping: nanoseconds))) { [self] in
            // Dispatch's clock is not ContinuousClock: a timer a little early is set again.
            if ContinuousClock.now < instant {
                arm(at: instant, body)
            } else {
                body()
            }
        }
    }

    private func endWaitNow(_ id: UInt64, deadline: ContinuousClock.Instant) {
        let validity = configuration.leaseValidity
        let graceEnd = deadline + Self.unaskedGrace
        let ended = state.withLock { state -> (CoverageWaiter, CoverageOutcome)? in
            guard let waiter = state.waiters[id] else { return nil }
            if !waiter.asked, state.leaseHolds(validity: validity), ContinuousClock.now < graceEnd {
                arm(at: graceEnd) { [self] in endWaitNow(id, deadline: deadline) }
                return nil
            }
            state.waiters[id] = nil
            state.withdrawals += waiter.tickets
            if waiter.nonblocking { return (waiter, .wouldBlock) }
            if state.leaseHolds(validity: validity) { return (waiter, .timedOut(holders: waiter.holders)) }
            return (waiter, .cutOff(reason: state.problem ?? "the cluster's database does not answer"))
        }
        guard let (waiter, outcome) = ended else { return }
        waiter.onOutcome(outcome)
        signal()
    }

    func signal() {
        var one: UInt64 = 1
        _ = Glibc.write(wake, &one, 8)
    }
}
