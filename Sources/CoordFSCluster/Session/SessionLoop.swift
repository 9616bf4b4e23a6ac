import CoordFSCore
import Glibc
import Logging
import SystemPackage

/// The session thread's body: the one user of the session's connection. Each pass reads the
/// notifications, proves the session when the heartbeat is due, takes cancelled requests out,
/// ends waits past their deadline, asks for what waits, gives back what another host waits
/// for, and runs queued jobs; then it sleeps in poll on the connection's socket and the
/// wake-up eventfd until the next heartbeat, deadline or reconnection attempt.
///
/// Outcomes are delivered on this thread, never under the state lock.
final class SessionLoop {
    private let shared: SessionShared
    private var link: SessionLink?
    private var nextHeartbeat: ContinuousClock.Instant
    private var nextReconnect: ContinuousClock.Instant = .now
    /// A `changed` wake-up came: the waiters ask again.
    private var retryDue = false
    /// A `recall` named this host: read the other hosts' queue.
    private var queueDue = false

    private var configuration: ClusterConfiguration { shared.configuration }
    private var logger: Logger { shared.logger }

    init(shared: SessionShared, link: SessionLink) {
        self.shared = shared
        self.link = link
        nextHeartbeat = .now + shared.configuration.heartbeat
    }

    func run() {
        while true {
            if shared.state.withLock({ $0.stopping }) {
                finish()
                return
            }
            if link == nil { reconnectIfDue() }
            if let link {
                do throws(DatabaseError) {
                    try serve(link)
                } catch {
                    if error.connectionLost || !link.connection.isOpen {
                        lose(error)
                    } else {
                        logger.warning("cluster session: \(error)")
                    }
                }
            }
            if link == nil { endWaitsWhileCutOff() }
            runJobs()
            sleep()
        }
    }

    // MARK: Connected

    private func serve(_ link: SessionLink) throws(DatabaseError) {
        for notification in try link.connection.notifications() where notification.channel == configuration.channel {
            let words = notification.payload.split(separator: " ")
            switch words.first {
            case "changed":
                retryDue = true
            case "recall":
                if words.dropFirst().contains(Substring(String(link.host.id))) { queueDue = true }
            default:
                break
            }
        }
        let now = ContinuousClock.now
        if now >= nextHeartbeat {
            try link.reap()
            proved(sentAt: now)
            nextHeartbeat = now + configuration.heartbeat
            // A safety net under the wake-ups: queued waiters ask again once a heartbeat.
            if shared.state.withLock({ $0.waiters.values.contains { !$0.tickets.isEmpty } }) { retryDue = true }
        }
        try withdrawCancelled(link)
        try endExpiredWaits(link)
        try askForWaiters(link)
        if queueDue {
            queueDue = false
            let sent = ContinuousClock.now
            let queued = try link.waiting()
            proved(sentAt: sent)
            shared.state.withLock { state in
                state.held.queued = queued
                state.recallDue = true
            }
        }
        try giveBack(link)
    }

    private func proved(sentAt sent: ContinuousClock.Instant) {
        shared.state.withLock { state in
            if sent > state.lastProof { state.lastProof = sent }
        }
    }

    private func withdrawCancelled(_ link: SessionLink) throws(DatabaseError) {
        let tickets = shared.state.withLock { state in
            defer { state.withdrawals = [] }
            return state.withdrawals
        }
        guard !tickets.isEmpty else { return }
        let sent = ContinuousClock.now
        try link.withdraw(tickets)
        proved(sentAt: sent)
    }

    private func endExpiredWaits(_ link: SessionLink) throws(DatabaseError) {
        let now = ContinuousClock.now
        let expired = shared.state.withLock { state -> [CoverageWaiter] in
            let ids = state.waiters.filter { $0.value.deadline <= now }.keys
            return ids.compactMap { state.waiters.removeValue(forKey: $0) }
        }
        guard !expired.isEmpty else { return }
        let tickets = expired.flatMap(\.tickets)
        for waiter in expired { waiter.onOutcome(.timedOut(holders: waiter.holders)) }
        if !tickets.isEmpty {
            let sent = ContinuousClock.now
            try link.withdraw(tickets)
            proved(sentAt: sent)
        }
    }

    /// Asks for every waiter not asked yet in this session, and, after a wake-up, for those
    /// queued, in arrival order (ids grow).
    private func askForWaiters(_ link: SessionLink) throws(DatabaseError) {
        let retry = retryDue
        retryDue = false
        let ids = shared.state.withLock { state in
            state.waiters.filter { retry || !$0.value.asked }.keys.sorted()
        }
        for id in ids { try ask(id, link) }
    }

