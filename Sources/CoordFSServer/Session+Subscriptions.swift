import CoordFSCore
import Dispatch
import CoordFSProtocol
import SystemPackage
import Logging
import NIOCore

// A session's subscriptions: subscribe, unsubscribe, and pumping events to the client as
// its socket can take them.
extension Session {
    func subscribe(_ id: RequestID, _ body: Request.Subscribe) {
        guard subscriptions.count < context.options.maxSubscriptionsPerConnection else {
            return fail(id, .limit, "at most \(context.options.maxSubscriptionsPerConnection) subscriptions per connection")
        }
        if let refusal = overUserLimit(\.subscriptions, \.subscriptions, "subscriptions") { return fail(id, .limit, refusal) }
        let path: MountPath
        switch admit(body.path) {
        case .failure(let detail): return fail(id, detail)
        case .success(let admitted): path = admitted
        }
        let kinds = body.kinds.map { ChangeKindSet($0.map(ChangeKind.init)) } ?? .all
        guard kinds != [] else { return fail(id, .badRequest, "\"kinds\" is empty: nothing would ever come") }

        let wireID = context.makeSubscriptionID()
        let ready = context.ready
        let sessionID = self.id
        let events = context.hub.subscribe(to: path, recursive: body.recursive ?? false, kinds: kinds, since: body.since) {
            ready.announce(session: sessionID, subscription: wireID)
        }
        subscriptions[wireID] = Subscription(events: events, wireID: wireID)
        let answer: Request.Subscribe.Reply
        switch events.start {
        case .live(let after):
            answer = .init(subscription: wireID, path: path.filePath, sequence: after, replayed: 0, resync: false)
        case .replayed(let count, let through):
            answer = .init(subscription: wireID, path: path.filePath, sequence: through, replayed: count, resync: false)
        case .resync(_, let current):
            answer = .init(subscription: wireID, path: path.filePath, sequence: current, replayed: 0, resync: true)
        }
        reply(id, answer)
        pump(wireID)
    }

    func unsubscribe(_ id: RequestID, _ body: Request.Unsubscribe) {
        guard let subscription = subscriptions.removeValue(forKey: body.subscription) else {
            return fail(id, .notFound, "no subscription \(body.subscription) on this connection")
        }
        subscription.events.cancel()
        reply(id, Empty())
    }

    /// Moves queued events of one subscription to the socket, while the socket takes them.
    /// Each batch goes out as one buffer and one write: with many subscribers, the per-event
    /// cost is a copy of the shared encoding.
    func pump(_ wireID: UInt64) {
        guard !isClosed, var subscription = subscriptions[wireID] else { return }
        while true {
            guard channel.isWritable else {
                subscription.blocked = true
                break
            }
            let batch = subscription.events.next(upTo: 256)
            var buffer = channel.allocator.buffer(capacity: batch.events.count * 320)
            for event in batch.events {
                append(event, framed: subscription.frame, to: &buffer)
            }
            if let overflow = batch.overflow,
               let line = try? WireFormat.line(Push.overflow(OverflowPush(subscription: wireID, marker: OverflowMarker(overflow)))) {
                buffer.writeBytes(line)
            }
            if buffer.readableBytes > 0 {
                channel.write(buffer, promise: nil)
                needsFlush = true
            }
            if !batch.hasMore {
                subscription.blocked = false
                break
            }
        }
        subscriptions[wireID] = subscription
        flush()
    }

    /// Resumes subscriptions that stopped on a full socket.
    func writabilityChanged() {
        guard channel.isWritable else { return }
        for (wireID, subscription) in subscriptions where subscription.blocked {
            pump(wireID)
        }
    }

    /// Adds one event as this user may see it: a move seen from one side only is told as a
    /// creation or a deletion there.
    func append(_ event: ChangeEvent, framed frame: EventPushFrame, to buffer: inout ByteBuffer) {
        var told = event
        var retold = false
        if !gate.seesEverything {
            let source = gate.mayLearnAbout(event.path)
            if event.kind == .moved, let destination = event.destination {
                switch (source, gate.mayLearnAbout(destination)) {
                case (true, true): break
                case (true, false): told = event.retold(as: .deleted, path: event.path); retold = true
                case (false, true): told = event.retold(as: .created, path: destination); retold = true
                case (false, false): return
                }
            } else if !source {
                return
            }
        }
        func writeFramed(_ json: borrowing [UInt8]) {
            guard !json.isEmpty else { return }
            frame.write(around: json) { buffer.writeBytes($0) }
        }
        if retold {
            writeFramed(EventRecord.json(of: told))
        } else {
            context.withEventJSON(event, writeFramed)
        }
    }
}
