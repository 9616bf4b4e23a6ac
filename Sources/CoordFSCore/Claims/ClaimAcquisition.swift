import Synchronization
import SystemPackage

/// Why an acquisition ended without its claims. Nothing is held after any of these.
public enum ClaimRefusal: Error, Sendable, CustomStringConvertible {
    /// Conflicting claims are held here, and the request was not to wait.
    case wouldBlock(blockers: [ClaimHolder])
    /// Conflicting claims here were still held at the deadline.
    case timedOut(blockers: [ClaimHolder])
    /// This host granted, the other hosts did not cover (`--cluster`).
    case hosts(CoverageRefusal)
    /// Taken back (`ClaimTicket.cancel`) at a step where it could not be taken back at once.
    case cancelled

    /// The errno a file operation fails with (Docs/LOCKING.md).
    public var errno: Errno {
        switch self {
        case .wouldBlock: .wouldBlock
        case .timedOut: .resourceBusy
        case .hosts(let refusal): refusal.errno
        case .cancelled: .interrupted
        }
    }

    public var description: String {
        switch self {
        case .wouldBlock(let blockers): "held by \(blockers.map(\.description)) (not waiting)"
        case .timedOut(let blockers): "still held at the deadline by \(blockers.map(\.description))"
        case .hosts(let refusal): refusal.description
        case .cancelled: "cancelled"
        }
    }
}

/// What `ClaimAuthority.acquire` did at once.
public enum ClaimAcquisition: Sendable {
    /// Held now: nothing waited.
    case held(HeldClaims)
    /// Refused now: a request not to wait met a conflict here.
    case refused(ClaimRefusal)
    /// The request waits, here or for other hosts: its outcome comes through the ticket.
    case waiting(ClaimTicket)
}

extension ClaimAuthority {
    /// The one way claims are taken, by file operations and explicit claims alike: this host's
    /// table decides between local owners (queueing fairly behind conflicts), then, with other
    /// hosts, they cover what the table granted (the local grant held meanwhile). Answers at
    /// once when nothing has to wait, which is the common case and allocates nothing; else
    /// the outcome arrives through the returned ticket, by the deadline at the latest.
    /// `nonblocking`: a conflict, here or on another host, refuses instead of waiting.
    /// `lineage`: the requesting process's (explicit claims it passes through), read before
    /// asking, never under the table's lock. `user`: the owner's, for the break rule (a
    /// claim that keeps another user waiting for the break time is broken; nil: neither).
    public func acquire(_ requests: [ClaimRequest], owner: ClaimOwner, user: UInt32? = nil, lineage: ProcessLineage = .none,
                        deadline: ContinuousClock.Instant, nonblocking: Bool) -> ClaimAcquisition {
        switch table.tryAcquire(requests, owner: owner, user: user, lineage: lineage) {
        case .success(let grant):
            if let held = heldNow(grant, lineage: lineage) { return .held(held) }
            let ticket = ClaimTicket(authority: self, stage: .askingHosts(nil))
            askHosts(grant, lineage: lineage, deadline: deadline, nonblocking: nonblocking, ticket)
            return .waiting(ticket)
        case .failure(let conflict) where nonblocking:
            Instruments.claimWouldBlock()
            return .refused(.wouldBlock(blockers: conflict.blockers))
        case .failure:
            break
        }
        let ticket = ClaimTicket(authority: self, stage: .queuedHere(nil))
        let attempt = table.acquire(requests, owner: owner, user: user, lineage: lineage, deadline: deadline) { [self] outcome in
            switch outcome {
            case .granted(let grant):
                guard ticket.leaveQueue() else {
                    table.release(grant)
                    return ticket.finish(.failure(.cancelled))
                }
                if let held = heldNow(grant, lineage: lineage) { return ticket.finish(.success(held)) }
                askHosts(grant, lineage: lineage, deadline: deadline, nonblocking: false, ticket)
            case .timedOut(let blockers):
                ticket.finish(.failure(.timedOut(blockers: blockers)))
            }
        }
        switch attempt {
        case .granted(let grant):
            // Freed between the two looks.
            if let held = heldNow(grant, lineage: lineage) { return .held(held) }
            _ = ticket.leaveQueue()
            askHosts(grant, lineage: lineage, deadline: deadline, nonblocking: nonblocking, ticket)
        case .waiting(let queued):
            ticket.queued(queued)
        }
        return .waiting(ticket)
    }

