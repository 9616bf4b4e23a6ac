/// A waiter's callback and the outcome to give it, collected under the lock and run after it
/// (with when it started waiting, for the wait-time metric).
typealias ClaimWakeup = (callback: @Sendable (ClaimWaitOutcome) -> Void, outcome: ClaimWaitOutcome, waitedSince: ContinuousClock.Instant)

/// Who asks: the owner the claims will belong to, and the lineage that decides which explicit
/// claims it passes through.
struct Requester {
    let owner: ClaimOwner
    let lineage: ProcessLineage
    /// Nil: never breaks another's claim, and its own are never broken.
    var user: UInt32? = nil
}

/// The claim table's state and rules, with no locking and no threads: `ClaimTable` owns one
/// behind its mutex, calls in with the lock held, and runs the wakeups it gets back after unlocking.
struct ClaimState {
    var trie = PathTrie()
    /// Queued requests by ticket.
    var waiters: [UInt64: Waiter] = [:]
    /// Queued requests by owner, in arrival order: a grant to an owner can free its other waiters.
    var waitersByOwner: [ClaimOwner: [Waiter]] = [:]
    var deadlines = DeadlineHeap()
    /// How long a waiter waits for claims of other users before it breaks them; nil: never.
    var breakAfter: Duration?
    var nextTicket: UInt64 = 1
    var nextGrant: UInt64 = 1
    /// Holds and waits of explicit (client) claims: while there are none, nobody can pass
    /// through anything, and requesters need no lineage.
    var explicitEntries = 0

    // MARK: The conflict rule

    /// Whether a claim `held` by `holder` stands in the way of `requester` asking for `wanted`
    /// on an overlapping path. The owner test comes first: it is the cheap one.
    @inline(__always)
    static func conflicts(_ holder: ClaimOwner, _ held: ClaimMode, _ requester: Requester, _ wanted: ClaimMode) -> Bool {
        holder != requester.owner && !held.isCompatible(with: wanted) && !requester.lineage.passesThrough(holder)
    }

    /// Whether some granted claim conflicts with one of `requests`.
    func isHeldAgainst(_ requests: [ClaimRequest], by owner: Requester) -> Bool {
        for request in requests {
            let blocked = trie.anyOverlapping(request.path, .holds) { entry in
                entry.holds.contains { Self.conflicts($0.owner, $0.mode, owner, request.mode) }
            }
            if blocked { return true }
        }
        return false
    }

    /// Whether a waiter that arrived before `ticket`, and of which `counts` is true, conflicts
    /// with one of `requests`.
    func isQueuedAgainst(_ requests: [ClaimRequest], by owner: Requester, before ticket: UInt64,
                         where counts: (Waiter) -> Bool = { _ in true }) -> Bool {
        for request in requests {
            let blocked = trie.anyOverlapping(request.path, .waits) { entry in
                entry.waits.contains {
                    $0.waiter.ticket < ticket && Self.conflicts($0.waiter.owner, $0.mode, owner, request.mode) && counts($0.waiter)
                }
            }
            if blocked { return true }
        }
        return false
    }

    /// Whether `owner` already holds, or passes through, a granted claim overlapping one of
    /// `requests`. Such an owner may be inside a protocol that others queue behind (a second
    /// open of a file it writes, a program run under an explicit claim): making it queue behind
    /// them would make it wait for itself.
    func isAlreadyInside(_ requests: [ClaimRequest], owner: Requester) -> Bool {
        for request in requests {
            let inside = trie.anyOverlapping(request.path, .holds) { entry in
                entry.holds.contains { $0.owner == owner.owner || owner.lineage.passesThrough($0.owner) }
            }
            if inside { return true }
        }
        return false
    }

