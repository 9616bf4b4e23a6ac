import Synchronization
import Glibc
import Testing
@testable import CoordFSCore

private let alice = ClaimOwner.process(101)
private let bob = ClaimOwner.process(202)
private let carol = ClaimOwner.process(303)
private let dave = ClaimOwner.process(404)

private let compatible = claimMatrix

private let allPairs = ClaimMode.allCases.flatMap { a in ClaimMode.allCases.map { b in (a, b) } }

@Suite struct ClaimModeTests {
    @Test(arguments: ClaimMode.allCases)
    func compatibilityFollowsTheMatrix(_ mode: ClaimMode) {
        for other in ClaimMode.allCases {
            #expect(mode.isCompatible(with: other) == compatible[mode]!.contains(other), "\(mode) with \(other)")
            #expect(mode.isCompatible(with: other) == other.isCompatible(with: mode), "symmetric")
        }
    }

    @Test func descriptions() {
        #expect(ClaimMode.allCases.map(\.description) == ["snapshot-read", "read", "write", "exclusive"])
        #expect(ClaimOwner.process(7).description == "pid 7")
        #expect(ClaimOwner.client(3, processTree: 7).description.contains("client 3"))
    }
}

@Suite struct ClaimTableTests {
    // MARK: Matrix and hierarchy

    @Test func wholeMatrixOnOnePath() {
        for (held, wanted) in allPairs {
            let table = ClaimTable()
            let first = table.tryAcquire([request("/x", held)], owner: alice)
            #expect(first.grant != nil)
            let second = table.tryAcquire([request("/x", wanted)], owner: bob)
            let expected = compatible[held]!.contains(wanted)
            #expect((second.grant != nil) == expected, "\(held) then \(wanted)")
            if !expected {
                let blockers = second.blockers ?? []
                #expect(blockers.count == 1)
                #expect(blockers.first?.owner == alice && blockers.first?.mode == held && blockers.first?.path == path("/x"))
            }
            first.grant.map(table.release)
            second.grant.map(table.release)
            #expect(table.entryCount == 0)
        }
    }

    @Test func ancestorsAndDescendantsConflict() {
        for (held, wanted) in allPairs where !compatible[held]!.contains(wanted) {
            for (heldPath, wantedPath) in [("/a", "/a/b/c"), ("/a/b/c", "/a"), ("/", "/a/b"), ("/a/b", "/")] {
                let table = ClaimTable()
                let first = table.tryAcquire([request(heldPath, held)], owner: alice)
                #expect(first.grant != nil)
                let second = table.tryAcquire([request(wantedPath, wanted)], owner: bob)
                #expect(second.grant == nil, "\(held) on \(heldPath) must block \(wanted) on \(wantedPath)")
                #expect(second.blockers?.first?.path == path(heldPath))
            }
        }
    }

    @Test func compatibleModesPassAcrossTheHierarchy() {
        let table = ClaimTable()
        #expect(table.tryAcquire([request("/a", .write)], owner: alice).grant != nil)
        #expect(table.tryAcquire([request("/a/b/c", .snapshotRead)], owner: bob).grant != nil)
        #expect(table.tryAcquire([request("/", .snapshotRead)], owner: carol).grant != nil)
    }

    @Test func siblingsAndNamePrefixesNeverConflict() {
        let table = ClaimTable()
        #expect(table.tryAcquire([request("/a/b", .exclusive)], owner: alice).grant != nil)
        #expect(table.tryAcquire([request("/a/bc", .exclusive)], owner: bob).grant != nil)
        #expect(table.tryAcquire([request("/a/c/d", .exclusive)], owner: carol).grant != nil)
        #expect(table.tryAcquire([request("/b", .exclusive)], owner: dave).grant != nil)
        #expect(table.tryAcquire([request("/a", .snapshotRead)], owner: dave).grant == nil, "the parent of exclusive claims")
    }

    // MARK: Owners

    @Test func claimsAreReentrantForTheirOwner() {
        let table = ClaimTable()
        let first = table.tryAcquire([request("/f", .write)], owner: alice).grant
        let second = table.tryAcquire([request("/f", .write)], owner: alice).grant
        let inner = table.tryAcquire([request("/", .exclusive), request("/f", .exclusive)], owner: alice).grant
        #expect(first != nil && second != nil && inner != nil)
        #expect(table.snapshot().holders.count == 4)
        #expect(table.tryAcquire([request("/f", .snapshotRead)], owner: bob).grant == nil)
        inner.map(table.release)
        first.map(table.release)
        #expect(table.tryAcquire([request("/f", .read)], owner: bob).grant == nil, "the second write still holds")
        second.map(table.release)
        #expect(table.tryAcquire([request("/f", .read)], owner: bob).grant != nil)
    }

