import Synchronization
import Testing
@testable import CoordFSCore

private let origin = EventOrigin(pid: 42, uid: 1000, processName: "tester")

/// Counts the hub's wake-ups of one subscription.
private final class WakeCounter: Sendable {
    let count = Atomic<Int>(0)
    var callback: @Sendable () -> Void { { self.count.add(1, ordering: .relaxed) } }
    var value: Int { count.load(ordering: .relaxed) }
}

@Suite struct EventHubTests {
    func publish(_ hub: EventHub, _ kind: ChangeKind, _ text: String, to destination: String? = nil, directory: Bool = false) {
        hub.publish(kind, path: path(text), destination: destination.map(path), isDirectory: directory, origin: origin, size: kind == .deleted ? nil : 3)
    }

    func drainAll(_ subscription: EventSubscription) -> (events: [ChangeEvent], overflow: EventOverflow?) {
        var events: [ChangeEvent] = []
        var overflow: EventOverflow?
        while true {
            let batch = subscription.next()
            events += batch.events
            if let marker = batch.overflow { overflow = marker }
            if !batch.hasMore { return (events, overflow) }
        }
    }

    @Test func sequenceNumbersGrowByOneInPublishOrder() {
        let hub = EventHub()
        let subscription = hub.subscribe(to: .root, recursive: true) {}
        publish(hub, .created, "/a")
        publish(hub, .changed, "/a")
        publish(hub, .deleted, "/a")
        let events = drainAll(subscription).events
        #expect(events.map(\.sequence) == [1, 2, 3])
        #expect(events.map(\.kind) == [.created, .changed, .deleted])
        #expect(events[0].origin == origin)
        #expect(events[0].size == 3 && events[2].size == nil)
        #expect(events[0].time <= events[2].time)
        #expect(hub.sequence == 3)
    }

    @Test func aLostBackingWatchGivesEverySubscriberAMarkerAfterWhatItHasQueued() {
        let hub = EventHub()
        let idle = WakeCounter()
        let busy = WakeCounter()
        let idleSubscription = hub.subscribe(to: path("/elsewhere"), recursive: true, onReady: idle.callback)
        _ = idleSubscription.next() // taken everything: now idle, to be woken
        let busySubscription = hub.subscribe(to: .root, recursive: true, onReady: busy.callback)
        publish(hub, .created, "/a")
        hub.resynchronizeAll()
        publish(hub, .changed, "/a") // queued behind the marker: nothing is dropped but for a full queue
        #expect(idle.value == 1)
        let upToTheMarker = busySubscription.next()
        #expect(upToTheMarker.events.map(\.sequence) == [1])
        #expect(upToTheMarker.overflow == EventOverflow(firstDropped: 2, lastDropped: 1, dropped: 0, backingLost: true))
        #expect(upToTheMarker.hasMore)
        let afterIt = busySubscription.next()
        #expect(afterIt.events.map(\.sequence) == [2] && afterIt.overflow == nil && !afterIt.hasMore)
        let quiet = drainAll(idleSubscription)
        #expect(quiet.events.isEmpty)
        #expect(quiet.overflow?.backingLost == true && quiet.overflow?.dropped == 0)
        publish(hub, .deleted, "/a")
        #expect(drainAll(busySubscription).events.map(\.kind) == [.deleted])
        #expect(hub.statistics().overflows >= 1)
    }

    /// A backing marker keeps its place while events queue behind it; once the queue is full,
    /// the marker moves to the end and counts what is dropped, as any overflow does.
    @Test func aBackingMarkerKeepsItsPlaceUntilTheQueueOverflows() {
        let hub = EventHub(queueCapacity: 4)
        let subscription = hub.subscribe(to: .root, recursive: true) {}
        publish(hub, .created, "/a")
        hub.resynchronizeAll()
        for _ in 0..<5 { publish(hub, .changed, "/a") } // 3 fit behind the marker, 2 are dropped
        let first = subscription.next()
        #expect(first.events.map(\.sequence) == [1, 2, 3, 4])
        #expect(first.overflow == EventOverflow(firstDropped: 5, lastDropped: 6, dropped: 2, backingLost: true))
        #expect(!first.hasMore)
        publish(hub, .deleted, "/a")
        #expect(drainAll(subscription).events.map(\.sequence) == [7])
    }

