import DequeModule

/// The events a new subscription may replay, bounded by count and by the bytes they keep.
///
/// An event as published holds its paths as arrays of names (32 bytes a component, whatever
/// the name's length), shared with every subscriber's queue while they hold it. Once only the
/// history keeps it, that is most of what it costs: 20 levels deep, a move kept two such
/// arrays, about 2 KiB. The history keeps each event as the bytes its paths name instead, and
/// counts them: what an event keeps follows the length of its paths, and the whole follows
/// `maxBytes`, oldest out first.
///
/// Not Sendable: the event hub's state, used under its lock.
struct EventHistory {
    let maxEvents: Int
    let maxBytes: Int
    private var events: Deque<StoredEvent> = []
    /// What the kept events hold, as `StoredEvent.footprint` counts it.
    private(set) var bytes = 0

    init(maxEvents: Int, maxBytes: Int) {
        self.maxEvents = maxEvents
        self.maxBytes = maxBytes
    }

    var count: Int { events.count }

    /// The oldest sequence number kept; nil while empty.
    var oldest: UInt64? { events.first?.sequence }

    mutating func append(_ event: ChangeEvent) {
        let stored = StoredEvent(event)
        events.append(stored)
        bytes += stored.footprint
        while events.count > maxEvents || (bytes > maxBytes && events.count > 1) {
            bytes -= events.removeFirst().footprint
        }
    }

    /// The events after `sequence`, oldest first; `sequence` must be at least `oldest - 1`.
    func events(after sequence: UInt64) -> some Sequence<ChangeEvent> {
        let start = events.first.map { Int(clamping: sequence + 1 - min(sequence + 1, $0.sequence)) } ?? 0
        return events[min(start, events.count)...].lazy.map(\.event)
    }
}

/// A change event as the history keeps it (see `EventHistory`).
struct StoredEvent {
    let sequence: UInt64
    let kind: ChangeKind
    let path: [UInt8]
    let destination: [UInt8]?
    let isDirectory: Bool
    let origin: EventOrigin
    let size: Int64?
    let time: EventTime
    let version: Int64?

    init(_ event: ChangeEvent) {
        version = event.version
        sequence = event.sequence
        kind = event.kind
        path = event.path.bytes
        destination = event.destination?.bytes
        isDirectory = event.isDirectory
        origin = event.origin
        size = event.size
        time = event.time
    }

    /// The event again, as published.
    var event: ChangeEvent {
        ChangeEvent(sequence: sequence, kind: kind, path: MountPath(bytes: path) ?? .root,
                    destination: destination.flatMap { MountPath(bytes: $0) }, isDirectory: isDirectory,
                    origin: origin, size: size, time: time, version: version)
    }

    /// The bytes it keeps: its own fields, and the storage of its arrays and strings (each
    /// heap allocation counted with a 32-byte header).
    var footprint: Int {
        var total = MemoryLayout<StoredEvent>.stride + 32 + path.count
        if let destination { total += 32 + destination.count }
        if origin.processName.utf8.count > 15 { total += 32 + origin.processName.utf8.count }
        if let host = origin.host { total += 32 + host.name.utf8.count }
        return total
    }
}
