import DequeModule
import Synchronization

/// Where a new subscription's stream begins.
public enum SubscriptionStart: Sendable, Hashable {
    /// Live: the first event it gets comes after `sequence`, the last one published before it.
    case live(after: UInt64)
    /// `count` matching events after the asked-for sequence were queued from history, then live
    /// from `through` on.
    case replayed(count: Int, through: UInt64)
    /// The history no longer reaches back to the asked-for sequence (or that sequence is ahead
    /// of this mount's): the subscriber missed events it cannot get back and must rescan.
    /// The stream is live after `current`.
    case resync(oldestAvailable: UInt64, current: UInt64)
}

/// Said once, in stream order, after a subscriber's queue filled: the events with these
/// sequence numbers that matched were dropped, and the subscriber must rescan to catch up.
public struct EventOverflow: Sendable, Hashable {
    public var firstDropped: UInt64
    public var lastDropped: UInt64
    public var dropped: UInt64
    /// True when the watch of the backing lost changes (see `EventHub.resynchronizeAll`):
    /// then anything may have changed, whatever `dropped` says.
    public var backingLost = false

    public init(firstDropped: UInt64, lastDropped: UInt64, dropped: UInt64, backingLost: Bool = false) {
        self.firstDropped = firstDropped
        self.lastDropped = lastDropped
        self.dropped = dropped
        self.backingLost = backingLost
    }
}

/// What one `EventSubscription.next(upTo:)` hands over, oldest first; the overflow marker,
/// when there is one, comes after `events`.
public struct EventBatch: Sendable {
    /// A piece of the subscriber's queue, handed over whole when it is all taken.
    public var events: Deque<ChangeEvent>
    public var overflow: EventOverflow?
    /// True when more is queued than was taken (the consumer keeps draining; it will not be woken for it).
    public var hasMore: Bool

    public var isEmpty: Bool { events.isEmpty && overflow == nil }
}

public struct SubscriptionStatistics: Sendable, Hashable {
    public var id: UInt64
    public var path: MountPath
    public var recursive: Bool
    public var kinds: ChangeKindSet
    public var queued: Int
    public var capacity: Int
    public var delivered: UInt64
    public var dropped: UInt64
    public var overflows: UInt64
}

public struct EventHubStatistics: Sendable, Hashable {
    /// The last sequence number handed out (0 before the first event).
    public var sequence: UInt64
    public var historyCount: Int
    public var historyCapacity: Int
    /// What the history keeps now, and may keep, in bytes.
    public var historyBytes: Int
    public var historyByteCapacity: Int
    /// The oldest sequence number a `since` can still replay from (sequence + 1 when empty).
    public var oldestInHistory: UInt64
    public var subscribers: Int
    public var dropped: UInt64
    public var overflows: UInt64
}

/// The fan-out of change events: a sequence counter, a bounded history for replay, and one
/// bounded queue per subscriber.
///
/// `publish` runs on the FUSE worker that completed an operation, so it does a fixed, small
/// amount of work under one lock: number the event, put it in the history ring, offer it to
/// each subscriber (a filter test and an append). It never waits for a subscriber: a full
/// queue drops the event and leaves one overflow marker instead. Consumers are told that
/// something is ready through their `onReady` callback, called after the lock is released
/// and only when the subscription goes from "nothing to hand over" to "something", so a busy
/// consumer costs the writer no wake-ups at all.
public final class EventHub: Sendable {
    public static let defaultHistoryCapacity = 65_536
    /// What the history may keep, in bytes: 65,536 events of paths about 100 bytes long, a
    /// small share of a small machine.
    public static let defaultHistoryBytes = 16 << 20
    public static let defaultQueueCapacity = 4_096

    public let historyCapacity: Int
    public let historyBytes: Int
    public let queueCapacity: Int

    fileprivate struct State {
        var sequence: UInt64 = 0
        var history: EventHistory
        var subscriptions: [EventSubscription] = []
        var nextSubscriptionID: UInt64 = 1
        var dropped: UInt64 = 0
        var overflows: UInt64 = 0
    }