    @Test func nonRecursiveDirectorySeesItselfAndItsEntriesOnly() {
        let hub = EventHub()
        let subscription = hub.subscribe(to: path("/d"), recursive: false) {}
        publish(hub, .attributes, "/d", directory: true)
        publish(hub, .created, "/d/f")
        publish(hub, .created, "/d/sub/deeper")
        publish(hub, .created, "/dx")
        publish(hub, .created, "/other")
        #expect(drainAll(subscription).events.map(\.path.description) == ["/d", "/d/f"])
    }

    @Test func recursiveSeesTheWholeSubtreeAndNothingBeside() {
        let hub = EventHub()
        let subscription = hub.subscribe(to: path("/d"), recursive: true) {}
        publish(hub, .created, "/d/a/b/c")
        publish(hub, .created, "/dd/x")
        publish(hub, .created, "/")
        #expect(drainAll(subscription).events.map(\.path.description) == ["/d/a/b/c"])
    }

    @Test func fileSubscriptionSeesOnlyThatFile() {
        let hub = EventHub()
        let subscription = hub.subscribe(to: path("/d/f"), recursive: false) {}
        publish(hub, .changed, "/d/f")
        publish(hub, .changed, "/d/g")
        publish(hub, .changed, "/d")
        #expect(drainAll(subscription).events.map(\.path.description) == ["/d/f"])
    }

    @Test func kindsFilterPassesOnlyChosenKinds() {
        let hub = EventHub()
        let subscription = hub.subscribe(to: .root, recursive: true, kinds: ChangeKindSet([.deleted, .moved])) {}
        publish(hub, .created, "/a")
        publish(hub, .changed, "/a")
        publish(hub, .moved, "/a", to: "/b")
        publish(hub, .attributes, "/b")
        publish(hub, .deleted, "/b")
        #expect(drainAll(subscription).events.map(\.kind) == [.moved, .deleted])
    }

    @Test func moveIntoOrOutOfTheSubtreeIsSeenFromEitherSide() {
        let hub = EventHub()
        let inside = hub.subscribe(to: path("/in"), recursive: true) {}
        publish(hub, .moved, "/out/f", to: "/in/f")
        publish(hub, .moved, "/in/g", to: "/out/g")
        let events = drainAll(inside).events
        #expect(events.count == 2)
        #expect(events[0].destination == path("/in/f"))
        #expect(events[1].path == path("/in/g"))
    }

    @Test func subscriptionFollowsItsSubtreeWhenItOrAnAncestorMoves() {
        let hub = EventHub()
        let subscription = hub.subscribe(to: path("/a/b"), recursive: true, kinds: ChangeKindSet([.changed])) {}
        publish(hub, .moved, "/a/b", to: "/c", directory: true)
        #expect(subscription.path == path("/c"))
        publish(hub, .changed, "/c/f")
        publish(hub, .changed, "/a/b/f")  // the old name means nothing any more
        publish(hub, .moved, "/", to: "/", directory: true)  // the root cannot move; nothing changes
        publish(hub, .moved, "/c", to: "/x/y", directory: true)
        publish(hub, .changed, "/x/y/z/g")
        #expect(subscription.path == path("/x/y"))
        #expect(drainAll(subscription).events.map(\.path.description) == ["/c/f", "/x/y/z/g"])
    }

    @Test func aFileSubscriptionFollowsARenameToo() {
        let hub = EventHub()
        let subscription = hub.subscribe(to: path("/f"), recursive: false) {}
        publish(hub, .moved, "/f", to: "/g")
        publish(hub, .changed, "/g")
        publish(hub, .changed, "/f")
        let events = drainAll(subscription).events
        #expect(events.map(\.kind) == [.moved, .changed])
        #expect(events[1].path == path("/g"))
    }

    @Test func siblingWithACommonPrefixIsNotFollowed() {
        let hub = EventHub()
        let subscription = hub.subscribe(to: path("/ab"), recursive: true) {}
        publish(hub, .moved, "/a", to: "/z", directory: true)
        #expect(subscription.path == path("/ab"))
    }