    @Test func releaseIsIdempotent() throws {
        let table = ClaimTable()
        let grant = try #require(table.tryAcquire([request("/a", .write), request("/b", .write)], owner: alice).grant)
        table.release(grant)
        table.release(grant)
        #expect(table.entryCount == 0)
        #expect(table.snapshot().holders.isEmpty)
    }

    @Test func processesInAnExplicitClaimsTreePassThrough() throws {
        let client = ClaimOwner.client(1, processTree: 500)
        let table = ClaimTable()
        #expect(!table.hasExplicitClaims)
        let claim = try #require(table.tryAcquire([request("/project", .exclusive)], owner: client).grant)
        #expect(table.hasExplicitClaims)
        #expect(table.tryAcquire([request("/project/src/main.c", .write)], owner: .process(501),
                                 lineage: ProcessLineage([501, 500, 1])).grant != nil)
        #expect(table.tryAcquire([request("/project/src/main.c", .snapshotRead)], owner: .process(502),
                                 lineage: ProcessLineage([502, 1])).grant == nil)
        #expect(table.tryAcquire([request("/project/README", .snapshotRead)], owner: .process(501)).grant == nil,
                "without its lineage a process is in no explicit claim's tree")
        table.release(claim)
        #expect(!table.hasExplicitClaims)
    }

    // MARK: All or nothing

    @Test func multiPathRequestsAreAllOrNothing() throws {
        let table = ClaimTable()
        let held = try #require(table.tryAcquire([request("/b", .write)], owner: bob).grant)
        let rename = [request("/a", .write), request("/b", .write)]
        let refused = table.tryAcquire(rename, owner: alice)
        #expect(refused.grant == nil)
        #expect(refused.blockers?.map(\.path) == [path("/b")])
        #expect(table.snapshot().holders.map(\.owner) == [bob], "nothing of the refused request is held")
        #expect(table.tryAcquire([request("/a", .exclusive)], owner: carol).grant.map(table.release) != nil,
                "/a stays free while the rename cannot have /b")

        let box = OutcomeBox()
        #expect(table.acquire(rename, owner: alice, box: box).ticket != nil)
        let waiting = table.snapshot()
        #expect(waiting.holders.map(\.owner) == [bob], "a waiter holds nothing")
        #expect(waiting.waiters.map(\.requests) == [rename])
        // A waiter's exclusive /a would queue behind Alice's queued write (fairness), but Carol,
        // inside a snapshot of /a, is checked against granted claims only: Alice holds none.
        let carolsSnapshot = try #require(table.tryAcquire([request("/a", .snapshotRead)], owner: carol).grant)
        #expect(table.tryAcquire([request("/a", .exclusive)], owner: carol).grant.map(table.release) != nil,
                "nothing of the queued request is held")
        table.release(carolsSnapshot)

        table.release(held)
        let grant = try #require(box.wait()?.grant)
        #expect(Set(table.snapshot().holders.map(\.path)) == [path("/a"), path("/b")])
        table.release(grant)
        #expect(table.entryCount == 0)
    }

    /// The worked example of Docs/LOCKING.md, step by step.
    @Test func renameOfADirectoryWaitsForAWriterInside() throws {
        let table = ClaimTable()
        let editor = ClaimOwner.process(100), mv = ClaimOwner.process(200)
        let cat = ClaimOwner.process(300), touch = ClaimOwner.process(400)
        let log = OrderLog()
        // 1. The editor opens /docs/report.txt for writing.
        let first = try #require(table.tryAcquire([request("/docs/report.txt", .write)], owner: editor).grant)
        // 2. mv renames /docs: queued, holding nothing.
        let rename = OutcomeBox("mv", log: log)
        #expect(table.acquire([request("/docs", .write), request("/archive/docs", .write)], owner: mv, box: rename).ticket != nil)
        #expect(table.snapshot().holders.map(\.owner) == [editor])
        // 3. cat reads a sibling at once.
        let read = try #require(table.tryAcquire([request("/docs/notes.txt", .snapshotRead)], owner: cat).grant)
        table.release(read)
        // 4. touch creates a sibling: no granted conflict, but it queues behind mv.
        let create = OutcomeBox("touch", log: log)
        #expect(table.acquire([request("/docs/new.txt", .write)], owner: touch, box: create).ticket != nil)
        // 5. The editor opens its file again: already inside, so it skips the queue.
        let second = try #require(table.tryAcquire([request("/docs/report.txt", .write)], owner: editor).grant)
        // 6. Last release of the editor's handles: mv goes, touch still waits.
        table.release(first)
        #expect(rename.outcome == nil, "the second handle still holds")
        table.release(second)
        let renamed = try #require(rename.wait()?.grant)
        #expect(create.outcome == nil)
        // 7. The rename ends; touch goes.
        table.release(renamed)
        let created = try #require(create.wait()?.grant)
        #expect(log.entries == ["mv", "touch"])
        table.release(created)
        #expect(table.entryCount == 0)
    }

    @Test func aRenameThatTimesOutStopsHoldingUpThoseBehindIt() throws {
        let table = ClaimTable()
        let editor = try #require(table.tryAcquire([request("/docs/report.txt", .write)], owner: .process(100)).grant)
        let rename = OutcomeBox()
        _ = table.acquire([request("/docs", .write), request("/archive/docs", .write)], owner: .process(200),
                          within: .milliseconds(20), box: rename)
        let create = OutcomeBox()
        _ = table.acquire([request("/docs/new.txt", .write)], owner: .process(400), box: create)
        let blockers = try #require(rename.wait()?.blockers)
        #expect(blockers.map(\.description).allSatisfy { $0.hasPrefix("pid 100 holds write on /docs/report.txt") })
        #expect(create.wait()?.grant.map(table.release) != nil)
        table.release(editor)
        #expect(table.entryCount == 0)
    }

    // MARK: Fairness

    @Test func queuedWriterHoldsBackLaterReadersButNotSnapshotReaders() throws {
        let table = ClaimTable()
        let log = OrderLog()
        let reader = try #require(table.tryAcquire([request("/a", .read)], owner: alice).grant)
        let writer = OutcomeBox("writer", log: log)
        #expect(table.acquire([request("/a", .write)], owner: bob, box: writer).ticket != nil)
        let lateReader = OutcomeBox("late reader", log: log)
        #expect(table.acquire([request("/a/f", .read)], owner: carol, box: lateReader).ticket != nil,
                "a read compatible with the held read still queues behind the writer")
        #expect(table.tryAcquire([request("/a", .read)], owner: dave).grant == nil, "so does a non-blocking one")
        let snapshot = table.tryAcquire([request("/a", .snapshotRead)], owner: dave)
        #expect(snapshot.grant != nil, "snapshot-read is compatible with read and with the queued write")
        snapshot.grant.map(table.release)

        table.release(reader)
        let writerGrant = try #require(writer.wait()?.grant)
        #expect(lateReader.outcome == nil)
        table.release(writerGrant)
        let lateGrant = try #require(lateReader.wait()?.grant)
        #expect(log.entries == ["writer", "late reader"])
        table.release(lateGrant)
        #expect(table.entryCount == 0)
    }

    @Test func waitersAreGrantedInArrivalOrder() throws {
        let table = ClaimTable()
        let log = OrderLog()
        let first = try #require(table.tryAcquire([request("/q", .exclusive)], owner: alice).grant)
        let owners = (1...5).map { ClaimOwner.process(Int32(1000 + $0)) }
        let boxes = owners.indices.map { OutcomeBox("w\($0)", log: log) }
        for (owner, box) in zip(owners, boxes) {
            #expect(table.acquire([request("/q", .write)], owner: owner, box: box).ticket != nil)
        }
        table.release(first)
        for (index, box) in boxes.enumerated() {
            let grant = try #require(box.wait()?.grant)
            #expect(boxes[(index + 1)...].allSatisfy { $0.outcome == nil }, "one writer at a time")
            table.release(grant)
        }
        #expect(log.entries == ["w0", "w1", "w2", "w3", "w4"])
        #expect(table.entryCount == 0)
    }

    @Test func readersQueuedTogetherAreGrantedTogether() throws {
        let table = ClaimTable()
        let writer = try #require(table.tryAcquire([request("/r", .write)], owner: alice).grant)
        let readers = (0..<3).map { _ in OutcomeBox() }
        for (index, box) in readers.enumerated() {
            _ = table.acquire([request("/r", .read)], owner: .process(Int32(600 + index)), box: box)
        }
        let laterWriter = OutcomeBox()
        _ = table.acquire([request("/r", .write)], owner: bob, box: laterWriter)
        table.release(writer)
        let grants = readers.compactMap { $0.wait()?.grant }
        #expect(grants.count == 3)
        #expect(laterWriter.outcome == nil)
        grants.forEach(table.release)
        let last = try #require(laterWriter.wait()?.grant)
        table.release(last)
        #expect(table.entryCount == 0)
    }

    @Test func anOwnerInsideAClaimSkipsTheQueue() throws {
        let table = ClaimTable()
        let open = try #require(table.tryAcquire([request("/f", .write)], owner: alice).grant)
        let other = OutcomeBox()
        #expect(table.acquire([request("/f", .write)], owner: bob, box: other).ticket != nil)
        // Alice opens the file again: queueing behind Bob, who waits for Alice, would deadlock.
        let again = try #require(table.tryAcquire([request("/f", .write)], owner: alice).grant)
        #expect(table.tryAcquire([request("/f", .read)], owner: carol).grant == nil, "others still queue")
        table.release(open)
        #expect(other.outcome == nil)
        table.release(again)
        let grant = try #require(other.wait()?.grant)
        table.release(grant)
        #expect(table.entryCount == 0)
    }

    @Test func aProcessUnderAnExplicitClaimSkipsTheQueue() throws {
        let client = ClaimOwner.client(9, processTree: 700)
        let table = ClaimTable()
        let claim = try #require(table.tryAcquire([request("/build", .exclusive)], owner: client).grant)
        let outsider = OutcomeBox()
        #expect(table.acquire([request("/build", .read)], owner: bob, box: outsider).ticket != nil)
        #expect(table.tryAcquire([request("/build/out.o", .write)], owner: .process(701), lineage: ProcessLineage([701, 700])).grant != nil,
                "the command run under the claim does not wait for those waiting for the claim")
        table.release(claim)
        #expect(outsider.outcome == nil, "the command's own write still holds")
        _ = table.releaseAll(of: .process(701))
        #expect(outsider.wait()?.grant.map(table.release) != nil)
        #expect(table.entryCount == 0)
    }

    @Test func aGrantCanFreeAWaiterOfTheSameOwner() throws {
        let table = ClaimTable()
        let reader = try #require(table.tryAcquire([request("/d", .read)], owner: alice).grant)
        let writer = OutcomeBox()
        #expect(table.acquire([request("/d", .write)], owner: bob, box: writer).ticket != nil)
        // Carol's read of /d/x queues behind Bob's write.
        let carolsRead = OutcomeBox()
        #expect(table.acquire([request("/d/x", .read)], owner: carol, box: carolsRead).ticket != nil)
        // Carol then gets a snapshot of /d (compatible with everything queued): now she is
        // inside a claim on /d, so her queued read skips Bob's queued write.
        let snapshot = try #require(table.tryAcquire([request("/d", .snapshotRead)], owner: carol).grant)
        let read = try #require(carolsRead.wait()?.grant)
        #expect(writer.outcome == nil)
        [snapshot, read, reader].forEach(table.release)
        #expect(writer.wait()?.grant.map(table.release) != nil)
        #expect(table.entryCount == 0)
    }

    @Test func aHolderDoesNotQueueBehindAWaiterThatWaitsForIt() throws {
        let client = ClaimOwner.client(2, processTree: 900)
        let table = ClaimTable()
        // An editor keeps a log open for writing; `coordfs exec --write /proj` queues behind it.
        let log = try #require(table.tryAcquire([request("/proj/log", .write)], owner: alice).grant)
        let explicit = OutcomeBox()
        #expect(table.acquire([request("/proj", .exclusive)], owner: client, box: explicit).ticket != nil)
        // A reader queues behind the explicit claim, so it too waits for the editor.
        let reader = OutcomeBox()
        #expect(table.acquire([request("/proj/notes", .read)], owner: carol, box: reader).ticket != nil)
        // The editor saves another file: queueing it behind either would wait for itself.
        let save = try #require(table.tryAcquire([request("/proj/notes", .write)], owner: alice).grant)
        // Anyone else still queues, first come first served.
        #expect(table.tryAcquire([request("/proj/other", .write)], owner: bob).grant == nil)
        table.release(save)
        table.release(log)
        let claim = try #require(explicit.wait()?.grant)
        #expect(reader.outcome == nil)
        table.release(claim)
        #expect(reader.wait()?.grant.map(table.release) != nil)
        #expect(table.entryCount == 0)
    }

    @Test func aWaiterThatDoesNotWaitForTheRequesterStillComesFirst() throws {
        let table = ClaimTable()
        let snapshot = try #require(table.tryAcquire([request("/z/a", .snapshotRead)], owner: alice).grant)
        let reader = try #require(table.tryAcquire([request("/z", .read)], owner: dave).grant)
        let writer = OutcomeBox()
        #expect(table.acquire([request("/z", .write)], owner: bob, box: writer).ticket != nil)
        // Bob waits for Dave's read, not for Alice's snapshot: Alice's write on /z/b queues behind him.
        let alices = OutcomeBox()
        #expect(table.acquire([request("/z/b", .write)], owner: alice, box: alices).ticket != nil)
        table.release(reader)
        let bobsGrant = try #require(writer.wait()?.grant)
        #expect(alices.outcome == nil)
        table.release(bobsGrant)
        #expect(alices.wait()?.grant.map(table.release) != nil)
        table.release(snapshot)
        #expect(table.entryCount == 0)
    }

    @Test func aWaiterReachedFromTwoPathsIsJudgedTheSameBothTimes() throws {
        let table = ClaimTable()
        let open = try #require(table.tryAcquire([request("/t/open", .write)], owner: alice).grant)
        let everything = OutcomeBox()
        #expect(table.acquire([request("/t", .exclusive)], owner: bob, box: everything).ticket != nil)
        // Both paths of the rename overlap Bob's waiter, which waits for Alice.
        let rename = try #require(table.tryAcquire([request("/t/x", .write), request("/t/y", .write)], owner: alice).grant)
        [rename, open].forEach(table.release)
        #expect(everything.wait()?.grant.map(table.release) != nil)
        #expect(table.entryCount == 0)
    }

    @Test func aCommandUnderAnExplicitClaimPassesWaitersForThatClaim() throws {
        let client = ClaimOwner.client(3, processTree: 950)
        let table = ClaimTable()
        let claim = try #require(table.tryAcquire([request("/build", .exclusive)], owner: client).grant)
        let whole = OutcomeBox()
        #expect(table.acquire([request("/", .exclusive)], owner: bob, box: whole).ticket != nil)
        // The command writes outside the claimed folder: the waiter on / waits for the claim,
        // which waits for the command to end.
        let write = try #require(table.tryAcquire([request("/src/x", .write)], owner: .process(951), lineage: ProcessLineage([951, 950])).grant)
        #expect(table.tryAcquire([request("/src/y", .write)], owner: .process(952), lineage: ProcessLineage([952, 1])).grant == nil)
        [write, claim].forEach(table.release)
        #expect(whole.wait()?.grant.map(table.release) != nil)
        #expect(table.entryCount == 0)
    }

    // MARK: Timeouts, cancels, disconnects

    @Test func waitsTimeOutWithTheirBlockers() throws {
        let table = ClaimTable()
        let held = try #require(table.tryAcquire([request("/a", .write)], owner: alice).grant)
        let box = OutcomeBox()
        let start = ContinuousClock.now
        #expect(table.acquire([request("/a/b", .write)], owner: bob, within: .milliseconds(30), box: box).ticket != nil)
        let blockers = try #require(box.wait()?.blockers)
        #expect(ContinuousClock.now - start >= .milliseconds(30))
        #expect(blockers.map(\.path) == [path("/a")])
        #expect(blockers.map(\.owner) == [alice])
        #expect(blockers.map(\.mode) == [.write])
        #expect(table.waiterCount == 0)
        table.release(held)
        #expect(table.entryCount == 0)
        #expect(box.calls == 1)
    }

    @Test func aPastDeadlineTimesOutPromptly() throws {
        let table = ClaimTable()
        let held = try #require(table.tryAcquire([request("/a", .exclusive)], owner: alice).grant)
        let box = OutcomeBox()
        #expect(table.acquire([request("/a", .read)], owner: bob, deadline: .now - .seconds(1), onOutcome: box.callback).ticket != nil)
        #expect(box.wait(seconds: 2)?.blockers?.count == 1)
        table.release(held)
        #expect(table.entryCount == 0)
    }

    @Test func aWaiterQueuedOnlyBehindWaitersNamesWhatThoseWaitFor() throws {
        let table = ClaimTable()
        let reader = try #require(table.tryAcquire([request("/a", .read)], owner: alice).grant)
        let writer = OutcomeBox()
        _ = table.acquire([request("/a", .write)], owner: bob, box: writer)
        let late = OutcomeBox()
        _ = table.acquire([request("/a", .read)], owner: carol, within: .milliseconds(20), box: late)
        let blockers = try #require(late.wait()?.blockers)
        #expect(blockers.map(\.owner) == [alice])
        #expect(table.cancel(try #require(writerTicket(table, bob))))
        table.release(reader)
        #expect(table.entryCount == 0)
    }

    @Test func aTimedOutWaiterStopsHoldingUpThoseBehindIt() throws {
        let table = ClaimTable()
        let reader = try #require(table.tryAcquire([request("/a", .read)], owner: alice).grant)
        let writer = OutcomeBox()
        _ = table.acquire([request("/a", .write)], owner: bob, within: .milliseconds(20), box: writer)
        let lateReader = OutcomeBox()
        _ = table.acquire([request("/a", .read)], owner: carol, box: lateReader)
        #expect(writer.wait()?.blockers != nil)
        let grant = try #require(lateReader.wait()?.grant, "granted when the writer ahead of it gave up")
        [grant, reader].forEach(table.release)
        #expect(table.entryCount == 0)
    }

    @Test func cancelledWaitersAreNeverCalled() throws {
        let table = ClaimTable()
        let held = try #require(table.tryAcquire([request("/a", .read)], owner: alice).grant)
        let cancelled = OutcomeBox()
        let ticket = try #require(table.acquire([request("/a", .write)], owner: bob, within: .milliseconds(30), box: cancelled).ticket)
        let behind = OutcomeBox()
        #expect(table.acquire([request("/a", .read), request("/b", .exclusive)], owner: carol, box: behind).ticket != nil)
        #expect(table.cancel(ticket))
        #expect(!table.cancel(ticket), "a second cancel finds nothing")
        let grant = try #require(behind.wait()?.grant, "the cancelled writer no longer queues ahead")
        table.release(held)
        table.release(grant)
        usleep(60_000) // past the cancelled waiter's deadline
        #expect(cancelled.calls == 0)
        #expect(table.entryCount == 0)
    }

    @Test func cancelAfterTheGrantIsTooLate() throws {
        let table = ClaimTable()
        let held = try #require(table.tryAcquire([request("/a", .write)], owner: alice).grant)
        let box = OutcomeBox()
        let ticket = try #require(table.acquire([request("/a", .write)], owner: bob, box: box).ticket)
        table.release(held)
        let grant = try #require(box.wait()?.grant)
        #expect(!table.cancel(ticket))
        #expect(box.calls == 1)
        table.release(grant)
        #expect(table.entryCount == 0)
    }

    @Test func releaseAllDropsAnOwnersClaimsAndWaitsSilently() throws {
        let client = ClaimOwner.client(4, processTree: 800)
        let table = ClaimTable()
        _ = try #require(table.tryAcquire([request("/x", .exclusive)], owner: client).grant)
        _ = try #require(table.tryAcquire([request("/y/z", .read), request("/w", .write)], owner: client).grant)
        let blocker = try #require(table.tryAcquire([request("/v", .write)], owner: alice).grant)
        let clientWait = OutcomeBox()
        let clientTicket = try #require(table.acquire([request("/v", .read)], owner: client, box: clientWait).ticket)
        let bobs = OutcomeBox()
        _ = table.acquire([request("/x/1", .write), request("/w", .write)], owner: bob, box: bobs)

        #expect(table.releaseAll(of: client) == [clientTicket])
        let grant = try #require(bobs.wait()?.grant)
        #expect(!table.snapshot().holders.contains { $0.owner == client })
        #expect(table.releaseAll(of: client).isEmpty)
        [grant, blocker].forEach(table.release)
        #expect(clientWait.calls == 0)
        #expect(table.entryCount == 0)
    }

    // MARK: Callbacks and status

    @Test func callbacksMayCallBackIntoTheTable() throws {
        let table = ClaimTable()
        let held = try #require(table.tryAcquire([request("/a", .write)], owner: alice).grant)
        let done = OutcomeBox()
        let attempt = table.acquire([request("/a", .write)], owner: bob, deadline: .now + .seconds(5)) { outcome in
            // Runs on the releasing thread; with the lock still held this would deadlock.
            _ = table.snapshot()
            if let grant = outcome.grant { table.release(grant) }
            done.callback(outcome)
        }
        #expect(attempt.ticket != nil)
        table.release(held)
        #expect(done.wait()?.grant != nil)
        #expect(table.entryCount == 0)
    }

    @Test func snapshotShowsHoldersAndWaiters() throws {
        let table = ClaimTable()
        let held = try #require(table.tryAcquire([request("/b", .read), request("/a", .read)], owner: alice).grant)
        let box = OutcomeBox()
        let ticket = try #require(table.acquire([request("/a/f", .write)], owner: bob, box: box).ticket)
        let snapshot = table.snapshot()
        #expect(snapshot.holders.map(\.path) == [path("/a"), path("/b")])
        #expect(snapshot.waiters.map(\.ticket) == [ticket])
        #expect(snapshot.waiters.first?.owner == bob)
        #expect(snapshot.waiters.first?.description.contains("write /a/f") == true)
        #expect(snapshot.holders.first?.description.contains("pid 101 holds read on /a") == true)
        #expect(table.entryCount == 3, "/a, /a/f and /b are live (the root only counts while claimed itself)")
        table.cancel(ticket)
        table.release(held)
        #expect(table.entryCount == 0)
    }

    // MARK: Memory

    @Test func entriesGoAwayWithTheirLastUse() {
        let table = ClaimTable()
        let components = (0..<1000).map { name("d\($0)") }
        for index in 0..<1_000_000 {
            let target = MountPath(components: [components[index % 1000], "f\(index)"])
            guard case .success(let grant) = table.tryAcquire([ClaimRequest(target, .write)], owner: alice) else {
                Issue.record("uncontended claim refused")
                return
            }
            table.release(grant)
        }
        #expect(table.entryCount == 0)
    }

    @Test func entriesGoAwayAfterWaitsTimeoutsAndCancels() throws {
        let table = ClaimTable()
        let held = try #require(table.tryAcquire([request("/a/b", .write)], owner: alice).grant)
        #expect(table.entryCount == 2)
        let timingOut = OutcomeBox()
        _ = table.acquire([request("/a/b/c/d", .write), request("/e/f", .write)], owner: bob, within: .milliseconds(10), box: timingOut)
        let cancelled = OutcomeBox()
        let ticket = try #require(table.acquire([request("/a", .read), request("/g/h/i", .read)], owner: carol, box: cancelled).ticket)
        let granted = OutcomeBox()
        _ = table.acquire([request("/a/b/x", .read)], owner: dave, box: granted)
        #expect(table.entryCount == 10, "a, b, c, d, e, f, g, h, i and x")
        #expect(timingOut.wait()?.blockers != nil)
        #expect(table.cancel(ticket))
        table.release(held)
        let grant = try #require(granted.wait()?.grant)
        table.release(grant)
        #expect(table.entryCount == 0)
        #expect(table.waiterCount == 0)
    }

    /// Finds the ticket of an owner's only waiter, through status.
    private func writerTicket(_ table: ClaimTable, _ owner: ClaimOwner) -> ClaimWaitTicket? {
        table.snapshot().waiters.first { $0.owner == owner }?.ticket
    }
}

