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
    /// The heartbeat came with waiters queued: they ask again, and recall their holders again.
    private var recallAgain = false
    /// Read the other hosts' queue (it may have changed).
    private var queueDue = false
    /// A `recall` named this host: read the queue, give back, and answer.
    private var recalled = false

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
                shared.finished.signal()
                return
            }
            if link == nil { reconnectIfDue() }
            if let link {
                do throws(DatabaseError) {
                    try serve(link)
                } catch {
                    failed(error, link)
                }
            }
            if link == nil { endWaitsWhileCutOff() }
            runJobs()
            // libpq reads notifications that arrive during a round trip along with its result
            // and keeps them: the socket will not wake the poll for those, so they are read now.
            if let link {
                do throws(DatabaseError) {
                    try readNotifications(link)
                } catch {
                    failed(error, link)
                }
            }
            sleep()
        }
    }

    private func failed(_ error: DatabaseError, _ link: SessionLink) {
        if error.connectionLost || !link.connection.isOpen {
            lose(error)
        } else {
            logger.warning("cluster session: \(error)")
        }
    }

    // MARK: Connected

    private func serve(_ link: SessionLink) throws(DatabaseError) {
        try readNotifications(link)
        let now = ContinuousClock.now
        if now >= nextHeartbeat {
            try link.heartbeat()
            proved(sentAt: now)
            nextHeartbeat = now + configuration.heartbeat
            // A safety net under the wake-ups: queued waiters ask again once a heartbeat.
            if shared.state.withLock({ $0.waiters.values.contains { !$0.tickets.isEmpty } }) { recallAgain = true }
        }
        try withdrawCancelled(link)
        // Asked before deadlines are looked at, so a wait with no time left still gets what is free.
        try askForWaiters(link)
        try endExpiredWaits(link)
        if queueDue || recalled {
            let answer = recalled
            queueDue = false
            recalled = false
            let queued = try link.waiting()
            shared.state.withLock { state in
                state.held.queued = queued
                state.recallDue = true
            }
            // Recalled: answer even when every grant is still in use, so that a nonblocking
            // request learns it at once.
            if try !giveBack(link), answer { try link.answer() }
        } else {
            try giveBack(link)
        }
    }

    /// Takes in the wake-ups received so far.
    private func readNotifications(_ link: SessionLink) throws(DatabaseError) {
        for notification in try link.connection.notifications() where notification.channel == configuration.channel {
            let words = notification.payload.split(separator: " ")
            switch words.first {
            case "changed":
                let sender = words.dropFirst().first.flatMap { Int64($0) }
                // This host's own changes never unblock its own waiters.
                if sender == link.host.id { continue }
                retryDue = true
                shared.state.withLock { state in
                    // Requests this host gives way to may be gone: read the queue again.
                    if !state.held.queued.isEmpty { queueDue = true }
                    guard let sender else { return }
                    for id in state.waiters.keys where state.waiters[id]!.answerBy != nil {
                        state.waiters[id]!.answered.insert(sender)
                    }
                }
            case "recall":
                if words.dropFirst().contains(Substring(String(link.host.id))) { recalled = true }
            default:
                break
            }
        }
    }

    /// The heartbeat came back: the session stood when it was sent (the server recorded it
    /// no earlier, `coordfs_heartbeat`). Other round trips prove nothing the server knows of.
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
        try link.withdraw(tickets)
    }

    private func endExpiredWaits(_ link: SessionLink) throws(DatabaseError) {
        let now = ContinuousClock.now
        let expired = shared.state.withLock { state -> [CoverageWaiter] in
            let ids = state.waiters.filter { $0.value.due <= now }.keys
            return ids.compactMap { state.waiters.removeValue(forKey: $0) }
        }
        guard !expired.isEmpty else { return }
        let tickets = expired.flatMap(\.tickets)
        for waiter in expired {
            waiter.onOutcome(waiter.nonblocking ? .wouldBlock : .timedOut(holders: waiter.holders))
        }
        if !tickets.isEmpty { try link.withdraw(tickets) }
    }

    /// Asks for every waiter not asked yet in this session, and, after a wake-up, for those
    /// queued, in arrival order (ids grow).
    private func askForWaiters(_ link: SessionLink) throws(DatabaseError) {
        let recall = recallAgain
        let retry = retryDue || recall
        retryDue = false
        recallAgain = false
        let ids = shared.state.withLock { state in
            state.waiters.filter { retry || !$0.value.asked }.keys.sorted()
        }
        for id in ids {
            do throws(DatabaseError) {
                if try ask(id, link, recall: recall), !recalled { queueDue = false }  // each answer carries the queue
            } catch {
                guard !error.connectionLost, link.connection.isOpen else { throw error }
                // The database refused the statement itself: asking again would fail again.
                logger.error("cluster: asking for a grant failed: \(error)")
                let waiter = shared.state.withLock { $0.waiters.removeValue(forKey: id) }
                waiter?.onOutcome(.cutOff(reason: "the cluster's database refused the request: \(error)"))
            }
        }
    }

    /// Covers waiter `id` from the grants held, or asks the database; true when it asked.
    private func ask(_ id: UInt64, _ link: SessionLink, recall: Bool) throws(DatabaseError) -> Bool {
        var delivery: (@Sendable (CoverageOutcome) -> Void, CoverageOutcome)?
        let validity = configuration.leaseValidity
        let question = shared.state.withLock { state -> CoverageWaiter? in
            guard let waiter = state.waiters[id] else { return nil }
            // Granted meanwhile to an earlier waiter wide enough for this one too.
            if waiter.tickets.isEmpty, state.leaseHolds(validity: validity), state.held.covers(waiter.requests) {
                state.waiters[id] = nil
                delivery = (waiter.onOutcome, .covered(state.makeUse(waiter.requests)))
                return nil
            }
            return waiter
        }
        if let (onOutcome, outcome) = delivery { onOutcome(outcome) }
        guard let question else { return false }
        let sent = ContinuousClock.now
        shared.grantRoundTrips.add(1, ordering: .relaxed)
        let reply = try link.acquire(question.requests, tickets: question.tickets, nonblocking: question.nonblocking,
                                     recall: recall)
        var orphaned: [Int64] = []
        shared.state.withLock { state in
            state.held.queued = reply.waiting
            state.recallDue = true
            if !reply.granted.isEmpty {
                state.held.grants.formUnion(reply.granted)
                if let waiter = state.waiters.removeValue(forKey: id) {
                    delivery = (waiter.onOutcome, .covered(state.makeUse(waiter.requests)))
                }
            } else if let waiter = state.waiters[id] {
                let tickets = reply.tickets.isEmpty ? waiter.tickets : reply.tickets
                // Nonblocking: fails behind an earlier request (not queued), or once every
                // holder answered the recall and still holds.
                if waiter.nonblocking && (tickets.isEmpty
                                          || (!waiter.tickets.isEmpty && Set(reply.grantHolders).isSubset(of: waiter.answered))) {
                    state.waiters[id] = nil
                    delivery = (waiter.onOutcome, .wouldBlock)
                    orphaned = tickets
                } else {
                    state.waiters[id]!.tickets = tickets
                    state.waiters[id]!.asked = true
                    state.waiters[id]!.holders = reply.holders
                    state.waiters[id]!.grantHolders = Set(reply.grantHolders)
                    if waiter.nonblocking && waiter.answerBy == nil {
                        state.waiters[id]!.answerBy = sent + configuration.heartbeat
                    }
                }
            } else {
                orphaned = reply.tickets  // cancelled during the round trip
            }
        }
        if let (onOutcome, outcome) = delivery { onOutcome(outcome) }
        if !orphaned.isEmpty { try link.withdraw(orphaned) }
        return true
    }

    /// The recall: gives back what other hosts wait for, keeping what local uses stand on;
    /// true when it changed anything.
    @discardableResult
    private func giveBack(_ link: SessionLink) throws(DatabaseError) -> Bool {
        let change = shared.state.withLock { state -> (dropped: [HeldGrant], added: [HeldGrant])? in
            guard state.recallDue else { return nil }
            state.recallDue = false
            return state.held.recall()
        }
        guard let change else { return false }
        logger.debug("cluster: giving back \(change.dropped), keeping \(change.added)")
        let queued: [QueuedRequest]
        do throws(DatabaseError) {
            queued = try link.replace(dropping: change.dropped, adding: change.added)
        } catch {
            // This host no longer knows what the database holds for it: the only way back to
            // agreement is a new session (the old one's grants are reaped with it).
            throw DatabaseError("giving back grants failed: \(error)", sqlState: error.sqlState, connectionLost: true)
        }
        shared.state.withLock { $0.held.queued = queued }
        return true
    }

    // MARK: Lost and found

    /// The session is gone, and every grant with it: uses of the old fence stop holding;
    /// waiters wait for the next session (or their deadline).
    private func lose(_ error: DatabaseError) {
        link = nil
        nextReconnect = .now
        (retryDue, recallAgain, queueDue, recalled) = (false, false, false, false)
        shared.state.withLock { state in
            state.connected = false
            state.fence += 1
            state.held = HostGrants()
            state.problem = "the cluster's database cannot be reached: \(error)"
            state.withdrawals = []
            for id in state.waiters.keys {
                state.waiters[id]!.tickets = []
                state.waiters[id]!.asked = false
                state.waiters[id]!.answerBy = nil
                state.waiters[id]!.answered = []
            }
        }
        logger.warning("cluster session lost (\(error)); reconnecting every second")
    }

    private func reconnectIfDue() {
        let now = ContinuousClock.now
        guard now >= nextReconnect else { return }
        nextReconnect = now + .seconds(1)
        do {
            let made = try SessionLink(configuration: configuration, mountpoint: shared.mountpoint,
                                       succeeding: shared.state.withLock { $0.formerHostIDs + [$0.host.id] })
            link = made
            // The lost session's grants: this host stopped trusting them when it found the
            // session lost (the fence grew), so they go now rather than when their lease runs
            // out, and whoever waits for them is woken (even if the server has not noticed
            // the old connection's end yet: nothing trusts them any more).
            let lost = shared.state.withLock { $0.host.id }
            if lost != made.host.id { _ = try? made.leave(id: lost) }
            _ = try? made.reap()
            nextHeartbeat = .now + configuration.heartbeat
            retryDue = true
            shared.state.withLock { state in
                if state.host.id != made.host.id { state.formerHostIDs.append(state.host.id) }
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
            (state.waiters.values.map(\.due).min(),
             !state.jobs.isEmpty || !state.withdrawals.isEmpty || state.stopping
                || (connected && (state.waiters.values.contains { !$0.asked } || state.recallDue)))
        }
        if busy || (connected && (retryDue || recallAgain || queueDue || recalled)) { return }
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