    /// Whether `waiter` cannot go before `owner` lets go of something: a granted claim of
    /// `owner` (or one `owner` passes through, whose holder waits for `owner` to finish) blocks
    /// it, or an earlier waiter it queues behind is in that position. Queueing `owner` behind
    /// such a waiter would close a cycle that only a timeout could break.
    ///
    /// `answers` remembers each waiter's answer within one admission check: it cannot change
    /// while the lock is held, and the same waiter is often reached along several paths. The
    /// queue edges only point to earlier waiters, so the search has no cycles. A waiter's own
    /// right to skip waiters that wait for its owner is not modelled: at worst that counts a
    /// waiter as waiting for `owner` when it does not (the requester then goes a little early).
    func waits(_ waiter: Waiter, for owner: Requester, answers: inout [UInt64: Bool]) -> Bool {
        if let known = answers[waiter.ticket] { return known }
        let answer = computeWaits(waiter, for: owner, answers: &answers)
        answers[waiter.ticket] = answer
        return answer
    }

    private func computeWaits(_ waiter: Waiter, for owner: Requester, answers: inout [UInt64: Bool]) -> Bool {
        for request in waiter.requests {
            let held = trie.anyOverlapping(request.path, .holds) { entry in
                entry.holds.contains {
                    Self.conflicts($0.owner, $0.mode, waiter.requester, request.mode)
                        && ($0.owner == owner.owner || owner.lineage.passesThrough($0.owner))
                }
            }
            if held { return true }
        }
        if isAlreadyInside(waiter.requests, owner: waiter.requester) { return false }
        return isQueuedAgainst(waiter.requests, by: waiter.requester, before: waiter.ticket) { earlier in
            waits(earlier, for: owner, answers: &answers) // an earlier waiter that waits for `owner`
        }
    }

    /// The admission rule: a request goes when no granted claim conflicts with it and no
    /// earlier waiter does. Two exceptions keep an owner from waiting for itself: an owner
    /// already inside an overlapping claim is checked against granted claims only, and a
    /// waiter that itself waits for the requester does not count. `ticket` is the request's
    /// own (`.max` for a new one).
    func isBlocked(_ requests: [ClaimRequest], owner: Requester, ticket: UInt64) -> Bool {
        if isHeldAgainst(requests, by: owner) { return true }
        let othersQueued = waiters.count > (ticket == .max ? 0 : 1)
        guard othersQueued, isQueuedAgainst(requests, by: owner, before: ticket) else { return false }
        if isAlreadyInside(requests, owner: owner) { return false }
        var answers: [UInt64: Bool] = [:]
        return isQueuedAgainst(requests, by: owner, before: ticket) { waiter in
            !waits(waiter, for: owner, answers: &answers) // waiters that wait for `owner` do not count
        }
    }

    /// The granted claims that conflict with `requests`; when there are none (the request only
    /// queues behind earlier waiters), the granted claims those waiters wait for. For messages.
    func blockers(of requests: [ClaimRequest], owner: Requester, ticket: UInt64) -> [ClaimHolder] {
        var found: [Hold] = []
        collectConflictingHolds(requests, owner, into: &found)
        if found.isEmpty {
            for request in requests {
                _ = trie.anyOverlapping(request.path, .waits) { entry in
                    for wait in entry.waits
                    where wait.waiter.ticket < ticket && Self.conflicts(wait.waiter.owner, wait.mode, owner, request.mode) {
                        collectConflictingHolds(wait.waiter.requests, wait.waiter.requester, into: &found)
                    }
                    return false
                }
            }
        }
        return found.map(\.holder)
    }

    private func collectConflictingHolds(_ requests: [ClaimRequest], _ owner: Requester, into found: inout [Hold]) {
        for request in requests {
            _ = trie.anyOverlapping(request.path, .holds) { entry in
                for hold in entry.holds where Self.conflicts(hold.owner, hold.mode, owner, request.mode) {
                    if !found.contains(where: { $0.grant == hold.grant && $0.path == hold.path }) {
                        found.append(hold)
                    }
                }
                return false
            }
        }
    }

    // MARK: Changes

    /// Records every path of the request as held, all at once.
    mutating func grant(_ requests: [ClaimRequest], owner: ClaimOwner, user: UInt32?) -> ClaimGrant {
        let id = nextGrant
        nextGrant += 1
        let now = ContinuousClock.now
        for request in requests {
            let entry = trie.entryForAdding(request.path, .holds)
            entry.holds.append(Hold(grant: id, mode: request.mode, owner: owner, user: user, path: request.path, since: now))
        }
        if case .client = owner { explicitEntries += requests.count }
        return ClaimGrant(id: id, owner: owner, requests: requests)
    }