    @Test func sinceReplaysMatchingHistoryThenGoesLive() {
        let hub = EventHub()
        for index in 1...10 { publish(hub, .changed, index % 2 == 0 ? "/even" : "/odd") }
        let subscription = hub.subscribe(to: path("/even"), recursive: false, since: 5) {}
        #expect(subscription.start == .replayed(count: 3, through: 10))
        publish(hub, .changed, "/even")
        #expect(drainAll(subscription).events.map(\.sequence) == [6, 8, 10, 11])
    }

    @Test func sinceTheCurrentSequenceReplaysNothing() {
        let hub = EventHub()
        publish(hub, .changed, "/a")
        let subscription = hub.subscribe(to: .root, recursive: true, since: 1) {}
        #expect(subscription.start == .replayed(count: 0, through: 1))
        #expect(drainAll(subscription).events.isEmpty)
    }

    @Test func sinceBeyondTheHistoryAsksForAResync() {
        let hub = EventHub(historyCapacity: 4)
        for _ in 1...10 { publish(hub, .changed, "/a") }
        // Events 7...10 are kept: since 6 still works, since 5 does not.
        let reachable = hub.subscribe(to: .root, recursive: true, since: 6) {}
        #expect(reachable.start == .replayed(count: 4, through: 10))
        #expect(drainAll(reachable).events.map(\.sequence) == [7, 8, 9, 10])
        let tooOld = hub.subscribe(to: .root, recursive: true, since: 5) {}
        #expect(tooOld.start == .resync(oldestAvailable: 7, current: 10))
        #expect(drainAll(tooOld).events.isEmpty)
        let fromTheFuture = hub.subscribe(to: .root, recursive: true, since: 99) {}
        #expect(fromTheFuture.start == .resync(oldestAvailable: 7, current: 10))
        publish(hub, .changed, "/a")
        #expect(drainAll(tooOld).events.map(\.sequence) == [11])
    }

    /// Issue 32: the history is bounded in bytes as well as events, and what an event keeps
    /// follows the length of its paths: a move 20 levels deep keeps a few hundred bytes, not
    /// an array of names per path. Replay still gives the events back exactly.
    @Test func theHistoryIsBoundedInBytesAndKeepsEventsByTheirPathsLength() {
        let deep = "/" + (0..<20).map { "d\($0)" }.joined(separator: "/")
        let hub = EventHub(historyCapacity: 1_000, historyBytes: 16 << 10)
        publish(hub, .moved, deep + "/a", to: deep + "/b")
        let one = hub.statistics().historyBytes
        #expect(one > 2 * deep.utf8.count && one < 512, "a deep move keeps \(one) bytes")
        for _ in 2...1_000 { publish(hub, .moved, deep + "/a", to: deep + "/b") }
        let statistics = hub.statistics()
        #expect(statistics.historyBytes <= 16 << 10 && statistics.historyBytes > (16 << 10) - one, "\(statistics)")
        #expect(statistics.historyCount == statistics.historyBytes / one, "\(statistics)")
        #expect(statistics.oldestInHistory == 1_001 - UInt64(statistics.historyCount))
        let replay = hub.subscribe(to: .root, recursive: true, since: statistics.oldestInHistory - 1) {}
        let events = drainAll(replay).events
        #expect(events.count == statistics.historyCount)
        #expect(events.first?.sequence == statistics.oldestInHistory && events.last?.sequence == 1_000)
        #expect(events.allSatisfy { $0.kind == .moved && $0.path == path(deep + "/a") && $0.destination == path(deep + "/b") && $0.origin == origin })
        let tooOld = hub.subscribe(to: .root, recursive: true, since: statistics.oldestInHistory - 2) {}
        #expect(tooOld.start == .resync(oldestAvailable: statistics.oldestInHistory, current: 1_000))
    }

    @Test func replayAppliesMovesInOrder() {
        let hub = EventHub()
        publish(hub, .changed, "/old/f")
        publish(hub, .moved, "/old", to: "/new", directory: true)
        publish(hub, .changed, "/new/f")
        let subscription = hub.subscribe(to: path("/old"), recursive: true, since: 0) {}
        #expect(drainAll(subscription).events.map(\.sequence) == [1, 2, 3])
        #expect(subscription.path == path("/new"))
    }

