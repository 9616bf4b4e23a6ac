// STAND-IN — delete at merge. A small claim table with the names and shapes of the real one
// (CoordFSCore/Claims, built on another branch), so the control server can be tested and the
// adapter in ClaimTable+ClaimService.swift compiles against the same API the real table has.
// It keeps the compatibility table, hierarchy, FIFO waiting and deadlines; it does not know
// process trees (the control socket's own tests do not need them).
import CoordFSCore
import Dispatch
import Synchronization

public enum ClaimMode: Hashable, Sendable {
    case snapshotRead, read, write, exclusive

    func isCompatible(with other: ClaimMode) -> Bool {
        switch (self, other) {
        case (.exclusive, _), (_, .exclusive): return false
        case (.snapshotRead, _), (_, .snapshotRead): return true
        case (.read, .read): return true
        default: return false
        }
    }
}

public enum ClaimOwner: Hashable, Sendable {
    case process(Int32)
    case client(UInt64, processTree: Int32)
}

public struct ClaimRequest: Hashable, Sendable {
    public var path: MountPath
    public var mode: ClaimMode

    public init(path: MountPath, mode: ClaimMode) {
        self.path = path
        self.mode = mode
    }
}

public final class ClaimGrant: Sendable {
    let id: UInt64
    let requests: [ClaimRequest]
    let owner: ClaimOwner

    init(id: UInt64, requests: [ClaimRequest], owner: ClaimOwner) {
        self.id = id
        self.requests = requests
        self.owner = owner
    }
}

public struct ClaimWaitTicket: Hashable, Sendable {
    let id: UInt64
}

public enum ClaimAttempt: Sendable {
    case granted(ClaimGrant)
    case waiting(ClaimWaitTicket)
}

public struct ClaimHolder: Hashable, Sendable {
    public var path: MountPath
    public var mode: ClaimMode
    public var owner: ClaimOwner
    public var since: ContinuousClock.Instant
}

public enum ClaimWaitOutcome: Sendable {
    case granted(ClaimGrant)
    case timedOut(blockers: [ClaimHolder])
}

public struct ClaimConflict: Error, Sendable {
    public var blockers: [ClaimHolder]
}

public struct ClaimWaiter: Hashable, Sendable {
    public var requests: [ClaimRequest]
    public var owner: ClaimOwner
    public var since: ContinuousClock.Instant
}

public struct ClaimTableSnapshot: Sendable {
    public var holders: [ClaimHolder]
    public var waiters: [ClaimWaiter]
}

public final class ClaimTable: Sendable {
    private struct Held {
        let grant: ClaimGrant
        let since: ContinuousClock.Instant
    }

    private struct Waiter {
        let ticket: ClaimWaitTicket
        let requests: [ClaimRequest]
        let owner: ClaimOwner
        let since: ContinuousClock.Instant
        let onOutcome: @Sendable (ClaimWaitOutcome) -> Void
    }

    private struct State {
        var held: [Held] = []
        var waiters: [Waiter] = []
        var nextID: UInt64 = 1
    }

    /// Guards holders, waiters and the id counter.
    private let state = Mutex(State())

    public init() {}

    private static func blockers(of requests: [ClaimRequest], owner: ClaimOwner, in held: [Held]) -> [ClaimHolder] {
        var blockers: [ClaimHolder] = []
        for entry in held where entry.grant.owner != owner {
            for theirs in entry.grant.requests {
                for mine in requests where (mine.path.isWithin(theirs.path) || theirs.path.isWithin(mine.path))
                    && !mine.mode.isCompatible(with: theirs.mode) {
                    blockers.append(ClaimHolder(path: theirs.path, mode: theirs.mode, owner: entry.grant.owner, since: entry.since))
                }
            }
        }
        return blockers
    }

    private static func conflict(_ a: [ClaimRequest], _ b: [ClaimRequest]) -> Bool {
        a.contains { mine in b.contains { theirs in (mine.path.isWithin(theirs.path) || theirs.path.isWithin(mine.path)) && !mine.mode.isCompatible(with: theirs.mode) } }
    }

    private static func grant(_ requests: [ClaimRequest], _ owner: ClaimOwner, _ state: inout State) -> ClaimGrant {
        let grant = ClaimGrant(id: state.nextID, requests: requests, owner: owner)
        state.nextID += 1
        state.held.append(Held(grant: grant, since: .now))
        return grant
    }