    /// Guards `State` and every subscription's queue, filter path and counters: one lock, so a
    /// publish takes exactly one. A leaf lock (Docs/LOCKING.md): subscribers are woken outside it.
    fileprivate let state: Mutex<State>
    /// Grows whenever a directory is created, moved, deleted or has its attributes changed:
    /// whoever caches permission decisions about directories drops them when it moves.
    private let directoryEpoch = Atomic<UInt64>(0)

    /// - Parameters:
    ///   - historyCapacity: events kept for replay at most, and `historyBytes` what they may
    ///     keep (`EventHistory`): the oldest go first when either is passed.
    public init(historyCapacity: Int = EventHub.defaultHistoryCapacity, historyBytes: Int = EventHub.defaultHistoryBytes,
                queueCapacity: Int = EventHub.defaultQueueCapacity) {
        precondition(historyCapacity >= 1 && queueCapacity >= 1, "an event hub needs room for at least one event")
        self.historyCapacity = historyCapacity
        self.historyBytes = historyBytes
        self.queueCapacity = queueCapacity
        state = Mutex(State(history: EventHistory(maxEvents: historyCapacity, maxBytes: historyBytes)))
    }

    /// Records a completed change and hands it to every matching subscriber. Call it after
    /// the operation succeeded, in the order the operations took effect (for a given path the
    /// claims make that order unambiguous). Returns the event as numbered.
    @discardableResult
    public func publish(_ kind: ChangeKind, path: MountPath, destination: MountPath? = nil, isDirectory: Bool,
                        origin: EventOrigin, size: Int64?, version: Int64? = nil) -> ChangeEvent {
        let time = EventTime.now()
        if isDirectory && kind != .changed {
            directoryEpoch.add(1, ordering: .releasing)
        }
        let (event, toWake): (ChangeEvent, [EventSubscription]) = state.withLock { state in
            state.sequence += 1
            let event = ChangeEvent(sequence: state.sequence, kind: kind, path: path,
                                    destination: kind == .moved || kind == .conflict ? destination : nil,
                                    isDirectory: isDirectory, origin: origin, size: size, time: time, version: version)
            state.history.append(event)
            if state.subscriptions.isEmpty { return (event, []) }
            // Allocates only when some consumer sits idle and must be woken.
            var toWake: [EventSubscription] = []
            for subscription in state.subscriptions {
                switch subscription.offer(event, limitOverride: nil) {
                case .queued(let wake):
                    if wake { toWake.append(subscription) }
                case .dropped(let firstDrop):
                    state.dropped += 1
                    if firstDrop { state.overflows += 1 }
                case .notMatched:
                    break
                }
            }
            return (event, toWake)
        }
        for subscription in toWake {
            subscription.onReady()
        }
        return event
    }

    /// Starts a subscription.
    ///
    /// - Parameters:
    ///   - path: a file (its own events), or a directory (its own events and its entries'; with
    ///     `recursive`, everything beneath it). When the path or one of its ancestors is moved,
    ///     the subscription follows it to the new name.
    ///   - kinds: the kinds to pass; a `moved` of the subscribed path is followed even when
    ///     `moved` is not among them.
    ///   - since: replay the matching events after this sequence number from history first.
    ///   - onReady: called (never under the hub's lock, from the publishing thread) when the
    ///     subscription has something to hand over after the consumer had emptied it. The
    ///     consumer then calls `next(upTo:)` until a batch says no more is queued. Call
    ///     `next(upTo:)` once right after subscribing: replayed events are not announced.
    public func subscribe(to path: MountPath, recursive: Bool, kinds: ChangeKindSet = .all, since: UInt64? = nil,
                          onReady: @escaping @Sendable () -> Void) -> EventSubscription {
        state.withLock { state in
            let subscription = EventSubscription(hub: self, id: state.nextSubscriptionID, path: path, recursive: recursive,
                                                 kinds: kinds, capacity: queueCapacity, onReady: onReady)
            state.nextSubscriptionID += 1
            let current = state.sequence
            if let since {
                let oldest = state.history.oldest ?? current + 1
                if since > current || since + 1 < oldest {
                    subscription.beginning = .resync(oldestAvailable: oldest, current: current)
                } else {
                    // A replay may be larger than the live bound: the queue may hold all of it
                    // (history is bounded too) and returns to its bound once drained.
                    var count = 0
                    for event in state.history.events(after: since) {
                        if case .queued = subscription.offer(event, limitOverride: Int.max) { count += 1 }
                    }
                    subscription.limit = queueCapacity + count
                    subscription.beginning = .replayed(count: count, through: current)
                }
            } else {
                subscription.beginning = .live(after: current)
            }
            state.subscriptions.append(subscription)
            return subscription
        }
    }

