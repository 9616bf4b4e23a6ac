import Dispatch
import Synchronization

/// Hierarchical reader-writer claims on mount paths, with fair queueing and deadlines
/// (Docs/LOCKING.md is the specification).
///
/// A request names one or more paths and is granted all at once or not at all; a queued
/// request holds nothing. Waiting takes no thread: a queued request's callback runs later on
/// whichever thread frees it (a `release`, a `cancel` or the table's one deadline timer), always
/// after the table's lock is released, so callbacks may call back into the table.
public final class ClaimTable: Sendable {
    private struct Locked {
        var claims: ClaimState
        /// One-shot timer for the earliest deadline; made when the first request queues.
        var timer: (any DispatchSourceTimer)?
        /// The deadline the timer is set for, nil while it is idle.
        var armedFor: ContinuousClock.Instant?
        /// The latest breaks, oldest first, for status.
        var recentBreaks: [ClaimBreak] = []
        /// Told of every break, after the lock is released.
        var breakObservers: [@Sendable ([ClaimBreak]) -> Void] = []
    }

    /// How many breaks status keeps.
    public static let recentBreakLimit = 32

    /// Guards the claim state (trie, queue, deadline heap, counters) and the timer's arming.
    /// A leaf lock (Docs/LOCKING.md): callbacks run after it is released, and nothing it runs
    /// reads /proc or the backing (pass-through is decided from `ProcessLineage`).
    /// Sendable: `Mutex` is; the classes inside are touched only with it held.
    private let locked: Mutex<Locked>
    /// Where the timer's handler runs.
    private let timerQueue = DispatchQueue(label: "coordfs.claims.deadlines")

    /// Explicit (client) holds and waits: read without the lock, to skip reading a requester's
    /// lineage from /proc while there are none.
    private let explicitEntries = Atomic<Int>(0)

    /// - Parameter breakAfter: how long a waiter waits for claims of another user before it
    ///   breaks them (`ClaimBreak`); nil: never. Only owners acquired with a `user` break or
    ///   are broken.
    public init(breakAfter: Duration? = nil) {
        var claims = ClaimState()
        claims.breakAfter = breakAfter
        locked = Mutex(Locked(claims: claims))
    }

    /// Calls `observer` with every break from now on, outside the table's lock (from the
    /// table's timer queue): what tells a holder (the control socket) and the log.
    public func onBreak(_ observer: @escaping @Sendable ([ClaimBreak]) -> Void) {
        locked.withLock { $0.breakObservers.append(observer) }
    }

    /// The latest breaks, oldest first (at most `recentBreakLimit`).
    public var recentBreaks: [ClaimBreak] {
        locked.withLock { $0.recentBreaks }
    }

    /// Whether explicit claims are held or waited for: only then can a process pass through
    /// anything, so only then does a requester's `ProcessLineage` matter. A claim granted just
    /// after a requester read false is one taken after the request, which its tree's processes
    /// (started under it) never make.
    public var hasExplicitClaims: Bool { explicitEntries.load(ordering: .relaxed) > 0 }

    /// Runs `body` on the state under the lock, then publishes the explicit-claim count.
    private func withState<R>(_ body: (inout Locked) -> R) -> R {
        locked.withLock { locked in
            let result = body(&locked)
            explicitEntries.store(locked.claims.explicitEntries, ordering: .relaxed)
            return result
        }
    }

    deinit {
        locked.withLock { $0.timer?.cancel() }
    }

    /// Grants now, or returns the holders that conflict. Never queues. It follows the same rule
    /// as `acquire`, so it also fails when the request would have to queue behind an earlier waiter.
    /// `lineage`: the requesting process's, read before asking (see `ProcessLineage`).
    /// `user`: the owner's, for the break rule (nil: it neither breaks nor is broken).
    public func tryAcquire(_ requests: [ClaimRequest], owner: ClaimOwner, user: UInt32? = nil,
                           lineage: ProcessLineage = .none) -> Result<ClaimGrant, ClaimConflict> {
        let requester = Requester(owner: owner, lineage: lineage, user: user)
        let (result, wakeups) = withState { locked -> (Result<ClaimGrant, ClaimConflict>, [ClaimWakeup]) in
            if locked.claims.isBlocked(requests, owner: requester, ticket: .max) {
                let blockers = locked.claims.blockers(of: requests, owner: requester, ticket: .max)
                return (.failure(ClaimConflict(blockers: blockers)), [])
            }
            var wakeups: [ClaimWakeup] = []
            let grant = locked.claims.grant(requests, owner: owner, user: user)
            locked.claims.wake(overlapping: requests.lazy.map(\.path), grantee: owner, into: &wakeups)
            return (.success(grant), wakeups)
        }
        Self.run(wakeups)
        if case .success = result { Instruments.claimsGranted.increment() }
        return result
    }

