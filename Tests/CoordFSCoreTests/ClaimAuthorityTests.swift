import Synchronization
import Testing
@testable import CoordFSCore

/// Other hosts as a test sets them: covering now or not, answering asks with a set outcome,
/// and recording what comes back.
private final class FakeHosts: HostCoverage {
    struct State {
        var coversNow = true
        var outcome: CoverageOutcome?
        var nextID: UInt64 = 1
        var released: [UInt64] = []
        var lost = false
    }
    let state = Mutex(State())

    private func use(_ requests: [ClaimRequest]) -> CoverageUse {
        state.withLock { state in
            defer { state.nextID += 1 }
            return CoverageUse(id: state.nextID, requests: requests, fence: 1)
        }
    }
    func coverNow(_ requests: [ClaimRequest]) -> CoverageUse? {
        state.withLock { $0.coversNow } ? use(requests) : nil
    }
    func cover(_ requests: [ClaimRequest], deadline: ContinuousClock.Instant, nonblocking: Bool,
               onOutcome: @escaping @Sendable (CoverageOutcome) -> Void) -> CoverageTicket {
        onOutcome(state.withLock { $0.outcome } ?? .covered(use(requests)))
        return CoverageTicket(id: 0)
    }
    func cancel(_ ticket: CoverageTicket) -> Bool { false }
    func release(_ use: CoverageUse) { state.withLock { $0.released.append(use.id) } }
    func stillHolds(_ use: CoverageUse) -> Bool { !state.withLock { $0.lost } }
}

private let writer = ClaimOwner.process(101)
private let file = ClaimRequest(MountPath("/f")!, .write)

@Suite struct ClaimAuthorityTests {
    private func grant(_ table: ClaimTable, _ requests: [ClaimRequest], _ owner: ClaimOwner = writer) throws -> ClaimGrant {
        try table.tryAcquire(requests, owner: owner).get()
    }

    @Test func withoutOtherHostsTheTableAloneDecides() throws {
        let authority = ClaimAuthority(table: ClaimTable(), hosts: nil)
        let held = try #require(authority.heldNow(try grant(authority.table, [file])))
        #expect(held.coverage == nil && authority.stillHolds(held))
        authority.release(held)
        #expect(authority.table.entryCount == 0)
    }

    /// A program's next open of a file it writes comes before the kernel's release of its last
    /// handle: nested in it, asked of no host, and the coverage goes back only with the last.
    @Test func aNestedClaimKeepsItsEnclosingCoverageUntilItGoes() throws {
        let hosts = FakeHosts()
        let authority = ClaimAuthority(table: ClaimTable(), hosts: hosts)
        let outer = try #require(authority.heldNow(try grant(authority.table, [file])))
        hosts.state.withLock { $0.coversNow = false } // another host asks for /f meanwhile
        let inner = try #require(authority.heldNow(try grant(authority.table, [file])))
        #expect(inner.coverage == nil && inner.fence === outer.coverage)
        authority.release(outer)
        #expect(hosts.state.withLock { $0.released }.isEmpty, "given back while the nested claim still writes")
        authority.release(inner)
        authority.release(inner) // a second release does nothing
        #expect(hosts.state.withLock { $0.released } == [outer.coverage!.id])
        #expect(authority.table.entryCount == 0)
    }

    @Test func anotherOwnersClaimIsNotNested() throws {
        let hosts = FakeHosts()
        let authority = ClaimAuthority(table: ClaimTable(), hosts: hosts)
        let reader = try #require(authority.heldNow(try grant(authority.table, [ClaimRequest(MountPath("/f")!, .snapshotRead)])))
        hosts.state.withLock { $0.coversNow = false }
        #expect(authority.heldNow(try grant(authority.table, [file], .process(202))) == nil)
        authority.release(reader)
    }

    @Test func aLostGrantFailsTheFence() throws {
        let hosts = FakeHosts()
        let authority = ClaimAuthority(table: ClaimTable(), hosts: hosts)
        let held = try #require(authority.heldNow(try grant(authority.table, [file])))
        #expect(authority.stillHolds(held))
        hosts.state.withLock { $0.lost = true }
        #expect(!authority.stillHolds(held))
    }

    /// Cut off, a write is refused (ENOLCK) and its local grant released; a snapshot read goes on.
    @Test func cutOffRefusesWritesAndLetsSnapshotReadsGo() throws {
        let hosts = FakeHosts()
        hosts.state.withLock { $0.coversNow = false; $0.outcome = .cutOff(reason: "no database") }
        let authority = ClaimAuthority(table: ClaimTable(), hosts: hosts)
        let result = Mutex<Result<HeldClaims, CoverageRefusal>?>(nil)
        _ = authority.cover(try grant(authority.table, [file]), deadline: .now, nonblocking: false) { outcome in
            result.withLock { $0 = outcome }
        }
        guard case .failure(let refusal)? = result.withLock({ $0 }) else { Issue.record("covered while cut off"); return }
        #expect(refusal.errno == .noLocks)
        #expect(authority.table.entryCount == 0)

        _ = authority.cover(try grant(authority.table, [ClaimRequest(MountPath("/f")!, .snapshotRead)]), deadline: .now,
                            nonblocking: false) { outcome in result.withLock { $0 = outcome } }
        guard case .success(let held)? = result.withLock({ $0 }) else { Issue.record("a snapshot read refused while cut off"); return }
        authority.release(held)
    }
}