    /// Drops one hold of `grant` on `path`; false when there is none (already released).
    mutating func removeHold(_ grant: UInt64, at path: MountPath) -> Bool {
        guard let entry = trie.existingEntry(path),
              let index = entry.holds.firstIndex(where: { $0.grant == grant }) else { return false }
        if case .client = entry.holds[index].owner { explicitEntries -= 1 }
        entry.holds.swapAt(index, entry.holds.count - 1)
        entry.holds.removeLast()
        trie.itemRemoved(from: entry, .holds)
        return true
    }

    /// Queues a request: one wait per path in the trie, plus the waiter map and the deadline heap.
    mutating func enqueue(_ requests: [ClaimRequest], owner: Requester, deadline: ContinuousClock.Instant,
                          onOutcome: @escaping @Sendable (ClaimWaitOutcome) -> Void) -> Waiter {
        let waiter = Waiter(ticket: nextTicket, requester: owner, requests: requests, since: .now,
                            deadline: deadline, onOutcome: onOutcome)
        if owner.user != nil, let breakAfter, waiter.since + breakAfter < deadline {
            waiter.checkAt = waiter.since + breakAfter
        }
        nextTicket += 1
        if case .client = owner.owner { explicitEntries += 1 }
        for request in requests {
            trie.entryForAdding(request.path, .waits).waits.append(Wait(waiter: waiter, mode: request.mode))
        }
        waiters[waiter.ticket] = waiter
        waitersByOwner[owner.owner, default: []].append(waiter)
        deadlines.insert(waiter)
        return waiter
    }

    /// Takes a waiter out of the queue (granted, timed out or cancelled).
    mutating func dequeue(_ waiter: Waiter) {
        waiter.isWaiting = false
        waiters[waiter.ticket] = nil
        if case .client = waiter.owner { explicitEntries -= 1 }
        if var sameOwner = waitersByOwner.removeValue(forKey: waiter.owner) {
            sameOwner.removeAll { $0 === waiter }
            if !sameOwner.isEmpty { waitersByOwner[waiter.owner] = sameOwner }
        }
        deadlines.remove(waiter)
        for request in waiter.requests {
            guard let entry = trie.existingEntry(request.path),
                  let index = entry.waits.firstIndex(where: { $0.waiter === waiter }) else { continue }
            entry.waits.remove(at: index)
            trie.itemRemoved(from: entry, .waits)
        }
    }

    // MARK: Waking waiters

    /// Grants, in arrival order, every waiter that the changes at `paths` may have freed and
    /// that the admission rule now lets go. Only some waiters can have changed their answer:
    /// those overlapping a changed path, and, after a grant to `grantee`, the grantee's own
    /// waiters (now inside a claim, or waited for by those ahead of them) — all of them when the
    /// grantee is a client, whose claim the processes of its tree pass through. A waiter granted
    /// here changes its own paths in turn, so the search spreads from there instead of scanning
    /// the whole queue.
    mutating func wake(overlapping paths: some Sequence<MountPath>, grantee: ClaimOwner? = nil,
                       into wakeups: inout [ClaimWakeup]) {
        guard !waiters.isEmpty else { return }
        // Kept sorted by ticket, latest first, so popLast yields the earliest.
        var candidates: [Waiter] = []
        for path in paths { addCandidates(overlapping: path, to: &candidates) }
        if let grantee { addCandidates(affectedByGrantTo: grantee, to: &candidates) }
        while let waiter = candidates.popLast() {
            waiter.isCandidate = false
            guard waiter.isWaiting, !isBlocked(waiter.requests, owner: waiter.requester, ticket: waiter.ticket) else { continue }
            dequeue(waiter)
            let grant = grant(waiter.requests, owner: waiter.owner, user: waiter.requester.user)
            wakeups.append((waiter.onOutcome, .granted(grant), waiter.since))
            for request in waiter.requests { addCandidates(overlapping: request.path, to: &candidates) }
            addCandidates(affectedByGrantTo: waiter.owner, to: &candidates)
        }
    }