/// Issue 32: a claim of one user that keeps another user waiting for the break time is taken
/// from its holder (the whole grant), the waiter goes on, and observers hear who broke what.
@Suite struct ClaimBreakTests {
    private let nobody: UInt32 = 65534

    /// Collects what the table reports.
    private final class BreakLog: Sendable {
        let breaks = Mutex<[ClaimBreak]>([])
        func observe(_ table: ClaimTable) { table.onBreak { new in self.breaks.withLock { $0.append(contentsOf: new) } } }
        var all: [ClaimBreak] { breaks.withLock { $0 } }
    }

    @Test func anotherUsersClaimIsBrokenAfterTheBreakTime() throws {
        let table = ClaimTable(breakAfter: .milliseconds(200))
        let log = BreakLog()
        log.observe(table)
        let reader = try #require(table.tryAcquire([request("/shared", .read), request("/other", .read)],
                                                   owner: .client(1, processTree: 100), user: nobody).grant)
        let writer = OutcomeBox()
        let started = ContinuousClock.now
        #expect(table.acquire([request("/shared/file", .write)], owner: .process(200), user: 0, deadline: .now + .seconds(20),
                              onOutcome: writer.callback).ticket != nil)
        let granted = try #require(writer.wait(seconds: 10)?.grant)
        let waited = ContinuousClock.now - started
        #expect(waited >= .milliseconds(200) && waited < .seconds(5), "\(waited)")
        let broken = try #require(log.all.first)
        #expect(log.all.count == 1)
        #expect(broken.grant == reader.id && broken.owner == .client(1, processTree: 100) && broken.user == nobody)
        #expect(broken.holds.map(\.path) == [path("/other"), path("/shared")], "the whole grant goes")
        #expect(broken.brokenBy == .process(200) && broken.brokenByUser == 0 && broken.waited >= .milliseconds(200))
        #expect(table.recentBreaks.map(\.grant) == [reader.id])
        table.release(reader) // a release of a broken grant does nothing
        #expect(table.snapshot().holders.map(\.path) == [path("/shared/file")])
        table.release(granted)
        #expect(table.entryCount == 0)
    }

    @Test func theSameUsersClaimIsNeverBroken() throws {
        let table = ClaimTable(breakAfter: .milliseconds(50))
        let log = BreakLog()
        log.observe(table)
        let held = try #require(table.tryAcquire([request("/a", .write)], owner: .process(100), user: nobody).grant)
        let waiter = OutcomeBox()
        _ = table.acquire([request("/a", .write)], owner: .process(200), user: nobody, deadline: .now + .milliseconds(400),
                          onOutcome: waiter.callback)
        #expect(waiter.wait(seconds: 10)?.blockers?.map(\.owner) == [.process(100)], "timed out, not broken")
        #expect(log.all.isEmpty)
        table.release(held)
        #expect(table.entryCount == 0)
    }

    @Test func ownersWithoutAUserNeitherBreakNorAreBroken() throws {
        let table = ClaimTable(breakAfter: .milliseconds(50))
        let log = BreakLog()
        log.observe(table)
        let unknown = try #require(table.tryAcquire([request("/a", .write)], owner: .process(100)).grant)
        let first = OutcomeBox()
        _ = table.acquire([request("/a", .write)], owner: .process(200), user: 0, deadline: .now + .milliseconds(300), onOutcome: first.callback)
        #expect(first.wait(seconds: 10)?.blockers != nil)
        table.release(unknown)
        let known = try #require(table.tryAcquire([request("/a", .write)], owner: .process(100), user: nobody).grant)
        let second = OutcomeBox()
        _ = table.acquire([request("/a", .write)], owner: .process(200), deadline: .now + .milliseconds(300), onOutcome: second.callback)
        #expect(second.wait(seconds: 10)?.blockers != nil)
        #expect(log.all.isEmpty)
        table.release(known)
    }

    /// A wait shorter than the break time never breaks: a client cannot break a claim by
    /// asking with a short wait.
    @Test func aWaitShorterThanTheBreakTimeTimesOut() throws {
        let table = ClaimTable(breakAfter: .seconds(30))
        let held = try #require(table.tryAcquire([request("/a", .exclusive)], owner: .client(1, processTree: 100), user: 0).grant)
        let waiter = OutcomeBox()
        _ = table.acquire([request("/a", .read)], owner: .client(2, processTree: 200), user: nobody, deadline: .now + .milliseconds(100),
                          onOutcome: waiter.callback)
        #expect(waiter.wait(seconds: 10)?.blockers?.count == 1)
        #expect(table.recentBreaks.isEmpty)
        table.release(held)
    }

    /// A waiter held back by its own user's claim and another's breaks the other's, then
    /// keeps waiting for its own user's, and times out at its deadline.
    @Test func onlyTheOtherUsersPartIsBroken() throws {
        let table = ClaimTable(breakAfter: .milliseconds(100))
        let mine = try #require(table.tryAcquire([request("/d/a", .read)], owner: .process(100), user: 0).grant)
        let theirs = try #require(table.tryAcquire([request("/d/b", .read)], owner: .process(300), user: nobody).grant)
        let waiter = OutcomeBox()
        _ = table.acquire([request("/d", .write)], owner: .process(200), user: 0, deadline: .now + .milliseconds(600), onOutcome: waiter.callback)
        let outcome = try #require(waiter.wait(seconds: 10))
        #expect(outcome.blockers?.map(\.owner) == [.process(100)])
        #expect(table.recentBreaks.map(\.grant) == [theirs.id])
        table.release(mine)
        table.release(theirs)
        #expect(table.entryCount == 0)
    }
}
