import Synchronization
import Testing
@testable import CoordFSCore

/// Other hosts that keep every ask waiting until the test answers it, or cancels it.
private final class DeferringHosts: HostCoverage {
    struct Asked {
        let requests: [ClaimRequest]
        let answer: @Sendable (CoverageOutcome) -> Void
    }
    struct State {
        var asked: [UInt64: Asked] = [:]
        var nextID: UInt64 = 1
        var released: [UInt64] = []
        /// Runs inside `cover`, before it returns: the moment between the table's grant and the ask's ticket.
        var duringAsk: (@Sendable () -> Void)?
    }
    let state = Mutex(State())

    func coverNow(_ requests: [ClaimRequest]) -> CoverageUse? { nil }
    func cover(_ requests: [ClaimRequest], deadline: ContinuousClock.Instant, nonblocking: Bool,
               onOutcome: @escaping @Sendable (CoverageOutcome) -> Void) -> CoverageTicket {
        let (id, during) = state.withLock { state in
            defer { state.nextID += 1 }
            state.asked[state.nextID] = Asked(requests: requests, answer: onOutcome)
            return (state.nextID, state.duringAsk)
        }
        during?()
        return CoverageTicket(id: id)
    }
    func cancel(_ ticket: CoverageTicket) -> Bool {
        state.withLock { $0.asked.removeValue(forKey: ticket.id) != nil }
    }
    func release(_ use: CoverageUse) { state.withLock { $0.released.append(use.id) } }
    func stillHolds(_ use: CoverageUse) -> Bool { true }

    /// Answers the oldest ask: covered.
    func coverOldest() {
        let oldest = state.withLock { state -> (UInt64, Asked)? in
            guard let id = state.asked.keys.min() else { return nil }
            return (id, state.asked.removeValue(forKey: id)!)
        }
        if let (id, asked) = oldest { asked.answer(.covered(CoverageUse(id: id, requests: asked.requests, fence: 1))) }
    }
}

/// Collects a ticket's outcome.
private final class TicketOutcome: Sendable {
    let outcome = Mutex<ClaimTicket.Outcome?>(nil)
    var value: ClaimTicket.Outcome? { outcome.withLock { $0 } }
    func receive(_ outcome: ClaimTicket.Outcome) { self.outcome.withLock { $0 = outcome } }
}

private let first = ClaimOwner.process(201)
private let second = ClaimOwner.process(202)
private let item = [ClaimRequest(MountPath("/item")!, .write)]

/// `ClaimAuthority.acquire`, the one way file operations and explicit claims take claims.
@Suite struct ClaimAcquisitionTests {
    private func later(_ seconds: Double = 30) -> ContinuousClock.Instant { .now + .milliseconds(Int64(seconds * 1000)) }

    private func heldAtOnce(_ authority: ClaimAuthority, _ owner: ClaimOwner) throws -> HeldClaims {
        guard case .held(let held) = authority.acquire(item, owner: owner, deadline: later(), nonblocking: false) else {
            Issue.record("expected the claims at once")
            throw CancellationError()
        }
        return held
    }

    private func waits(_ authority: ClaimAuthority, _ owner: ClaimOwner, deadline: ContinuousClock.Instant? = nil) throws -> ClaimTicket {
        guard case .waiting(let ticket) = authority.acquire(item, owner: owner, deadline: deadline ?? later(), nonblocking: false) else {
            Issue.record("expected a wait")
            throw CancellationError()
        }
        return ticket
    }

    @Test func aFreeClaimIsHeldAtOnceAndANonblockingConflictIsRefusedWithItsHolder() throws {
        let authority = ClaimAuthority(table: ClaimTable(), hosts: nil)
        let held = try heldAtOnce(authority, first)
        guard case .refused(.wouldBlock(let blockers)) = authority.acquire(item, owner: second, deadline: later(), nonblocking: true) else {
            Issue.record("a nonblocking conflict is refused at once")
            return
        }
        #expect(blockers.map(\.owner) == [first])
        #expect(ClaimRefusal.wouldBlock(blockers: blockers).errno == .wouldBlock)
        authority.release(held)
        #expect(authority.table.entryCount == 0)
    }

    @Test func aWaiterGetsTheClaimsWhenTheHolderLetsGo() throws {
        let authority = ClaimAuthority(table: ClaimTable(), hosts: nil)
        let held = try heldAtOnce(authority, first)
        let ticket = try waits(authority, second)
        let box = TicketOutcome()
        ticket.whenDone(box.receive)
        #expect(box.value == nil)
        authority.release(held)
        guard case .success(let granted)? = box.value else { Issue.record("granted on release"); return }
        #expect(granted.grant.owner == second)
        authority.release(granted)
    }