    private func addCandidates(overlapping path: MountPath, to candidates: inout [Waiter]) {
        _ = trie.anyOverlapping(path, .waits) { entry in
            for wait in entry.waits { Self.add(wait.waiter, to: &candidates) }
            return false
        }
    }

    private func addCandidates(affectedByGrantTo owner: ClaimOwner, to candidates: inout [Waiter]) {
        if case .client = owner {
            for waiter in waiters.values { Self.add(waiter, to: &candidates) }
        } else if let sameOwner = waitersByOwner[owner] {
            for waiter in sameOwner { Self.add(waiter, to: &candidates) }
        }
    }

    private static func add(_ waiter: Waiter, to candidates: inout [Waiter]) {
        guard !waiter.isCandidate else { return }
        waiter.isCandidate = true
        // Binary search for the first position whose ticket is smaller (latest first).
        var low = 0
        var high = candidates.count
        while low < high {
            let middle = (low + high) / 2
            if candidates[middle].ticket > waiter.ticket { low = middle + 1 } else { high = middle }
        }
        candidates.insert(waiter, at: low)
    }

    /// Looks at every waiter due by `now`. One that has waited the break time first breaks the
    /// claims of other users in its way, and what that frees is granted; one still waiting at
    /// its deadline times out. Then wakes those the timed-out ones were holding up.
    mutating func expire(now: ContinuousClock.Instant, into wakeups: inout [ClaimWakeup], breaks: inout [ClaimBreak]) {
        var freed: [MountPath] = []
        while let waiter = deadlines.first, waiter.checkAt <= now {
            if let breakAfter, waiter.requester.user != nil, now - waiter.since >= breakAfter {
                let broken = breakClaims(holdingBack: waiter, now: now)
                if !broken.isEmpty {
                    breaks.append(contentsOf: broken)
                    wake(overlapping: broken.lazy.flatMap { $0.holds.lazy.map(\.path) }, into: &wakeups)
                }
            }
            guard waiter.isWaiting else { continue } // granted by the break
            if waiter.checkAt < waiter.deadline {
                deadlines.remove(waiter)
                waiter.checkAt = waiter.deadline
                deadlines.insert(waiter)
                continue
            }
            let blockers = blockers(of: waiter.requests, owner: waiter.requester, ticket: waiter.ticket)
            dequeue(waiter)
            wakeups.append((waiter.onOutcome, .timedOut(blockers: blockers), waiter.since))
            freed.append(contentsOf: waiter.requests.lazy.map(\.path))
        }
        wake(overlapping: freed, into: &wakeups)
    }

    /// Takes away every grant of another user (one the table knows the user of) with a hold
    /// that conflicts with `waiter`: all of the grant's paths go, not only those in the way.
    private mutating func breakClaims(holdingBack waiter: Waiter, now: ContinuousClock.Instant) -> [ClaimBreak] {
        guard let waiterUser = waiter.requester.user else { return [] }
        var inTheWay: [Hold] = []
        collectConflictingHolds(waiter.requests, waiter.requester, into: &inTheWay)
        var grants: [UInt64: (owner: ClaimOwner, user: UInt32)] = [:]
        for hold in inTheWay {
            guard let user = hold.user, user != waiterUser else { continue }
            grants[hold.grant] = (hold.owner, user)
        }
        guard !grants.isEmpty else { return [] }
        var holds: [UInt64: [Hold]] = [:]
        trie.forEachEntry { entry in
            for hold in entry.holds where grants[hold.grant] != nil { holds[hold.grant, default: []].append(hold) }
        }
        return grants.keys.sorted().map { grant in
            let taken = holds[grant] ?? []
            for hold in taken { _ = removeHold(grant, at: hold.path) }
            let (owner, user) = grants[grant]!
            return ClaimBreak(grant: grant, holds: taken.map(\.holder).sorted { $0.path < $1.path }, owner: owner, user: user,
                              brokenBy: waiter.owner, brokenByUser: waiterUser, waited: now - waiter.since, at: now)
        }
    }
}
