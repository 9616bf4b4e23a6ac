import Foundation
import Synchronization
import Testing
@testable import CoordFSCore

/// An independent record of what is granted, with the conflict rule written out again from
/// DESIGN.md, so a table that grants two conflicting claims at once is caught at the grant.
private final class GrantChecker: Sendable {
    /// Guards the grants the test currently holds: added after the table grants them, removed
    /// before the table releases them, so it never shows more than the table holds.
    private let live = Mutex<[UInt64: ClaimGrant]>([:])
    /// Guards the violations found so far.
    private let found = Mutex<[String]>([])
    private let passesThrough: @Sendable (ClaimOwner, ClaimOwner) -> Bool

    init(passesThrough: @escaping @Sendable (ClaimOwner, ClaimOwner) -> Bool) {
        self.passesThrough = passesThrough
    }

    func granted(_ grant: ClaimGrant) {
        let clashes: [String] = live.withLock { live in
            var clashes: [String] = []
            // Either may have been granted first: the table records a grant before this checker
            // hears of it, so a pass-through in either direction is allowed.
            for other in live.values
            where other.owner != grant.owner && !passesThrough(other.owner, grant.owner) && !passesThrough(grant.owner, other.owner) {
                for held in other.requests {
                    for wanted in grant.requests
                    where (held.path.isWithin(wanted.path) || wanted.path.isWithin(held.path))
                        && !claimMatrix[held.mode]!.contains(wanted.mode) {
                        clashes.append("\(other.owner) holds \(held) while \(grant.owner) was granted \(wanted)")
                    }
                }
            }
            live[grant.id] = grant
            return clashes
        }
        if !clashes.isEmpty { record(clashes) }
    }

    func releasing(_ grant: ClaimGrant) {
        live.withLock { $0[grant.id] = nil }
    }

    func record(_ problems: [String]) {
        found.withLock { $0.append(contentsOf: problems) }
    }

    var violations: [String] { found.withLock { $0 } }
    var liveCount: Int { live.withLock { $0.count } }
}

/// SplitMix64: a small seeded generator, so a failing run can be repeated from its seed.
private struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Counts of what happened, to show the run exercised every path.
private final class StressCounters: Sendable {
    let grantedAtOnce = Atomic<Int>(0)
    let grantedLater = Atomic<Int>(0)
    let timedOut = Atomic<Int>(0)
    let cancelled = Atomic<Int>(0)
    let refused = Atomic<Int>(0)
}

@Suite struct ClaimStressTests {
    static let paths = ["/", "/a", "/a/b", "/a/b/c", "/a/d", "/a/bc", "/e", "/e/f", "/e/f/g", "/h"].map(path)
    static let client = ClaimOwner.client(9, processTree: 1)
    static let owners: [ClaimOwner] = [.process(1), .process(2), .process(3), .process(4), .process(5), client]
    /// The command run under the client's explicit claim is process 1.
    static let passesThrough: @Sendable (ClaimOwner, ClaimOwner) -> Bool = { holder, requester in
        holder == client && requester == .process(1)
    }
    /// What each owner brings along: process 1 descends from the claim's tree root (pid 1 itself).
    static func lineage(of owner: ClaimOwner) -> ProcessLineage {
        if case .process(let pid) = owner { return ProcessLineage([pid]) }
        return .none
    }

    @Test func randomRequestsNeverOverlapIncompatibly() throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        let table = ClaimTable()
        let checker = GrantChecker(passesThrough: Self.passesThrough)
        let counters = StressCounters()
        /// Guards the boxes of successfully cancelled waits, checked for silence at the end.
        let cancelledBoxes = Mutex<[OutcomeBox]>([])
        let threads = 8
        let iterations = 2500
        let finished = DispatchSemaphore(value: 0)

        for index in 0..<threads {
            let thread = Thread {
                var random = SeededGenerator(state: seed &+ UInt64(index))

                /// One request, granted at once, after a wait, or not at all.
                func obtain(_ requests: [ClaimRequest], _ owner: ClaimOwner) -> ClaimGrant? {
                    if random.next() % 10 == 0 {
                        switch table.tryAcquire(requests, owner: owner, lineage: Self.lineage(of: owner)) {
                        case .success(let grant):
                            checker.granted(grant)
                            counters.grantedAtOnce.add(1, ordering: .relaxed)
                            return grant
                        case .failure:
                            counters.refused.add(1, ordering: .relaxed)
                            return nil
                        }
                    }
                    let box = OutcomeBox()
                    let deadline = ContinuousClock.now + .microseconds(Int.random(in: 0...3000, using: &random))
                    let attempt = table.acquire(requests, owner: owner, lineage: Self.lineage(of: owner), deadline: deadline) { outcome in
                        if box.calls > 0 { checker.record(["a waiter of \(owner) was called twice"]) }
                        if let grant = outcome.grant { checker.granted(grant) }
                        box.callback(outcome)
                    }
                    switch attempt {
                    case .granted(let grant):
                        checker.granted(grant)
                        counters.grantedAtOnce.add(1, ordering: .relaxed)
                        return grant
                    case .waiting(let ticket):
                        if random.next() % 4 == 0, table.cancel(ticket) {
                            counters.cancelled.add(1, ordering: .relaxed)
                            cancelledBoxes.withLock { $0.append(box) }
                            return nil
                        }
                        guard let outcome = box.wait(seconds: 10) else {
                            checker.record(["no outcome for a queued request of \(owner)"])
                            return nil
                        }
                        if let grant = outcome.grant {
                            counters.grantedLater.add(1, ordering: .relaxed)
                            return grant
                        }
                        counters.timedOut.add(1, ordering: .relaxed)
                        return nil
                    }
                }

                func randomRequests() -> [ClaimRequest] {
                    (0..<Int.random(in: 1...3, using: &random)).map { _ in
                        ClaimRequest(Self.paths.randomElement(using: &random)!, ClaimMode.allCases.randomElement(using: &random)!)
                    }
                }

                func give(_ grant: ClaimGrant?) {
                    guard let grant else { return }
                    checker.releasing(grant)
                    table.release(grant)
                }

                for _ in 0..<iterations {
                    let owner = Self.owners.randomElement(using: &random)!
                    let outer = obtain(randomRequests(), owner)
                    // Sometimes ask for more while holding: re-entrancy and queue skipping under load.
                    let inner = outer != nil && random.next() % 5 == 0 ? obtain(randomRequests(), owner) : nil
                    give(inner)
                    give(outer)
                }
                finished.signal()
            }
            thread.start()
        }
        for _ in 0..<threads {
            #expect(finished.wait(timeout: .now() + 60) == .success)
        }
        usleep(20_000) // past every deadline: a cancelled wait must stay silent even then

        #expect(checker.violations.isEmpty, "seed \(seed): \(checker.violations.prefix(5))")
        #expect(checker.liveCount == 0)
        #expect(table.entryCount == 0, "seed \(seed)")
        #expect(table.waiterCount == 0)
        #expect(cancelledBoxes.withLock { $0.allSatisfy { $0.calls == 0 } })
        #expect(counters.grantedAtOnce.load(ordering: .relaxed) > 0)
        #expect(counters.grantedLater.load(ordering: .relaxed) > 0)
        #expect(counters.timedOut.load(ordering: .relaxed) > 0)
        #expect(counters.cancelled.load(ordering: .relaxed) > 0)
        #expect(counters.refused.load(ordering: .relaxed) > 0)
    }
}
