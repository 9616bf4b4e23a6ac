import Foundation
import SystemPackage
import Testing
import CoordFSProtocol

private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

private func decode(_ text: String) -> Result<RequestEnvelope, RequestRejection> {
    WireFormat.decodeRequest(bytes(text))
}

private func rejection(_ text: String) -> RequestRejection? {
    if case .failure(let rejection) = decode(text) { return rejection }
    return nil
}

private func roundTrip(_ envelope: RequestEnvelope) throws -> RequestEnvelope {
    let line = try WireFormat.line(envelope)
    #expect(line.last == UInt8(ascii: "\n"))
    #expect(!line.dropLast().contains(UInt8(ascii: "\n")))
    return try decode(String(decoding: line.dropLast(), as: UTF8.self)).get()
}

@Suite struct ProtocolMessageTests {
    @Test func everyRequestSurvivesARoundTrip() throws {
        let requests: [Request] = [
            .hello(.init(version: 1, client: "test")),
            .subscribe(.init(path: "/a b/ü", recursive: true, kinds: [.created, .moved], since: 42)),
            .subscribe(.init(path: "/")),
            .unsubscribe(.init(subscription: 7)),
            .present(.init(path: "/doc", answers: [.save, .accommodateDeletion])),
            .answer(.init(presenter: 2, request: 9, verdict: .refuse, reason: "busy")),
            .unpresent(.init(presenter: 2)),
            .claim(.init(read: ["/r"], write: ["/w1", "/w2"], wait: 2.5)),
            .claim(.init(write: ["/w"], nonblock: true)),
            .release(.init(claim: 3)),
            .cancel(.init(request: .text("claim-1"))),
            .status(.init()),
        ]
        for (index, request) in requests.enumerated() {
            let envelope = RequestEnvelope(id: index % 2 == 0 ? .number(Int64(index)) : .text("r\(index)"), request: request)
            #expect(try roundTrip(envelope) == envelope)
        }
    }

