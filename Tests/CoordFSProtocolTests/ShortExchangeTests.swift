import Foundation
import SystemPackage
import Testing
import CoordFSProtocol

/// A path of any bytes (FilePath's string initialiser would repair what is not UTF-8).
private func path(_ bytes: [UInt8]) -> FilePath {
    WirePath.path(bytes)!
}

private let notUTF8 = path(Array("/d/bad".utf8) + [0xff, 0xfe] + Array("name".utf8))

/// `ShortExchange` writes what `WireFormat` writes and reads what Codable reads.
@Suite struct ShortExchangeTests {
    @Test(arguments: [Request.Hello(version: 1, client: "coordfs exec"), Request.Hello(version: 1),
                      Request.Hello(version: 2, client: "quote \" backslash \\ newline \n é")])
    func helloLinesAreWireFormatsLines(hello: Request.Hello) throws {
        #expect(ShortExchange.line(id: 1, hello: hello) == (try WireFormat.line(RequestEnvelope(id: .number(1), request: .hello(hello)))))
    }

    @Test(arguments: [
        Request.Claim(write: ["/f"]),
        Request.Claim(read: ["/a", "/b c"], write: ["/d/é"], wait: 2.5),
        Request.Claim(read: ["/r"], wait: 30),
        Request.Claim(write: ["/w"], wait: 0.000_123),
        Request.Claim(write: ["/w"], nonblock: true),
        Request.Claim(read: [notUTF8, "/plain"], write: [notUTF8]),
        Request.Claim(read: [], write: ["/w"]),
    ])
    func claimLinesAreWireFormatsLines(claim: Request.Claim) throws {
        let expected = try WireFormat.line(RequestEnvelope(id: .number(12), request: .claim(claim)))
        let line = try #require(ShortExchange.line(id: 12, claim: claim))
        #expect(String(decoding: line, as: UTF8.self) == String(decoding: expected, as: UTF8.self))
    }

    @Test func aWaitJSONCannotHoldIsRefused() {
        #expect(ShortExchange.line(id: 1, claim: .init(write: ["/w"], wait: .infinity)) == nil)
    }

    @Test(arguments: [FilePath("/"), FilePath("/docs/a b.txt"), notUTF8])
    func locationsReadAsCodableReadsThem(path: FilePath) throws {
        let original = ControlLocation(socket: "/run/coordfs/3f2a9c0d8e7b6a51.sock", path: path)
        let json = try original.attributeValue()
        #expect(ControlLocation(attributeValue: json) == original)
        #expect(ControlLocation(attributeValue: json) == (try JSONDecoder().decode(ControlLocation.self, from: Data(json))))
    }

    @Test(arguments: ["", "{}", #"{"version":1,"socket":"/s"}"#, #"{"version":1,"socket":"/s","path":"/a\u0000b"}"#,
                      #"{"version":1,"socket":"/s","path":"/a","pathBytes":"not base64!"}"#, #"{"version":"1","socket":"/s","path":"/"}"#,
                      #"{"version":1,"socket":"/s","path":"/"} trailing"#])
    func aLocationThatIsNotOneIsNil(text: String) {
        #expect(ControlLocation(attributeValue: Array(text.utf8)) == nil)
    }

    @Test(arguments: [
        Request.Claim.Reply(claim: 1, read: [], write: ["/counter"], waited: 5.3961e-05),
        Request.Claim.Reply(claim: 9, read: ["/a", notUTF8], write: [], waited: 2),
    ])
    func claimRepliesReadAsCodableReadsThem(reply: Request.Claim.Reply) throws {
        let line = try WireFormat.line(OkReply(id: .number(2), ok: reply))
        guard case .ok(let id, let body)? = ShortExchange.message(line) else {
            Issue.record("not read as a reply: \(String(decoding: line, as: UTF8.self))")
            return
        }
        #expect(id == .number(2))
        #expect(ShortExchange.claimReply(body) == reply)
    }

    @Test func errorsAndPushesAreTold() throws {
        let conflict = #"{"id":6,"error":{"code":"conflict","message":"/counter is held (exclusive) by session 1 (pid 26201) for 0.0 s (asked not to wait)","blockers":[{"path":"/counter","mode":"exclusive","owner":{"kind":"client","pid":26201,"session":1},"held":0.001030392}]}}"#
        guard case .error(let id, let detail)? = ShortExchange.message(Array(conflict.utf8)) else {
            Issue.record("not read as an error")
            return
        }
        #expect(id == .number(6) && detail.code == .conflict && detail.blockers?.count == 1)
        #expect(detail.message.hasPrefix("/counter is held"))
        guard case .error(nil, _)? = ShortExchange.message(Array(#"{"id":null,"error":{"code":"bad-json","message":"x"}}"#.utf8)) else {
            Issue.record("an error without an id not read")
            return
        }
        guard case .push(let bye)? = ShortExchange.message(Array(#"{"push":"bye","reason":"the mount is stopping"}"#.utf8)),
              case .push(nil)? = ShortExchange.message(Array(#"{"push":"event","subscription":1,"event":{}}"#.utf8)) else {
            Issue.record("pushes not read")
            return
        }
        #expect(bye == "the mount is stopping")
        guard case .ok(.text("a"), _)? = ShortExchange.message(Array(#"{"id":"a","ok":{}}"#.utf8)) else {
            Issue.record("a text id not read")
            return
        }
        #expect(ShortExchange.message(Array("not json".utf8)) == nil)
        #expect(ShortExchange.message(Array(#"{"id":1}"#.utf8)) == nil)
    }

    @Test func jsonValuesParseAsJSONSays() throws {
        let text = #" {"s":"a\"b\\c\/d\n\t\u00e9\ud83d\ude00","n":[-1.5e3,0,12],"t":true,"f":false,"z":null,"o":{},"a":[]} "#
        let value = try #require(JSONValue.parse(Array(text.utf8)))
        #expect(value["s"]?.string == "a\"b\\c/d\n\té😀")
        #expect(value["n"]?.array?.compactMap(\.double) == [-1500, 0, 12])
        #expect(value["n"]?.array?.last?.uint64 == 12)
        if case .bool(true)? = value["t"], case .bool(false)? = value["f"], case .null? = value["z"] {} else {
            Issue.record("literals misread")
        }
        #expect(value["o"]?["missing"] == nil && value["a"]?.array?.isEmpty == true)
        let deep = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        for bad in ["", "{", #"{"a":}"#, #"{"a":1,}"#, "[1 2]", "+1", ".5", "-", "1.", #""\x""#, "\"\u{1}\"", #""\ud83d""#, "tru", "nul", deep, "{} {}"] {
            #expect(JSONValue.parse(Array(bad.utf8)) == nil, "\(bad)")
        }
    }
}