    /// Grants now (`.granted`; `onOutcome` is not called) or queues (`.waiting`): then `onOutcome`
    /// is called exactly once, later, outside the lock, with `.granted` or, at `deadline`,
    /// `.timedOut` — unless `cancel` takes the waiter out first. The call may come before this
    /// method has returned the ticket (another thread may free the request at once).
    public func acquire(_ requests: [ClaimRequest], owner: ClaimOwner, user: UInt32? = nil, lineage: ProcessLineage = .none,
                        deadline: ContinuousClock.Instant,
                        onOutcome: @escaping @Sendable (ClaimWaitOutcome) -> Void) -> ClaimAttempt {
        let requester = Requester(owner: owner, lineage: lineage, user: user)
        let (attempt, wakeups) = withState { locked -> (ClaimAttempt, [ClaimWakeup]) in
            if !locked.claims.isBlocked(requests, owner: requester, ticket: .max) {
                var wakeups: [ClaimWakeup] = []
                let grant = locked.claims.grant(requests, owner: owner, user: user)
                // A grant only adds claims, but it can let waiters of the same owner skip the queue.
                locked.claims.wake(overlapping: requests.lazy.map(\.path), grantee: owner, into: &wakeups)
                return (.granted(grant), wakeups)
            }
            let waiter = locked.claims.enqueue(requests, owner: requester, deadline: deadline, onOutcome: onOutcome)
            arm(&locked)
            return (.waiting(ClaimWaitTicket(id: waiter.ticket)), [])
        }
        Self.run(wakeups)
        if case .granted = attempt { Instruments.claimsGranted.increment() }
        return attempt
    }

    /// Removes a waiter. True when it was still waiting: then its callback is never called.
    /// False when it was already granted or timed out (its callback has run or is running).
    @discardableResult
    public func cancel(_ ticket: ClaimWaitTicket) -> Bool {
        let (removed, wakeups) = withState { locked -> (ContinuousClock.Instant?, [ClaimWakeup]) in
            guard let waiter = locked.claims.waiters[ticket.id] else { return (nil, []) }
            locked.claims.dequeue(waiter)
            var wakeups: [ClaimWakeup] = []
            locked.claims.wake(overlapping: waiter.requests.lazy.map(\.path), into: &wakeups)
            return (waiter.since, wakeups)
        }
        Self.run(wakeups)
        if let waitedSince = removed { Self.countWithdrawn(since: waitedSince) }
        return removed != nil
    }

    /// Releases a grant (a second release does nothing) and wakes the waiters that can now go,
    /// after unlocking.
    public func release(_ grant: ClaimGrant) {
        let wakeups = withState { locked -> [ClaimWakeup] in
            var released = false
            for request in grant.requests {
                if locked.claims.removeHold(grant.id, at: request.path) { released = true }
            }
            var wakeups: [ClaimWakeup] = []
            if released {
                locked.claims.wake(overlapping: grant.requests.lazy.map(\.path), into: &wakeups)
            }
            return wakeups
        }
        Self.run(wakeups)
    }

    /// Releases every grant of `owner` and takes its waiters out of the queue without calling
    /// them, returning their tickets: what a control-socket client's disconnect does.
    @discardableResult
    public func releaseAll(of owner: ClaimOwner) -> [ClaimWaitTicket] {
        let (withdrawn, wakeups) = withState { locked -> ([(ticket: UInt64, since: ContinuousClock.Instant)], [ClaimWakeup]) in
            var held: [Hold] = []
            locked.claims.trie.forEachEntry { entry in
                held.append(contentsOf: entry.holds.lazy.filter { $0.owner == owner })
            }
            for hold in held {
                _ = locked.claims.removeHold(hold.grant, at: hold.path)
            }
            let queued = locked.claims.waiters.values.filter { $0.owner == owner }.sorted { $0.ticket < $1.ticket }
            for waiter in queued {
                locked.claims.dequeue(waiter)
            }
            var wakeups: [ClaimWakeup] = []
            let paths = held.lazy.map(\.path) + queued.lazy.flatMap { $0.requests.lazy.map(\.path) }
            locked.claims.wake(overlapping: paths, into: &wakeups)
            return (queued.map { ($0.ticket, $0.since) }, wakeups)
        }
        Self.run(wakeups)
        for waiter in withdrawn { Self.countWithdrawn(since: waiter.since) }
        return withdrawn.map { ClaimWaitTicket(id: $0.ticket) }
    }