    @Test func anOutcomeThatComesFirstWaitsForItsReceiver() throws {
        let authority = ClaimAuthority(table: ClaimTable(), hosts: nil)
        let held = try heldAtOnce(authority, first)
        let ticket = try waits(authority, second)
        authority.release(held) // granted before anyone listens
        let box = TicketOutcome()
        ticket.whenDone(box.receive)
        guard case .success(let granted)? = box.value else { Issue.record("delivered to the late receiver"); return }
        authority.release(granted)
    }

    @Test func aWaitEndsAtItsDeadlineNamingTheHolder() async throws {
        let authority = ClaimAuthority(table: ClaimTable(), hosts: nil)
        let held = try heldAtOnce(authority, first)
        let ticket = try waits(authority, second, deadline: later(0.05))
        let box = TicketOutcome()
        ticket.whenDone(box.receive)
        for _ in 0..<200 where box.value == nil { try await Task.sleep(for: .milliseconds(10)) }
        guard case .failure(.timedOut(let blockers))? = box.value else { Issue.record("timed out"); return }
        #expect(blockers.map(\.owner) == [first])
        #expect(ClaimRefusal.timedOut(blockers: blockers).errno == .resourceBusy)
        authority.release(held)
    }

    @Test func aQueuedWaitIsTakenBackAtOnce() throws {
        let authority = ClaimAuthority(table: ClaimTable(), hosts: nil)
        let held = try heldAtOnce(authority, first)
        let ticket = try waits(authority, second)
        let box = TicketOutcome()
        ticket.whenDone(box.receive)
        #expect(ticket.cancel())
        #expect(authority.table.waiterCount == 0)
        authority.release(held)
        #expect(box.value == nil, "a withdrawn request never hears an outcome")
        #expect(authority.table.entryCount == 0)
        #expect(!ticket.cancel(), "a second cancel finds nothing to take back")
    }

    @Test func aWaitForOtherHostsHoldsTheLocalGrantAndIsTakenBackWithIt() throws {
        let hosts = DeferringHosts()
        let authority = ClaimAuthority(table: ClaimTable(), hosts: hosts)
        let ticket = try waits(authority, first)
        // The local grant is held while the hosts are asked: a local conflict queues behind it.
        guard case .refused = authority.acquire(item, owner: second, deadline: later(), nonblocking: true) else {
            Issue.record("the local grant stands while the hosts are asked")
            return
        }
        #expect(ticket.cancel())
        #expect(authority.table.entryCount == 0, "taking the ask back releases the local grant")
        #expect(hosts.state.withLock { $0.asked.isEmpty })
    }

    @Test func otherHostsCoverAfterTheTableGranted() throws {
        let hosts = DeferringHosts()
        let authority = ClaimAuthority(table: ClaimTable(), hosts: hosts)
        let ticket = try waits(authority, first)
        let box = TicketOutcome()
        ticket.whenDone(box.receive)
        hosts.coverOldest()
        guard case .success(let held)? = box.value else { Issue.record("covered"); return }
        #expect(held.coverage != nil)
        authority.release(held)
        #expect(hosts.state.withLock { $0.released.count } == 1)
        #expect(authority.table.entryCount == 0)
    }

    /// A cancel between the table's grant and the ask of the hosts cannot take anything back
    /// yet; the next step does, and the ticket finishes `.cancelled` with nothing held.
    @Test func aCancelBetweenStepsFinishesCancelled() throws {
        let hosts = DeferringHosts()
        let authority = ClaimAuthority(table: ClaimTable(), hosts: hosts)
        let local = try #require(try? authority.table.tryAcquire(item, owner: first).get())
        let ticket = try waits(authority, second)
        let box = TicketOutcome()
        ticket.whenDone(box.receive)
        let cancelled = Mutex<Bool?>(nil)
        hosts.state.withLock { $0.duringAsk = { cancelled.withLock { $0 = ticket.cancel() } } }
        authority.table.release(local) // grants `second` here, which then asks the hosts
        #expect(cancelled.withLock { $0 } == false)
        guard case .failure(.cancelled)? = box.value else { Issue.record("finished cancelled, got \(String(describing: box.value))"); return }
        #expect(ClaimRefusal.cancelled.errno == .interrupted)
        #expect(authority.table.entryCount == 0)
        #expect(hosts.state.withLock { $0.asked.isEmpty })
    }
}