    /// The second step for a grant the table gave: the other hosts are asked, and the ticket
    /// finishes with their answer.
    private func askHosts(_ grant: ClaimGrant, lineage: ProcessLineage, deadline: ContinuousClock.Instant, nonblocking: Bool,
                          _ ticket: ClaimTicket) {
        let asked = cover(grant, deadline: deadline, nonblocking: nonblocking) { result in
            if case .failure(.wouldBlock) = result { Instruments.claimWouldBlock() }
            ticket.finish(result.mapError(ClaimRefusal.hosts))
        }
        if ticket.askedHosts(asked), cancel(asked) { ticket.finish(.failure(.cancelled)) }
    }
}

/// A claim acquisition that waits: first in this host's queue, then (with other hosts) for
/// their coverage. It finishes exactly once, with the held claims or a refusal, delivered to
/// the receiver given to `whenDone`; an outcome that comes first waits for the receiver, so
/// a caller can get ready (a FUSE request registers for interrupts) before anything reaches it.
///
/// Sendable: its state is behind a mutex that is a leaf: no call goes out while it is held.
public final class ClaimTicket: Sendable {
    public typealias Outcome = Result<HeldClaims, ClaimRefusal>

    enum Stage {
        /// In this host's queue (the table's ticket, once `acquire` has it).
        case queuedHere(ClaimWaitTicket?)
        /// Granted here, asked of the other hosts (their wait, once `cover` returned it).
        case askingHosts(CoverageWait?)
        case finished
    }

    private struct State {
        var stage: Stage
        /// `cancel` was asked at a step it could not take back at once: the next step does.
        var cancelRequested = false
        var outcome: Outcome?
        var receiver: (@Sendable (Outcome) -> Void)?
    }

    private let authority: ClaimAuthority
    private let state: Mutex<State>

    init(authority: ClaimAuthority, stage: Stage) {
        self.authority = authority
        self.state = Mutex(State(stage: stage))
    }

    /// Delivers the outcome to `receiver`, once: later on another thread, or now on this one
    /// when it has come already. A cancelled ticket may never call it.
    public func whenDone(_ receiver: @escaping @Sendable (Outcome) -> Void) {
        let ready = state.withLock { state -> Outcome? in
            if let outcome = state.outcome {
                state.outcome = nil
                return outcome
            }
            state.receiver = receiver
            return nil
        }
        if let ready { receiver(ready) }
    }

    /// Takes the request back. True when it was waiting and is withdrawn now: nothing is
    /// held and the receiver is never called. False when the outcome is on its way (granted,
    /// refused), or when the request is between steps: then it finishes `.cancelled` at the
    /// next one, unless it was held first.
    public func cancel() -> Bool {
        let stage = state.withLock { state -> Stage in
            state.cancelRequested = true
            return state.stage
        }
        let withdrawn = switch stage {
        case .queuedHere(let queued?): authority.table.cancel(queued)
        case .askingHosts(let asked?): authority.cancel(asked)
        case .queuedHere(nil), .askingHosts(nil), .finished: false
        }
        if withdrawn { state.withLock { $0.stage = .finished } }
        return withdrawn
    }

    // MARK: Steps (ClaimAuthority.acquire)

    /// The table queued the request. (Its outcome may have come already, and then this is too late to matter.)
    func queued(_ queued: ClaimWaitTicket) {
        state.withLock { state in
            if case .queuedHere(nil) = state.stage { state.stage = .queuedHere(queued) }
        }
    }

    /// The table granted; false when a cancel came meanwhile (the caller gives the grant back).
    func leaveQueue() -> Bool {
        state.withLock { state in
            if state.cancelRequested { return false }
            state.stage = .askingHosts(nil)
            return true
        }
    }

    /// The hosts were asked; true when a cancel came meanwhile, for the caller to take it back.
    func askedHosts(_ asked: CoverageWait) -> Bool {
        state.withLock { state in
            guard case .askingHosts(nil) = state.stage else { return false } // answered already
            state.stage = .askingHosts(asked)
            return state.cancelRequested
        }
    }

    func finish(_ outcome: Outcome) {
        let receiver = state.withLock { state -> (@Sendable (Outcome) -> Void)? in
            state.stage = .finished
            guard let receiver = state.receiver else {
                state.outcome = outcome
                return nil
            }
            state.receiver = nil
            return receiver
        }
        receiver?(outcome)
    }
}