    public func acquire(_ requests: [ClaimRequest], owner: ClaimOwner, deadline: ContinuousClock.Instant,
                        onOutcome: @escaping @Sendable (ClaimWaitOutcome) -> Void) -> ClaimAttempt {
        let attempt: ClaimAttempt = state.withLock { state in
            let queuedAhead = state.waiters.contains { $0.owner != owner && Self.conflict($0.requests, requests) }
            if !queuedAhead && Self.blockers(of: requests, owner: owner, in: state.held).isEmpty {
                return .granted(Self.grant(requests, owner, &state))
            }
            let ticket = ClaimWaitTicket(id: state.nextID)
            state.nextID += 1
            state.waiters.append(Waiter(ticket: ticket, requests: requests, owner: owner, since: .now, onOutcome: onOutcome))
            return .waiting(ticket)
        }
        if case .waiting(let ticket) = attempt {
            let delay = max(.zero, deadline - .now)
            DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(delay.components.seconds * 1_000_000_000 + delay.components.attoseconds / 1_000_000_000))) {
                self.expire(ticket)
            }
        }
        return attempt
    }

    private func expire(_ ticket: ClaimWaitTicket) {
        let expired: (Waiter, [ClaimHolder])? = state.withLock { state in
            guard let index = state.waiters.firstIndex(where: { $0.ticket == ticket }) else { return nil }
            let waiter = state.waiters.remove(at: index)
            return (waiter, Self.blockers(of: waiter.requests, owner: waiter.owner, in: state.held))
        }
        if let (waiter, blockers) = expired {
            waiter.onOutcome(.timedOut(blockers: blockers))
        }
        wake()
    }

    public func tryAcquire(_ requests: [ClaimRequest], owner: ClaimOwner) -> Result<ClaimGrant, ClaimConflict> {
        state.withLock { state in
            let blockers = Self.blockers(of: requests, owner: owner, in: state.held)
            guard blockers.isEmpty else { return .failure(ClaimConflict(blockers: blockers)) }
            return .success(Self.grant(requests, owner, &state))
        }
    }

    public func cancel(_ ticket: ClaimWaitTicket) -> Bool {
        let found = state.withLock { state in
            guard let index = state.waiters.firstIndex(where: { $0.ticket == ticket }) else { return false }
            state.waiters.remove(at: index)
            return true
        }
        if found { wake() }
        return found
    }

    public func release(_ grant: ClaimGrant) {
        state.withLock { $0.held.removeAll { $0.grant === grant } }
        wake()
    }

    @discardableResult
    public func releaseAll(of owner: ClaimOwner) -> [ClaimWaitTicket] {
        let tickets = state.withLock { state in
            state.held.removeAll { $0.grant.owner == owner }
            let mine = state.waiters.filter { $0.owner == owner }.map(\.ticket)
            state.waiters.removeAll { $0.owner == owner }
            return mine
        }
        wake()
        return tickets
    }

    /// Grants waiters in arrival order while they fit; outcomes are called outside the lock.
    private func wake() {
        let granted: [(Waiter, ClaimGrant)] = state.withLock { state in
            var granted: [(Waiter, ClaimGrant)] = []
            var ahead: [Waiter] = []
            for waiter in state.waiters {
                let blockedByEarlier = ahead.contains { $0.owner != waiter.owner && Self.conflict($0.requests, waiter.requests) }
                if !blockedByEarlier && Self.blockers(of: waiter.requests, owner: waiter.owner, in: state.held).isEmpty {
                    granted.append((waiter, Self.grant(waiter.requests, waiter.owner, &state)))
                } else {
                    ahead.append(waiter)
                }
            }
            state.waiters = ahead
            return granted
        }
        for (waiter, grant) in granted {
            waiter.onOutcome(.granted(grant))
        }
    }

    public func snapshot() -> ClaimTableSnapshot {
        state.withLock { state in
            ClaimTableSnapshot(
                holders: state.held.flatMap { entry in
                    entry.grant.requests.map { ClaimHolder(path: $0.path, mode: $0.mode, owner: entry.grant.owner, since: entry.since) }
                },
                waiters: state.waiters.map { ClaimWaiter(requests: $0.requests, owner: $0.owner, since: $0.since) })
        }
    }
}
