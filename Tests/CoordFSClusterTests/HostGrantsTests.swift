@testable import CoordFSCluster
import CoordFSCore
import Testing

/// The recall's arithmetic, without a database: what a host gives back and what it keeps.
struct HostGrantsTests {
    func path(_ text: String) -> MountPath { MountPath(text)! }

    func queued(_ text: String, _ mode: ClaimMode) -> QueuedRequest {
        QueuedRequest(ticket: 1, host: 2, path: path(text), mode: mode)
    }

    @Test func coverageNeedsAGrantAboveInAStrongerModeAndNoConflictingWaiter() {
        var held = HostGrants()
        held.grants = [HeldGrant(path("/a"), .write)]
        #expect(held.covers([ClaimRequest(path("/a/b"), .read)]))
        #expect(held.covers([ClaimRequest(path("/a"), .write)]))
        #expect(!held.covers([ClaimRequest(path("/a"), .exclusive)]))
        #expect(!held.covers([ClaimRequest(path("/ab"), .read)]))
        #expect(!held.covers([ClaimRequest(path("/"), .snapshotRead)]))
        held.queued = [queued("/a/c", .read)]
        #expect(!held.covers([ClaimRequest(path("/a/c/d"), .write)]), "another host waits there first")
        #expect(held.covers([ClaimRequest(path("/a/b"), .write)]))
        #expect(held.covers([ClaimRequest(path("/a/c"), .snapshotRead)]), "snapshot-read never waits for read")
    }

    @Test func aRecallKeepsWhatUsesStandOnAndGivesBackTheRest() {
        var held = HostGrants()
        held.grants = [HeldGrant(.root, .write), HeldGrant(path("/z"), .read)]
        held.uses = [1: [ClaimRequest(path("/a/x"), .write)], 2: [ClaimRequest(path("/a/y"), .snapshotRead)]]
        #expect(held.recall() == nil, "nobody waits")
        held.queued = [queued("/b", .write)]
        let change = held.recall()
        let dropped: [HeldGrant] = change?.dropped ?? []
        let added: Set<HeldGrant> = Set(change?.added ?? [])
        let keptX = HeldGrant(path("/a/x"), .write)
        let keptY = HeldGrant(path("/a/y"), .snapshotRead)
        let unrelated = HeldGrant(path("/z"), .read)
        #expect(dropped == [HeldGrant(.root, .write)], "/z does not meet /b")
        #expect(added == [keptX, keptY])
        #expect(held.grants == [keptX, keptY, unrelated])
        #expect(held.recall() == nil, "what uses stand on stays until they go")
        held.queued = [queued("/a", .read)]
        #expect(held.recall() == nil, "/a/x is in use; /a/y's snapshot-read does not conflict")
        held.uses[1] = nil
        let last = held.recall()
        #expect(last?.dropped == [HeldGrant(path("/a/x"), .write)])
        #expect(last?.added == [])
    }
}
