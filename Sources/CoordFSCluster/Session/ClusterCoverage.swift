import CoordFSCore

/// Coverage by the other hosts of the cluster: grants this host holds in coordfs_grants,
/// cached here so that an operation under a grant needs no round trip.
///
/// - A host asks for all of an operation's requests at once and gets, for each, the widest
///   ancestor of its path no other host uses in a conflicting way (alone: the root).
/// - A conflicting request of another host queues in coordfs_requests and NOTIFYs the holders
///   (`recall`). A holder then covers no new local use that conflicts with a queued request
///   (those queue behind it, first come first served across hosts), and replaces each
///   conflicting grant by grants on just what its uses still stand on, giving the rest back
///   at once; the last of those goes when its use is released. Each change NOTIFYs
///   (`changed`) and the waiters ask again: woken, never polling.
/// - No deadlock across hosts: an operation never holds part of its coverage while it waits
///   for the rest (all its requests are asked for in one transaction), and a use, once
///   covered, waits for no other host, so every wait ends when some use is released (or at
///   its deadline).
/// - Lost session: the fence grows, so every `CoverageUse` given out before fails
///   `stillHolds`; nothing is covered above snapshot-read until the session is back (`cover`
///   waits for it up to its deadline, then `.cutOff`). Snapshot-read is covered without proof
///   while cut off: reads change nothing. A use also stops holding once the last confirmed
///   round trip is older than `leaseValidity` (3 s), before the server can end the session and
///   hand its grants to another host (`serverSideTimeout`, 8 s).
///
/// Sendable: it holds only the shared session state (behind its lock).
final class ClusterCoverage: HostCoverage {
    private let shared: SessionShared

    init(shared: SessionShared) {
        self.shared = shared
    }

    func coverNow(_ requests: [ClaimRequest]) -> CoverageUse? {
        let validity = shared.configuration.leaseValidity
        return shared.state.withLock { state -> CoverageUse? in
            guard state.leaseHolds(validity: validity) else {
                guard requests.allSatisfy({ $0.mode == .snapshotRead }) else { return nil }
                return CoverageUse(id: state.takeID(), requests: requests, fence: state.fence)
            }
            guard state.held.covers(requests) else { return nil }
            return state.makeUse(requests)
        }
    }

    func cover(_ requests: [ClaimRequest], deadline: ContinuousClock.Instant, nonblocking: Bool,
               onOutcome: @escaping @Sendable (CoverageOutcome) -> Void) -> CoverageTicket {
        let id = shared.state.withLock { state in
            let id = state.takeID()
            state.waiters[id] = CoverageWaiter(requests: requests, deadline: deadline, nonblocking: nonblocking,
                                               onOutcome: onOutcome)
            return id
        }
        shared.signal()
        return CoverageTicket(id: id)
    }

    func cancel(_ ticket: CoverageTicket) -> Bool {
        let (waited, withdraw) = shared.state.withLock { state -> (Bool, Bool) in
            guard let waiter = state.waiters.removeValue(forKey: ticket.id) else { return (false, false) }
            state.withdrawals += waiter.tickets
            return (true, !waiter.tickets.isEmpty)
        }
        if withdraw { shared.signal() }
        return waited
    }

    func release(_ use: CoverageUse) {
        let recall = shared.state.withLock { state -> Bool in
            guard state.held.uses.removeValue(forKey: use.id) != nil, !state.held.queued.isEmpty else { return false }
            state.recallDue = true
            return true
        }
        if recall { shared.signal() }
    }

    func stillHolds(_ use: CoverageUse) -> Bool {
        let validity = shared.configuration.leaseValidity
        return shared.state.withLock { state in
            use.fence == state.fence && state.leaseHolds(validity: validity)
        }
    }
}
