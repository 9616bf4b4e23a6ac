import DequeModule
import Synchronization
import SystemPackage

/// What a subscription yields.
public enum SubscriptionMessage: Sendable, Hashable {
    case event(EventRecord)
    /// Events were lost — the server's queue or this client's buffer filled because they were
    /// not read fast enough: `dropped` matching events, sequence numbers `first` to `last`.
    /// Rescan what you watch; events after `last` follow. Also sent, with `reason` `.backing`,
    /// when the mount lost track of changes made behind it: anything may have changed.
    case overflow(Overflow)

    /// The marker as the server sends it.
    public typealias Overflow = OverflowMarker
}

/// A subscription's events, in commit order. The sequence ends when the subscription is
/// cancelled or the connection is closed by this client, and throws when the connection ends
/// otherwise. Iterate it from one task at a time.
public struct EventStream: AsyncSequence, Sendable {
    public typealias Element = SubscriptionMessage

    public let id: UInt64
    /// The subscribed path as the server understood it.
    public let path: FilePath
    /// The last sequence number before the first event this subscription delivers.
    public let sequence: UInt64
    /// How many events from history come first (with `since`).
    public let replayed: Int
    /// True when `since` reached further back than the server's history: rescan first.
    public let needsResync: Bool

    private let sink: SubscriptionSink
    private let connection: CoordFSConnection

    init(reply: Request.Subscribe.Reply, sink: SubscriptionSink, connection: CoordFSConnection) {
        self.id = reply.subscription
        self.path = reply.path
        self.sequence = reply.sequence
        self.replayed = reply.replayed
        self.needsResync = reply.resync
        self.sink = sink
        self.connection = connection
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let sink: SubscriptionSink

        public mutating func next() async throws -> SubscriptionMessage? {
            try await sink.next()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(sink: sink)
    }

    /// Ends the subscription; its sequence finishes.
    public func cancel() async throws(CoordFSError) {
        try await connection.unsubscribe(id)
    }
}

/// One subscription's buffer on this side. It is bounded: when the application does not keep
/// up, further events are dropped and one overflow message takes their place, after the
/// events already buffered (merged with any overflow the server reported) — the same rule as
/// the server's queue, so a slow application costs memory only up to `capacity`.
///
/// Sendable: all state is behind `state`'s lock; the waiting consumer is resumed outside it.
final class SubscriptionSink: Sendable {
    private struct State {
        var buffer = Deque<SubscriptionMessage>()
        var overflow: SubscriptionMessage.Overflow?
        var waiter: CheckedContinuation<SubscriptionMessage?, any Error>?
        var finished = false
        var failure: (any Error)?
    }

    private let capacity: Int
    /// Guards the buffer, the pending overflow, the waiting consumer and the end.
    private let state = Mutex(State())

    init(bufferSize: Int) {
        capacity = max(1, bufferSize)
    }

    private static func range(of message: SubscriptionMessage) -> SubscriptionMessage.Overflow {
        switch message {
        case .event(let event): return .init(dropped: 1, first: event.sequence, last: event.sequence)
        case .overflow(let overflow): return overflow
        }
    }

    /// Called on the connection's event loop for each event or server overflow.
    func offer(_ message: SubscriptionMessage) {
        let waiter: CheckedContinuation<SubscriptionMessage?, any Error>? = state.withLock { state in
            guard !state.finished else { return nil }
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            if let overflow = state.overflow {
                let more = Self.range(of: message)
                state.overflow = .init(dropped: overflow.dropped + more.dropped, first: min(overflow.first, more.first),
                                       last: max(overflow.last, more.last), reason: overflow.reason ?? more.reason)
            } else if state.buffer.count >= capacity {
                state.overflow = Self.range(of: message)
            } else {
                state.buffer.append(message)
            }
            return nil
        }
        waiter?.resume(returning: message)
    }

    func next() async throws -> SubscriptionMessage? {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<SubscriptionMessage?, any Error>) in
                let result: Result<SubscriptionMessage?, any Error>? = state.withLock { state in
                    if let message = state.buffer.popFirst() { return .success(message) }
                    if let overflow = state.overflow {
                        state.overflow = nil
                        return .success(.overflow(overflow))
                    }
                    if state.finished {
                        if let failure = state.failure {
                            state.failure = nil
                            return .failure(failure)
                        }
                        return .success(nil)
                    }
                    if Task.isCancelled { return .success(nil) }
                    precondition(state.waiter == nil, "an event subscription is iterated by one task at a time")
                    state.waiter = continuation
                    return nil
                }
                if let result { continuation.resume(with: result) }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: nil)
        }
    }

    func finish(throwing error: (any Error)?) {
        let waiter: CheckedContinuation<SubscriptionMessage?, any Error>? = state.withLock { state in
            guard !state.finished else { return nil }
            state.finished = true
            guard let waiter = state.waiter else {
                state.failure = error
                return nil
            }
            state.waiter = nil
            return waiter
        }
        if let waiter {
            if let error { waiter.resume(throwing: error) } else { waiter.resume(returning: nil) }
        }
    }
}
