import CoordFSCore
import CoordFSProtocol
@testable import CoordFSServer
import Testing

/// The one mapping between the core's types and the wire's (Conversions.swift).
@Suite struct ServerConversionTests {
    /// Every wire case stands for exactly one core case, and comes back as it went.
    func isOneForOne<Wire: WireMirror & Hashable>(_: Wire.Type) where Wire.Core: Equatable {
        let mirrored = Wire.Core.allCases.map(Wire.init)
        #expect(Set(mirrored) == Set(Wire.allCases) && mirrored.count == Wire.allCases.count, "\(Wire.self)")
        for core in Wire.Core.allCases {
            #expect(Wire.Core(Wire(core)) == core)
        }
    }

    @Test func theMirroredKindsAreOneForOne() {
        isOneForOne(EventKind.self)
        isOneForOne(AskKind.self)
        isOneForOne(NoticeKind.self)
        isOneForOne(ClaimModeName.self)
    }

    @Test func anOverflowSaysWhyOnlyWhenTheBackingWasLost() {
        #expect(OverflowMarker(EventOverflow(firstDropped: 131, lastDropped: 942, dropped: 812))
                    == OverflowMarker(dropped: 812, first: 131, last: 942))
        #expect(OverflowMarker(EventOverflow(firstDropped: 943, lastDropped: 942, dropped: 0, backingLost: true))
                    == OverflowMarker(dropped: 0, first: 943, last: 942, reason: .backing))
    }

    /// The JSON the server caches per event is the wire event's, and frames into the push a
    /// client reads back as that event.
    @Test func aCoreEventFramesIntoItsPush() throws {
        let event = ChangeEvent(sequence: 7, kind: .moved, path: MountPath(bytes: Array("/a".utf8))!,
                                destination: MountPath(bytes: Array("/b".utf8) + [0xFF])!, isDirectory: false,
                                origin: EventOrigin(pid: 0, uid: EventOrigin.unknownUID, processName: "", isOutside: true),
                                size: nil, time: EventTime(nanosecondsSince1970: 1_700_000_000_250_000_000))
        var line: [UInt8] = []
        EventPushFrame(subscription: 3).write(around: EventRecord.json(of: event)) { line += $0 }
        guard case .push(.event(let push)) = try ServerLine.classify(line) else {
            Issue.record("not an event push: \(String(decoding: line, as: UTF8.self))")
            return
        }
        #expect(push == EventPush(subscription: 3, event: EventRecord(event)))
        #expect(push.event.origin == .init(pid: nil, uid: nil, process: nil, outside: true))
    }
}
