import Foundation
import SystemPackage
import Testing
import CoordFSProtocol

/// What the server writes, pinned byte for byte: every push, error reply and attribute value
/// comes from CoordFSProtocol, and the server's shortcut for events (one encoding framed for
/// every subscriber) writes what the Codable path writes.
@Suite struct ProtocolServerLineTests {
    static let notUTF8 = WirePath.path(Array("/d/bad".utf8) + [0xFF, 0xFE] + Array("name".utf8))!

    static let events: [EventRecord] = [
        EventRecord(sequence: 1, kind: .created, path: "/docs/a b.txt", directory: false,
                   origin: .init(pid: 4711, uid: 1000, process: "vim"), size: 0, time: 1_795_227_750.4915414),
        EventRecord(sequence: 2, kind: .moved, path: "/d", destination: notUTF8, directory: true,
                   origin: .init(pid: 5, uid: 6, process: "mv"), time: 1_700_000_000),
        EventRecord(sequence: 944, kind: .changed, path: notUTF8, directory: false,
                   origin: .init(pid: nil, uid: nil, process: nil, outside: true), size: 2210, time: 1_795_227_751.0031),
        EventRecord(sequence: .max, kind: .conflict, path: "/q\"\\\n", destination: "/kept", directory: false,
                   origin: .init(pid: 7012, uid: 1000, process: "vim", host: .init(id: 3, name: "build-07")), time: 0.5),
    ]

    @Test(arguments: events, [UInt64(1), 4096, .max])
    func aFramedEventIsTheCodablePush(event: EventRecord, subscription: UInt64) throws {
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

    @Test func anErrorReplyIsItsCodableLine() throws {
        let blocker = ClaimHolderRecord(path: "/counter", mode: .exclusive, owner: .init(kind: .client, pid: 26201, session: 1), held: 0.00103)
        let replies = [ErrorReply(id: .number(6), error: .init(code: .conflict, message: "/counter is held", blockers: [blocker])),
                       ErrorReply(id: nil, error: .init(code: .badJSON, message: "not valid JSON")),
                       ErrorReply(id: .text("a"), error: .init(code: .limit, message: "too many connections"))]
        for reply in replies {
            #expect(reply.line == (try WireFormat.line(reply)))
        }
        #expect(String(decoding: replies[1].line, as: UTF8.self) == #"{"id":null,"error":{"code":"bad-json","message":"not valid JSON"}}"# + "\n")
    }

    /// A reply whose blockers JSON cannot hold still goes out, without them: the request gets
    /// its answer.
    @Test func anErrorReplyAlwaysGoesOut() throws {
        var blocker = ClaimHolderRecord(path: "/f", mode: .write, owner: .init(kind: .process, pid: 1), held: 0)
        blocker.held = .infinity
        let reply = ErrorReply(id: .number(3), error: .init(code: .timeout, message: "gave up", blockers: [blocker]))
        #expect(String(decoding: reply.line, as: UTF8.self) == #"{"id":3,"error":{"code":"timeout","message":"gave up"}}"# + "\n")
    }

    @Test(arguments: [FilePath("/"), FilePath("/docs/a b.txt"), notUTF8])
    func theControlAttributesValue(path: FilePath) throws {
        let location = ControlLocation(socket: "/run/coordfs/3f2a9c0d8e7b6a51.sock", path: path)
        let value = try location.attributeValue()
        #expect(ControlLocation(attributeValue: value) == location)
        #expect(try JSONDecoder().decode(ControlLocation.self, from: Data(value)) == location)
        if path == "/" {
            #expect(String(decoding: value, as: UTF8.self) == #"{"version":1,"socket":"/run/coordfs/3f2a9c0d8e7b6a51.sock","path":"/"}"#)
        }
    }
}