    @Test func aFullQueueDropsAndLeavesOneOverflowMarkerThenResumes() {
        let hub = EventHub(queueCapacity: 3)
        let subscription = hub.subscribe(to: .root, recursive: true) {}
        for _ in 1...10 { publish(hub, .changed, "/a") }
        #expect(subscription.statistics().queued == 3)
        let first = subscription.next(upTo: 2)
        #expect(first.events.map(\.sequence) == [1, 2])
        #expect(first.overflow == nil && first.hasMore)
        // While the marker is pending nothing new is queued, so the marker's place is exact.
        publish(hub, .changed, "/a")
        let second = subscription.next()
        #expect(second.events.map(\.sequence) == [3])
        #expect(second.overflow == EventOverflow(firstDropped: 4, lastDropped: 11, dropped: 8))
        #expect(!second.hasMore)
        publish(hub, .changed, "/a")
        #expect(drainAll(subscription).events.map(\.sequence) == [12])
        let statistics = subscription.statistics()
        #expect(statistics.dropped == 8 && statistics.overflows == 1 && statistics.delivered == 4)
        #expect(hub.statistics().overflows == 1 && hub.statistics().dropped == 8)
    }

    @Test func aSubscriberThatNeverReadsDoesNotHoldUpPublishers() {
        let hub = EventHub(queueCapacity: 16)
        let stuck = hub.subscribe(to: .root, recursive: true) {}
        let reader = hub.subscribe(to: .root, recursive: true) {}
        let clock = ContinuousClock()
        let elapsed = clock.measure {
            for _ in 0..<100_000 { publish(hub, .changed, "/a/b") }
        }
        #expect(elapsed < .seconds(10))
        #expect(stuck.statistics().queued == 16)
        #expect(drainAll(stuck).overflow?.dropped == 100_000 - 16)
        #expect(drainAll(reader).events.count == 16)
    }

    @Test func wakesOnlyAnIdleConsumer() {
        let hub = EventHub()
        let wakes = WakeCounter()
        let subscription = hub.subscribe(to: .root, recursive: true, onReady: wakes.callback)
        publish(hub, .changed, "/a")
        #expect(wakes.value == 0)  // not idle yet: the consumer drains once after subscribing
        _ = drainAll(subscription)
        publish(hub, .changed, "/a")
        publish(hub, .changed, "/a")
        #expect(wakes.value == 1)
        _ = drainAll(subscription)
        publish(hub, .changed, "/a")
        #expect(wakes.value == 2)
    }

    @Test func aFullQueueStillWakesForItsMarkerAfterBeingEmptied() {
        let hub = EventHub(queueCapacity: 1)
        let wakes = WakeCounter()
        let subscription = hub.subscribe(to: .root, recursive: true, onReady: wakes.callback)
        _ = subscription.next()
        publish(hub, .changed, "/a")
        publish(hub, .changed, "/a")
        #expect(wakes.value == 1)
        let batch = subscription.next()
        #expect(batch.events.count == 1 && batch.overflow?.dropped == 1)
    }

    @Test func cancelledSubscriptionGetsNothingMore() {
        let hub = EventHub()
        let wakes = WakeCounter()
        let subscription = hub.subscribe(to: .root, recursive: true, onReady: wakes.callback)
        _ = subscription.next()
        subscription.cancel()
        publish(hub, .changed, "/a")
        #expect(wakes.value == 0)
        #expect(subscription.next().isEmpty)
        #expect(hub.statistics().subscribers == 0)
    }

    @Test func directoryChangesMoveTheEpochFileContentDoesNot() {
        let hub = EventHub()
        let start = hub.directoryChangeEpoch
        publish(hub, .changed, "/f")
        publish(hub, .attributes, "/f")
        #expect(hub.directoryChangeEpoch == start)
        publish(hub, .attributes, "/d", directory: true)
        #expect(hub.directoryChangeEpoch == start + 1)
    }

    @Test func concurrentPublishersGetDistinctNumbersInQueueOrder() async {
        let hub = EventHub(queueCapacity: 100_000)
        let subscription = hub.subscribe(to: .root, recursive: true) {}
        await withTaskGroup(of: Void.self) { group in
            for writer in 0..<8 {
                group.addTask {
                    for _ in 0..<2_000 { hub.publish(.changed, path: MountPath(components: ["w\(writer)"]), isDirectory: false, origin: origin, size: 1) }
                }
            }
        }
        let sequences = drainAll(subscription).events.map(\.sequence)
        #expect(sequences == Array(1...16_000))
    }
}