    /// For each of `grant`'s requests, the other grants its owner holds (or passes through, with
    /// `lineage`) on the path or an ancestor in a mode at least as strong: the claims the
    /// request is nested in (a second open of a file its process writes, a program under an
    /// explicit claim). Other hosts need not be asked for such a request (`ClaimAuthority`).
    public func enclosingGrants(of grant: ClaimGrant, lineage: ProcessLineage) -> [[UInt64]] {
        locked.withLock { locked in
            grant.requests.map { request in
                var found: [UInt64] = []
                var path: MountPath? = request.path
                while let current = path {
                    if let entry = locked.claims.trie.existingEntry(current) {
                        for hold in entry.holds where hold.grant != grant.id && hold.mode.rawValue >= request.mode.rawValue
                            && (hold.owner == grant.owner || lineage.passesThrough(hold.owner)) {
                            found.append(hold.grant)
                        }
                    }
                    path = current.parent
                }
                return found
            }
        }
    }

    /// Number of live entries (path nodes) in the table: 0 when nothing is held or waited for.
    public var entryCount: Int {
        locked.withLock { $0.claims.trie.entryCount }
    }

    /// Number of queued requests.
    public var waiterCount: Int {
        locked.withLock { $0.claims.waiters.count }
    }

    /// For status: every holder (by path, then age), and every waiter in arrival order.
    public func snapshot() -> ClaimTableSnapshot {
        locked.withLock { locked in
            var holders: [ClaimHolder] = []
            locked.claims.trie.forEachEntry { entry in
                holders.append(contentsOf: entry.holds.map(\.holder))
            }
            holders.sort { $0.path != $1.path ? $0.path < $1.path : $0.since < $1.since }
            let waiters = locked.claims.waiters.values.sorted { $0.ticket < $1.ticket }.map(\.info)
            return ClaimTableSnapshot(holders: holders, waiters: waiters)
        }
    }

    // MARK: Deadlines

    /// Sets the timer for the earliest deadline if it is not already set for that or earlier.
    /// Called with the lock held: scheduling a dispatch timer does not block or run callbacks.
    private func arm(_ locked: inout Locked) {
        guard let earliest = locked.claims.deadlines.first?.checkAt else { return }
        if let armed = locked.armedFor, armed <= earliest { return }
        let timer: any DispatchSourceTimer
        if let existing = locked.timer {
            timer = existing
        } else {
            timer = DispatchSource.makeTimerSource(queue: timerQueue)
            timer.setEventHandler { [weak self] in self?.expireWaiters() }
            timer.activate()
            locked.timer = timer
        }
        // Capped at a day: the timer only has to fire no later than the deadline, and a
        // spurious early firing just sets it again.
        let (seconds, attoseconds) = min(max(earliest - .now, .zero), .seconds(86_400)).components
        let nanoseconds = Int(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        timer.schedule(deadline: .now() + .nanoseconds(nanoseconds), repeating: .never, leeway: .microseconds(200))
        locked.armedFor = earliest
    }

    /// The timer fired: break and time out what is due, wake what that frees, set the timer
    /// for the next; then tell the observers of the breaks.
    private func expireWaiters() {
        let (wakeups, breaks, observers) = withState { locked -> ([ClaimWakeup], [ClaimBreak], [@Sendable ([ClaimBreak]) -> Void]) in
            locked.armedFor = nil
            var wakeups: [ClaimWakeup] = []
            var breaks: [ClaimBreak] = []
            locked.claims.expire(now: .now, into: &wakeups, breaks: &breaks)
            arm(&locked)
            guard !breaks.isEmpty else { return (wakeups, [], []) }
            locked.recentBreaks.append(contentsOf: breaks)
            locked.recentBreaks.removeFirst(max(0, locked.recentBreaks.count - Self.recentBreakLimit))
            return (wakeups, breaks, locked.breakObservers)
        }
        // The holders hear first, then the waiters go on.
        if !breaks.isEmpty {
            Instruments.claimsBroken.increment(by: breaks.count)
            for observer in observers { observer(breaks) }
        }
        Self.run(wakeups)
    }

    private static func run(_ wakeups: [ClaimWakeup]) {
        for wakeup in wakeups {
            wakeup.callback(wakeup.outcome)
            switch wakeup.outcome {
            case .granted: Instruments.claimsGranted.increment()
            case .timedOut: Instruments.claimsTimedOut.increment()
            }
            Instruments.claimWaitEnded(since: wakeup.waitedSince)
        }
    }

    /// A waiter left the queue before an outcome: interrupted, cancelled, or its client gone.
    private static func countWithdrawn(since waitedSince: ContinuousClock.Instant) {
        Instruments.claimsInterrupted.increment()
        Instruments.claimWaitEnded(since: waitedSince)
    }
}
