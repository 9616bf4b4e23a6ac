import Foundation
import SystemPackage
import Testing
import CoordFSProtocol

/// What the server writes, pinned byte for byte: the server's shortcut for events (one
/// encoding framed for every subscriber) writes what the Codable path writes.
@Suite struct ProtocolServerLineTests {
    static let notUTF8 = WirePath.path(Array("/d/bad".utf8) + [0xFF, 0xFE] + Array("name".utf8))!

    static let events: [WatchEvent] = [
        WatchEvent(sequence: 1, kind: .created, path: "/docs/a b.txt", directory: false,
                   origin: .init(pid: 4711, uid: 1000, process: "vim"), size: 0, time: 1_795_227_750.4915414),
        WatchEvent(sequence: 2, kind: .moved, path: "/d", destination: notUTF8, directory: true,
                   origin: .init(pid: 5, uid: 6, process: "mv"), time: 1_700_000_000),
        WatchEvent(sequence: 944, kind: .changed, path: notUTF8, directory: false,
                   origin: .init(pid: nil, uid: nil, process: nil, outside: true), size: 2210, time: 1_795_227_751.0031),
        WatchEvent(sequence: .max, kind: .conflict, path: "/q\"\\\n", destination: "/kept", directory: false,
                   origin: .init(pid: 7012, uid: 1000, process: "vim", host: .init(id: 3, name: "build-07")), time: 0.5),
    ]

    @Test(arguments: events, [UInt64(1), 4096, .max])
    func aFramedEventIsTheCodablePush(event: WatchEvent, subscription: UInt64) throws {
        var framed: [UInt8] = []
        EventPushFrame(subscription: subscription).write(around: try JSONLineEncoder().encode(event)) { framed += $0 }
        let push = Push.event(EventPush(subscription: subscription, event: event))
        #expect(String(decoding: framed, as: UTF8.self) == String(decoding: try WireFormat.line(push), as: UTF8.self))
        guard case .push(let decoded) = try ServerLine.classify(framed.dropLast()) else {
            Issue.record("not read as a push")
            return
        }
        #expect(decoded == push)
    }

    /// Docs/PROTOCOL.md's two markers, exactly.
    @Test func overflowMarkersWithAndWithoutAReason() throws {
        let full = Push.overflow(OverflowPush(subscription: 1, marker: .init(dropped: 812, first: 131, last: 942)))
        let backing = Push.overflow(OverflowPush(subscription: 1, marker: .init(dropped: 0, first: 943, last: 942, reason: .backing)))
        let lines = [(full, #"{"push":"overflow","subscription":1,"dropped":812,"first":131,"last":942}"#),
                     (backing, #"{"push":"overflow","subscription":1,"dropped":0,"first":943,"last":942,"reason":"backing"}"#)]
        for (push, documented) in lines {
            #expect(String(decoding: try WireFormat.line(push), as: UTF8.self) == documented + "\n")
            guard case .push(let decoded) = try ServerLine.classify(Array(documented.utf8)) else {
                Issue.record("not read as a push: \(documented)")
                continue
            }
            #expect(decoded == push)
        }
        #expect(OverflowReason.allCases.map(\.rawValue) == ["backing"])
    }
}