    private func ask(_ id: UInt64, _ link: SessionLink) throws(DatabaseError) {
        var delivery: (@Sendable (CoverageOutcome) -> Void, CoverageOutcome)?
        let question = shared.state.withLock { state -> CoverageWaiter? in
            guard let waiter = state.waiters[id] else { return nil }
            // Granted meanwhile to an earlier waiter wide enough for this one too.
            if waiter.tickets.isEmpty, state.held.covers(waiter.requests) {
                state.waiters[id] = nil
                delivery = (waiter.onOutcome, .covered(state.makeUse(waiter.requests)))
                return nil
            }
            return waiter
        }
        if let (onOutcome, outcome) = delivery { onOutcome(outcome) }
        guard let question else { return }
        let sent = ContinuousClock.now
        shared.grantRoundTrips.add(1, ordering: .relaxed)
        let reply = try link.acquire(question.requests, tickets: question.tickets, nonblocking: question.nonblocking)
        proved(sentAt: sent)
        var orphaned: [Int64] = []
        shared.state.withLock { state in
            state.held.queued = reply.waiting
            state.recallDue = true
            if !reply.granted.isEmpty {
                state.held.grants.formUnion(reply.granted)
                if let waiter = state.waiters.removeValue(forKey: id) {
                    delivery = (waiter.onOutcome, .covered(state.makeUse(waiter.requests)))
                }
            } else if question.nonblocking {
                if let waiter = state.waiters.removeValue(forKey: id) {
                    delivery = (waiter.onOutcome, .wouldBlock)
                }
            } else if state.waiters[id] != nil {
                if !reply.tickets.isEmpty { state.waiters[id]!.tickets = reply.tickets }
                state.waiters[id]!.asked = true
                state.waiters[id]!.holders = reply.holders
            } else {
                orphaned = reply.tickets  // cancelled during the round trip
            }
        }
        if let (onOutcome, outcome) = delivery { onOutcome(outcome) }
        if !orphaned.isEmpty { try link.withdraw(orphaned) }
    }

    /// The recall: gives back what other hosts wait for, keeping what local uses stand on.
    private func giveBack(_ link: SessionLink) throws(DatabaseError) {
        let change = shared.state.withLock { state -> (dropped: [HeldGrant], added: [HeldGrant])? in
            guard state.recallDue else { return nil }
            state.recallDue = false
            return state.held.recall()
        }
        guard let change else { return }
        logger.debug("cluster: giving back \(change.dropped), keeping \(change.added)")
        let sent = ContinuousClock.now
        let queued = try link.replace(dropping: change.dropped, adding: change.added)
        proved(sentAt: sent)
        shared.state.withLock { $0.held.queued = queued }
    }

    // MARK: Lost and found

    /// The session is gone, and every grant with it: uses of the old fence stop holding;
    /// waiters wait for the next session (or their deadline).
    private func lose(_ error: DatabaseError) {
        link = nil
        nextReconnect = .now
        shared.state.withLock { state in
            state.connected = false
            state.fence += 1
            state.held = HostGrants()
            state.problem = "the cluster's database cannot be reached: \(error)"
            state.withdrawals = []
            for id in state.waiters.keys {
                state.waiters[id]!.tickets = []
                state.waiters[id]!.asked = false
            }
        }
        logger.warning("cluster session lost (\(error)); reconnecting every second")
    }

    private func reconnectIfDue() {
        let now = ContinuousClock.now
        guard now >= nextReconnect else { return }
        nextReconnect = now + .seconds(1)
        do {
            let made = try SessionLink(configuration: configuration, mountpoint: shared.mountpoint)
            link = made
            nextHeartbeat = .now + configuration.heartbeat
            retryDue = true
            shared.state.withLock { state in
                state.host = made.host
                state.connected = true
                state.lastProof = now
                state.problem = nil
            }
            logger.info("cluster session back as host \(made.host.id)")
        } catch {
            shared.state.withLock { $0.problem = "the cluster's database cannot be reached: \(error)" }
        }
    }

    /// While cut off: nonblocking waits end at once, others at their deadline, `.cutOff`.
    private func endWaitsWhileCutOff() {
        let now = ContinuousClock.now
        let (ended, reason) = shared.state.withLock { state -> ([CoverageWaiter], String) in
            let ids = state.waiters.filter { $0.value.nonblocking || $0.value.deadline <= now }.keys
            return (ids.compactMap { state.waiters.removeValue(forKey: $0) },
                    state.problem ?? "the cluster's database cannot be reached")
        }
        for waiter in ended { waiter.onOutcome(.cutOff(reason: reason)) }
    }

    // MARK: Jobs, sleep, end

    private func runJobs() {
        let jobs = shared.state.withLock { state in
            defer { state.jobs = [] }
            return state.jobs
        }
        for job in jobs { job(link) }
    }

    private func sleep() {
        let now = ContinuousClock.now
        var until = link == nil ? nextReconnect : nextHeartbeat
        let connected = link != nil
        let (deadline, busy) = shared.state.withLock { state in
            (state.waiters.values.map(\.deadline).min(),
             !state.jobs.isEmpty || !state.withdrawals.isEmpty || state.stopping
                || (connected && state.waiters.values.contains { !$0.asked }))
        }
        if busy { return }
        if let deadline, deadline < until { until = deadline }
        let (seconds, attoseconds) = (until - now).components
        let milliseconds = max(Int32(clamping: seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000), 0)
        var descriptors = [shared.wake]
        if let link { descriptors.append(link.connection.socket) }
        _ = try? Syscall.waitReadable(descriptors, timeout: milliseconds)
        var counter: UInt64 = 0
        _ = Glibc.read(shared.wake, &counter, 8)
    }

    private func finish() {
        if let link {
            do {
                try link.leave()
            } catch {
                logger.warning("cluster session: leaving: \(error)")
            }
        }
        link = nil
        let ended = shared.state.withLock { state in
            state.connected = false
            state.fence += 1
            state.held = HostGrants()
            state.problem = "the mount is stopping"
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in ended { waiter.onOutcome(.cutOff(reason: "the mount is stopping")) }
        runJobs()
    }
}