    @Test func handWrittenRequestsDecode() throws {
        let envelope = try decode(#"{"id":1,"op":"subscribe","path":"/docs","recursive":true,"kinds":["changed"]}"#).get()
        #expect(envelope.id == .number(1))
        #expect(envelope.request == .subscribe(.init(path: "/docs", recursive: true, kinds: [.changed])))
        // Unknown fields are ignored, so newer clients can talk to older servers.
        let status = try decode(#"{"op":"status","id":"s","future":[1,2]}"#).get()
        #expect(status.request == .status(.init()))
    }

    @Test func eachKindOfBadLineGetsItsCode() {
        #expect(rejection("not json")?.code == .badJSON)
        #expect(rejection("{\"id\":1,")?.code == .badJSON)
        #expect(rejection("[1,2,3]")?.code == .badJSON)
        #expect(rejection("\"text\"")?.code == .badJSON)
        #expect(rejection("{}")?.code == .badRequest)
        #expect(rejection(#"{"id":1.5,"op":"status"}"#)?.code == .badRequest)
        #expect(rejection(#"{"id":{"a":1},"op":"status"}"#)?.code == .badRequest)
        #expect(rejection(#"{"op":"status"}"#)?.code == .badRequest)
        #expect(rejection(#"{"id":3}"#)?.code == .badRequest)
        #expect(rejection(#"{"id":3,"op":7}"#)?.code == .badRequest)
        #expect(rejection(#"{"id":3,"op":"launch"}"#)?.code == .unknownRequest)
        #expect(rejection(#"{"id":3,"op":"launch"}"#)?.id == .number(3))

        let missing = rejection(#"{"id":4,"op":"subscribe"}"#)
        #expect(missing?.code == .badRequest && missing?.id == .number(4))
        #expect(missing?.message.contains("\"path\"") == true)
        let wrongType = rejection(#"{"id":5,"op":"subscribe","path":"/","recursive":"yes"}"#)
        #expect(wrongType?.message.contains("\"recursive\" must be true or false") == true)
        let badKind = rejection(#"{"id":6,"op":"subscribe","path":"/","kinds":["exploded"]}"#)
        #expect(badKind?.code == .badRequest && badKind?.message.contains("kinds[0]") == true)
        let badVerdict = rejection(#"{"id":7,"op":"answer","presenter":1,"request":2,"verdict":"maybe"}"#)
        #expect(badVerdict?.code == .badRequest)
    }

    @Test func deeplyNestedJSONIsRejectedNotFatal() {
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        #expect(rejection(deep)?.code == .badJSON)
        let deepObject = #"{"id":1,"op":"subscribe","path":"/","kinds":"# + deep + "}"
        #expect(rejection(deepObject) != nil)
    }

    @Test func invalidUTF8IsBadJSON() {
        var line = bytes(#"{"id":1,"op":"subscribe","path":"/"#)
        line += [0xff, 0xfe]
        line += bytes(#""}"#)
        if case .failure(let rejection) = WireFormat.decodeRequest(line) {
            #expect(rejection.code == .badJSON || rejection.code == .badRequest)
        } else {
            Issue.record("invalid UTF-8 was accepted")
        }
    }

    @Test func repliesAndPushesAreToldApart() throws {
        let ok = try WireFormat.line(OkReply(id: .number(3), ok: Request.Present.Reply(presenter: 1, path: "/a")))
        guard case .reply(let id, let error) = try ServerLine.classify(ok), error == nil else {
            Issue.record("not a reply")
            return
        }
        #expect(id == .number(3))
        #expect(try WireFormat.decodeReplyBody(Request.Present.Reply.self, from: ok).presenter == 1)

        let failure = try WireFormat.line(ErrorReply(id: nil, error: ErrorDetail(code: .badJSON, message: "nope")))
        #expect(String(decoding: failure, as: UTF8.self).hasPrefix(#"{"id":null,"#))
        guard case .reply(nil, let detail?) = try ServerLine.classify(failure) else {
            Issue.record("not an error reply")
            return
        }
        #expect(detail.code == .badJSON)

        let event = EventRecord(sequence: 9, kind: .moved, path: "/a", destination: "/b", directory: true,
                               origin: .init(pid: 5, uid: 6, process: "mv"), size: nil, time: 1_700_000_000.25)
        let pushes: [Push] = [
            .event(EventPush(subscription: 1, event: event)),
            .overflow(OverflowPush(subscription: 1, marker: .init(dropped: 10, first: 11, last: 20))),
            .overflow(OverflowPush(subscription: 1, marker: .init(dropped: 0, first: 21, last: 20, reason: .backing))),
            .ask(AskPush(presenter: 2, request: 3, kind: .accommodateDeletion, path: "/a/x", presented: "/a", requester: 77, timeout: 5)),
            .notify(NotifyPush(presenter: 2, kind: .didMove, path: "/a", destination: "/b", presented: "/b")),
            .bye(ByePush(reason: "stopping")),
        ]
        for push in pushes {
            let line = try WireFormat.line(push)
            #expect(!String(decoding: line, as: UTF8.self).contains("\"id\""))
            guard case .push(let decoded) = try ServerLine.classify(line) else {
                Issue.record("\(push.name) was not read as a push")
                continue
            }
            #expect(decoded == push)
        }
    }

    @Test func pathsKeepTheirSlashes() throws {
        let line = String(decoding: try WireFormat.line(RequestEnvelope(id: .number(1), request: .subscribe(.init(path: "/a/b")))), as: UTF8.self)
        #expect(line.contains(#""path":"/a/b""#))
    }

    @Test func linesAreCompactWithKeysInDeclaredOrder() throws {
        let request = RequestEnvelope(id: .number(1), request: .subscribe(.init(path: "/a/b", recursive: true)))
        #expect(String(decoding: try WireFormat.line(request), as: UTF8.self) == #"{"id":1,"op":"subscribe","path":"/a/b","recursive":true}"# + "\n")
        let event = EventRecord(sequence: 3, kind: .changed, path: "/f", directory: false,
                               origin: .init(pid: 9, uid: 0, process: "sh"), size: 12, time: 1_700_000_000.5)
        let push = String(decoding: try WireFormat.line(Push.event(EventPush(subscription: 1, event: event))), as: UTF8.self)
        #expect(push == #"{"push":"event","subscription":1,"event":{"sequence":3,"kind":"changed","path":"/f","directory":false,"origin":{"pid":9,"uid":0,"process":"sh"},"size":12,"time":1700000000.5}}"# + "\n")
    }

    /// Another host's event carries its host in the origin; a line without one (this mount's
    /// own, or from a server before clusters) reads with none.
    @Test func theOriginHostIsOptional() throws {
        let event = EventRecord(sequence: 4, kind: .changed, path: "/f", directory: false,
                               origin: .init(pid: 9, uid: 0, process: "sh", host: .init(id: 3, name: "build-07")), size: 12,
                               time: 1_700_000_000.5)
        let line = String(decoding: try WireFormat.line(Push.event(EventPush(subscription: 1, event: event))), as: UTF8.self)
        #expect(line.contains(#""origin":{"pid":9,"uid":0,"process":"sh","host":{"id":3,"name":"build-07"}}"#), "\(line)")
        guard case .push(.event(let decoded)) = try ServerLine.classify(Array(line.utf8)) else {
            Issue.record("not an event push")
            return
        }
        #expect(decoded.event.origin.host == .init(id: 3, name: "build-07"))
        let old = #"{"push":"event","subscription":1,"event":{"sequence":3,"kind":"changed","path":"/f","directory":false,"origin":{"pid":9,"uid":0,"process":"sh"},"size":12,"time":1700000000.5}}"#
        guard case .push(.event(let plain)) = try ServerLine.classify(Array(old.utf8)) else {
            Issue.record("not an event push")
            return
        }
        #expect(plain.event.origin.host == nil)
    }

    @Test func awkwardTextSurvivesEncoding() throws {
        let names = ["quote\"back\\slash", "new\nline\ttab\r", "\u{01}\u{1f}\u{7f}", "ünïcødé 🚀", "", "/"]
        for name in names {
            let envelope = RequestEnvelope(id: .text(name), request: .subscribe(.init(path: FilePath(name))))
            let line = try WireFormat.line(envelope)
            #expect(line.filter { $0 == UInt8(ascii: "\n") }.count == 1)
            #expect(try decode(String(decoding: line.dropLast(), as: UTF8.self)).get() == envelope)
        }
        #expect(throws: EncodingError.self) { try JSONLineEncoder().encode(Double.nan) }
        #expect(String(decoding: try JSONLineEncoder().encode([0.1, 2, -3.5e-7, 1e300]), as: UTF8.self) == "[0.1,2,-3.5e-07,1e+300]")
    }

    @Test func errorCodesAreKebabCaseWords() throws {
        let codes: [ErrorCode] = [.badJSON, .badRequest, .unknownRequest, .tooLarge, .helloRequired, .unsupportedVersion,
                                  .invalidPath, .notPermitted, .noSuchPath, .notFound, .conflict, .timeout, .cancelled,
                                  .limit, .closing, .internal]
        for code in codes {
            #expect(code.rawValue.allSatisfy { $0.isLowercase || $0 == "-" })
        }
        #expect(Set(codes).count == codes.count)
    }
}

/// Paths on the wire: a plain string when the path is UTF-8, else a stand-in string and the
/// exact bytes in base64 beside it (`pathBytes`, `readBytes`…); every byte string comes back.
@Suite struct ProtocolPathTests {
    static func path(_ bytes: [UInt8]) -> FilePath { WirePath.path(bytes)! }

    /// Byte strings worth trying: every byte a path may hold, alone and after a slash; invalid
    /// UTF-8 of every kind; valid non-ASCII text; and a path's repair beside the path.
    static let samples: [[UInt8]] = {
        var samples = (1...255).filter { $0 != 0x2F }.map { [UInt8(ascii: "/"), UInt8($0)] }
        samples += [
            Array("/bad".utf8) + [0xFF, 0xFE] + Array("name".utf8),
            Array("/bad\u{FFFD}\u{FFFD}name".utf8),
            [0x2F, 0xC3], [0x2F, 0xC3, 0x28], [0x2F, 0x80, 0xBF], [0x2F, 0xED, 0xA0, 0x80], [0x2F, 0xF4, 0x90, 0x80, 0x80],
            [0x2F, 0xC0, 0xAF], [0x2F, 0x64, 0x2F, 0xFF, 0x2F, 0xFE], Array("/日本/🎉".utf8), Array("/\"\\\n".utf8), [0x2F],
            [0x2F] + (0..<255).map { UInt8(0x80 + $0 % 0x7F) },
        ]
        return samples
    }()

    @Test(arguments: samples)
    func everyPathComesBackExactly(_ bytes: [UInt8]) throws {
        let wire = Self.path(bytes)
        #expect(WirePath.bytes(of: wire) == bytes)
        let isText = String(validating: bytes, as: UTF8.self) != nil
        let event = EventRecord(sequence: 1, kind: .moved, path: wire, destination: wire, directory: false,
                               origin: .init(pid: 1, uid: 0, process: "mv"), time: 0)
        let line = try WireFormat.line(Push.event(EventPush(subscription: 1, event: event)))
        let text = String(decoding: line, as: UTF8.self)
        #expect(text.contains("\"pathBytes\"") == !isText, "the bytes go beside the path exactly when it is not UTF-8")
        #expect(text.contains("\"destinationBytes\"") == !isText)
        guard case .push(.event(let decoded)) = try ServerLine.classify(line) else {
            Issue.record("not an event push")
            return
        }
        #expect(WirePath.bytes(of: decoded.event.path) == bytes)
        #expect(decoded.event.destination.map(WirePath.bytes(of:)) == bytes)

        let request = RequestEnvelope(id: .number(1), request: .claim(.init(read: [wire, "/plain"], write: [wire])))
        #expect(try roundTrip(request) == request)
        let reply = Request.Claim.Reply(claim: 1, read: ["/plain", wire], write: [wire], waited: 0)
        let replyLine = try WireFormat.line(OkReply(id: .number(1), ok: reply))
        #expect(try WireFormat.decodeReplyBody(Request.Claim.Reply.self, from: replyLine) == reply)
        let location = ControlLocation(socket: "/run/s.sock", path: wire)
        #expect(try JSONDecoder().decode(ControlLocation.self, from: Data(try JSONLineEncoder().encode(location))) == location)
    }

    @Test func theDocumentedForm() throws {
        let wire = Self.path(Array("/d/bad".utf8) + [0xFF, 0xFE] + Array("name".utf8))
        let line = String(decoding: try WireFormat.line(RequestEnvelope(id: .number(1), request: .subscribe(.init(path: wire)))), as: UTF8.self)
        #expect(line == #"{"id":1,"op":"subscribe","path":"/d/bad\#u{FFFD}\#u{FFFD}name","pathBytes":"L2QvYmFk//5uYW1l"}"# + "\n")
        let claim = String(decoding: try WireFormat.line(Request.Claim(read: ["/ok"], write: [wire, "/x"])), as: UTF8.self)
        #expect(claim == #"{"read":["/ok"],"write":["/d/bad\#u{FFFD}\#u{FFFD}name","/x"],"writeBytes":["L2QvYmFk//5uYW1l","L3g="]}"# + "\n")
    }

    @Test func requestsMayCarryOnlyTheBytes() throws {
        let envelope = try decode(#"{"id":1,"op":"subscribe","pathBytes":"L2QvYmFk//5uYW1l"}"#).get()
        let expected = Self.path(Array("/d/bad".utf8) + [0xFF, 0xFE] + Array("name".utf8))
        #expect(envelope.request == .subscribe(.init(path: expected)))
        // The bytes win over the stand-in; a stand-in alone is taken as the text it is.
        let both = try decode(#"{"id":2,"op":"present","path":"/anything","pathBytes":"L2QvYmFk//5uYW1l"}"#).get()
        #expect(both.request == .present(.init(path: expected)))
        let claim = try decode(#"{"id":3,"op":"claim","writeBytes":["L2E=","L/8="]}"#).get()
        #expect(claim.request == .claim(.init(write: ["/a", Self.path([0x2F, 0xFF])])))
    }

    @Test func badBytesFieldsAreRejected() {
        let notBase64 = rejection(#"{"id":1,"op":"subscribe","pathBytes":"***"}"#)
        #expect(notBase64?.code == .badRequest && notBase64?.id == .number(1))
        #expect(notBase64?.message.contains("pathBytes") == true)
        let nul = rejection(#"{"id":2,"op":"subscribe","pathBytes":"L2EAYg=="}"#)
        #expect(nul?.code == .invalidPath && nul?.id == .number(2))
        #expect(rejection(#"{"id":3,"op":"subscribe","path":"/a\u0000b"}"#)?.code == .invalidPath)
        #expect(rejection(#"{"id":4,"op":"claim","readBytes":"L2E="}"#)?.code == .badRequest)
    }
}

@Suite struct ProtocolLineFramerTests {
    func frames(_ framer: inout LineFramer) -> [LineFramer.Frame] {
        var result: [LineFramer.Frame] = []
        while let frame = framer.next() { result.append(frame) }
        return result
    }

    @Test func splitsOnNewlinesAcrossReads() {
        var framer = LineFramer(maxLineBytes: 100)
        framer.append(bytes("ab"))
        #expect(frames(&framer).isEmpty)
        framer.append(bytes("c\nde\r\n\nf"))
        #expect(frames(&framer) == [.line(bytes("abc")), .line(bytes("de")), .line([])])
        framer.append(bytes("g\n"))
        #expect(frames(&framer) == [.line(bytes("fg"))])
        #expect(framer.pendingBytes == 0)
    }

    @Test func anOversizedLineIsReportedOnceAndSkipped() {
        var framer = LineFramer(maxLineBytes: 10)
        framer.append(bytes("short\n"))
        framer.append(bytes(String(repeating: "x", count: 25)))
        let first = frames(&framer)
        #expect(first.first == .line(bytes("short")))
        guard case .tooLarge(let seen)? = first.last else {
            Issue.record("expected a too-large report, got \(first)")
            return
        }
        #expect(seen > 10)
        framer.append(bytes(String(repeating: "y", count: 1000)))
        #expect(frames(&framer).isEmpty)
        framer.append(bytes("zz\nnext\n"))
        #expect(frames(&framer) == [.line(bytes("next"))])
        #expect(framer.pendingBytes == 0)
    }

    @Test func aLineOfExactlyTheLimitPassesOneMoreDoesNot() {
        var framer = LineFramer(maxLineBytes: 4)
        framer.append(bytes("abcd\nabcde\nok\n"))
        #expect(frames(&framer) == [.line(bytes("abcd")), .tooLarge(bytes: 5), .line(bytes("ok"))])
    }

    @Test func manySmallLinesInOneReadStayLinear() {
        var framer = LineFramer(maxLineBytes: 1 << 20)
        let count = 200_000
        framer.append(Array(repeating: bytes("{}\n"), count: count).joined())
        var seen = 0
        while case .line = framer.next() { seen += 1 }
        #expect(seen == count)
        #expect(framer.pendingBytes == 0)
    }
}