    fileprivate func remove(_ subscription: EventSubscription) {
        state.withLock { state in
            state.subscriptions.removeAll { $0 === subscription }
            subscription.queue = []
            subscription.overflow = nil
            subscription.eventsBeforeOverflow = 0
            subscription.isCancelled = true
        }
    }

    /// The last sequence number handed out.
    public var sequence: UInt64 {
        state.withLock { $0.sequence }
    }

    /// Changes whenever a directory's permissions or place may have changed through the mount.
    public var directoryChangeEpoch: UInt64 {
        directoryEpoch.load(ordering: .acquiring)
    }

    /// The watch of the backing lost changes: every subscriber gets the overflow marker after
    /// what it has queued, and must rescan what it watches.
    public func resynchronizeAll() {
        let toWake: [EventSubscription] = state.withLock { state in
            state.overflows += 1
            return state.subscriptions.filter { $0.markBackingLost(after: state.sequence) }
        }
        for subscription in toWake { subscription.onReady() }
    }

    public func statistics() -> EventHubStatistics {
        state.withLock { state in
            EventHubStatistics(sequence: state.sequence, historyCount: state.history.count, historyCapacity: historyCapacity,
                               historyBytes: state.history.bytes, historyByteCapacity: historyBytes,
                               oldestInHistory: state.history.oldest ?? state.sequence + 1,
                               subscribers: state.subscriptions.count, dropped: state.dropped, overflows: state.overflows)
        }
    }

    public func subscriptionStatistics() -> [SubscriptionStatistics] {
        state.withLock { state in state.subscriptions.map { $0.statisticsLocked() } }
    }
}

/// One subscriber's filter and queue.
///
/// Sendable: `id`, `recursive`, `kinds`, `hub` and `onReady` never change; everything else is
/// read and written only under the hub's lock.
public final class EventSubscription: @unchecked Sendable {
    public let id: UInt64
    public let recursive: Bool
    public let kinds: ChangeKindSet
    private let hub: EventHub
    fileprivate let onReady: @Sendable () -> Void
    private let capacity: Int

    // Guarded by the hub's lock.
    fileprivate var filterPath: MountPath
    /// Events waiting for the consumer, oldest first: appended by publishers, taken from the front.
    fileprivate var queue = Deque<ChangeEvent>()
    fileprivate var limit: Int
    /// The marker the consumer gets once it has taken the `eventsBeforeOverflow` queued events
    /// ahead of it. A marker that only says the backing lost changes (nothing dropped here)
    /// keeps its place: later events queue behind it. Once an event is dropped, it moves to the
    /// end and further events are dropped until the consumer has read up to it.
    fileprivate var overflow: EventOverflow?
    fileprivate var eventsBeforeOverflow = 0
    /// True while the consumer has taken everything and waits to be told of more.
    fileprivate var idle = false
    fileprivate var isCancelled = false
    fileprivate var beginning: SubscriptionStart = .live(after: 0)
    fileprivate var delivered: UInt64 = 0
    fileprivate var dropped: UInt64 = 0
    fileprivate var overflows: UInt64 = 0

    fileprivate init(hub: EventHub, id: UInt64, path: MountPath, recursive: Bool, kinds: ChangeKindSet, capacity: Int,
                     onReady: @escaping @Sendable () -> Void) {
        self.hub = hub
        self.id = id
        self.filterPath = path
        self.recursive = recursive
        self.kinds = kinds
        self.capacity = capacity
        self.limit = capacity
        self.onReady = onReady
    }

    fileprivate enum Offer {
        case notMatched
        case queued(wake: Bool)
        case dropped(firstDrop: Bool)
    }

    /// Filters, queues and follows moves. Called under the hub's lock.
    @inline(__always)
    fileprivate func offer(_ event: ChangeEvent, limitOverride: Int?) -> Offer {
        let matched = kinds.contains(event.kind) && (covers(event.path) || event.destination.map(covers) == true)
        if event.kind == .moved, let destination = event.destination, filterPath.isWithin(event.path) {
            filterPath = MountPath(components: destination.components + filterPath.components.dropFirst(event.path.components.count))
        }
        guard matched else { return .notMatched }
        if let marker = overflow, marker.dropped > 0 {
            overflow!.lastDropped = event.sequence
            overflow!.dropped += 1
            dropped += 1
            return .dropped(firstDrop: false)
        }
        if queue.count >= (limitOverride ?? limit) {
            // A pending backing marker (nothing dropped yet) joins this one at the end.
            let backingLost = overflow?.backingLost ?? false
            if overflow == nil { overflows += 1 }
            overflow = EventOverflow(firstDropped: event.sequence, lastDropped: event.sequence, dropped: 1, backingLost: backingLost)
            eventsBeforeOverflow = queue.count
            dropped += 1
            return .dropped(firstDrop: true)
        }
        queue.append(event)
        if idle {
            idle = false
            return .queued(wake: true)
        }
        return .queued(wake: false)
    }

    /// True for the subscribed path itself, its entries, and with `recursive` all beneath it.
    @inline(__always)
    private func covers(_ path: MountPath) -> Bool {
        let depth = filterPath.components.count
        let other = path.components.count
        guard other >= depth, other <= depth + 1 || recursive else { return false }
        return path.components.starts(with: filterPath.components)
    }

    /// Leaves the resync marker of a lost backing watch (under the hub's lock); true when the
    /// consumer sat idle and must be woken.
    fileprivate func markBackingLost(after sequence: UInt64) -> Bool {
        if overflow == nil {
            overflow = EventOverflow(firstDropped: sequence + 1, lastDropped: sequence, dropped: 0)
            eventsBeforeOverflow = queue.count
            overflows += 1
        }
        overflow!.backingLost = true
        guard idle else { return false }
        idle = false
        return true
    }

    /// Takes up to `maximum` queued events, oldest first, and the overflow marker once every
    /// event before it has been taken.
    public func next(upTo maximum: Int = .max) -> EventBatch {
        hub.state.withLock { _ in
            var batch = EventBatch(events: [], overflow: nil, hasMore: false)
            // Up to the marker, if there is one: it goes after the events queued before it.
            let taking = min(maximum, overflow == nil ? queue.count : eventsBeforeOverflow)
            if taking == queue.count {
                swap(&batch.events, &queue)
            } else {
                batch.events = Deque(queue.prefix(taking))
                queue.removeFirst(taking)
            }
            delivered += UInt64(batch.events.count)
            if overflow != nil {
                eventsBeforeOverflow -= taking
                if eventsBeforeOverflow == 0 {
                    batch.overflow = overflow
                    overflow = nil
                }
            }
            if queue.isEmpty {
                limit = capacity
                idle = !isCancelled
            }
            batch.hasMore = !queue.isEmpty
            return batch
        }
    }

    /// Ends the subscription: nothing more is queued, and `onReady` is not called again.
    public func cancel() {
        hub.remove(self)
    }

    /// How the subscription began (replay, resync or live).
    public var start: SubscriptionStart {
        hub.state.withLock { _ in beginning }
    }

    /// The path it follows now (it changes when the path or an ancestor is moved).
    public var path: MountPath {
        hub.state.withLock { _ in filterPath }
    }

    public func statistics() -> SubscriptionStatistics {
        hub.state.withLock { _ in statisticsLocked() }
    }

    fileprivate func statisticsLocked() -> SubscriptionStatistics {
        SubscriptionStatistics(id: id, path: filterPath, recursive: recursive, kinds: kinds, queued: queue.count,
                               capacity: capacity, delivered: delivered, dropped: dropped, overflows: overflows)
    }
}
