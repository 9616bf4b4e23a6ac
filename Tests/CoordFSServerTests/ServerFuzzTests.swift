import CoordFSServer
import Dispatch
import Foundation
import Glibc
import Synchronization
import Testing

/// SplitMix64: a seeded generator, so a failing run can be replayed.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}

/// Lines that are each certain to be refused: never a valid request that could succeed.
struct GarbageLines {
    var random: SeededGenerator
    /// Requests that fail on their own terms; a one-byte change cannot make them succeed.
    let failing = [
        #"{"id":1,"op":"unsubscribe","subscription":999999}"#,
        #"{"id":2,"op":"release","claim":999999}"#,
        #"{"id":3,"op":"unpresent","presenter":999999}"#,
        #"{"id":4,"op":"answer","presenter":999999,"request":1,"verdict":"ok"}"#,
        #"{"id":5,"op":"subscribe","path":"/no/such/dir/x","recursive":true}"#,
        #"{"id":6,"op":"claim","write":["/no/such/dir/x"],"wait":-1}"#,
        #"{"id":7,"op":"present","path":"/no/such/dir/x","answers":["save"]}"#,
        #"{"id":8,"op":"hello","version":1}"#,
    ]

    mutating func next() -> [UInt8] {
        var line: [UInt8]
        switch Int.random(in: 0..<10, using: &random) {
        case 0:  // printable noise
            line = (0..<Int.random(in: 1...200, using: &random)).map { _ in UInt8.random(in: 0x20...0x7e, using: &random) }
        case 1:  // any bytes but a newline
            line = (0..<Int.random(in: 1...100, using: &random)).map { _ in
                let byte = UInt8.random(in: 0...255, using: &random)
                return byte == 0x0a ? 0x0b : byte
            }
        case 2:  // a request cut short
            let whole = Array(failing.randomElement(using: &random)!.utf8)
            line = Array(whole.prefix(Int.random(in: 1..<whole.count, using: &random)))
        case 3:  // one byte changed
            line = Array(failing.randomElement(using: &random)!.utf8)
            let replacement = UInt8.random(in: 0...255, using: &random)
            line[Int.random(in: 0..<line.count, using: &random)] = replacement == 0x0a ? 0x00 : replacement
        case 4:  // well-formed, wrong types
            let op = ["subscribe", "present", "claim", "answer", "release", "unsubscribe", "cancel"].randomElement(using: &random)!
            let value = ["42", "true", "null", "[1]", "{\"a\":{}}", "-0.5e9", "\"\""].randomElement(using: &random)!
            let field = ["path", "subscription", "presenter", "write", "request", "claim", "verdict"].randomElement(using: &random)!
            line = Array(#"{"id":\#(Int.random(in: 0...1_000_000, using: &random)),"op":"\#(op)","\#(field)":\#(value)}"#.utf8)
            if op == "cancel" && field == "request" { line = Array(#"{"id":9,"op":"cancel","request":[]}"#.utf8) }
        case 5:  // unknown operations
            let word = String((0..<Int.random(in: 1...12, using: &random)).map { _ in Character(Unicode.Scalar(UInt8.random(in: 97...122, using: &random))) })
            line = Array(#"{"id":"x","op":"\#(word)z"}"#.utf8)
        case 6:  // JSON that is not an object
            line = Array(["0", "-1.5", "[]", "[{\"id\":1}]", "\"status\"", "null", "true", "1e400"].randomElement(using: &random)!.utf8)
        case 7:  // deep nesting
            let depth = Int.random(in: 600...3000, using: &random)
            line = Array(repeating: UInt8(ascii: "["), count: depth) + Array(repeating: UInt8(ascii: "]"), count: depth)
        case 8:  // invalid UTF-8 inside a string
            line = Array(#"{"id":1,"op":"subscribe","path":"/"#.utf8) + [0xc3, 0x28, 0xff] + Array(#""}"#.utf8)
        default:  // a missing id or op
            line = Array([#"{"op":"status"}"#, #"{"id":1}"#, #"{"id":null,"op":"status"}"#, #"{}"#].randomElement(using: &random)!.utf8)
        }
        // Blank lines are ignored by design; make sure every line is something.
        while let last = line.last, last == 0x0d { line.removeLast() }
        if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { line.insert(UInt8(ascii: "?"), at: 0) }
        return line
    }
}

@Suite(.serialized) struct ServerFuzzTests {
    @Test func oneHundredThousandBadLinesEachGetAnErrorAndTheServerLivesOn() throws {
        try withServer { fixture in
            let client = try fixture.connect()
            let count = 100_000
            let oversized = 3
            var generator = GarbageLines(random: SeededGenerator(state: 0xC0FFEE))
            var payload: [UInt8] = []
            payload.reserveCapacity(count * 80)
            for index in 0..<count {
                if index % (count / oversized) == 17 {
                    payload += Array(repeating: UInt8(ascii: "x"), count: (1 << 20) + 4096)
                } else {
                    payload += generator.next()
                }
                payload.append(0x0a)
            }
            // Write from another thread while this one reads, as any client must.
            let writeError = Mutex<String?>(nil)
            let done = DispatchSemaphore(value: 0)
            let fd = client.fd
            DispatchQueue.global().async { [payload] in
                var offset = 0
                while offset < payload.count {
                    let sent = payload.withUnsafeBytes { send(fd, $0.baseAddress! + offset, min(65_536, payload.count - offset), Int32(MSG_NOSIGNAL)) }
                    if sent < 0 {
                        if errno == EINTR { continue }
                        writeError.withLock { $0 = String(cString: strerror(errno)) }
                        break
                    }
                    offset += sent
                }
                done.signal()
            }
            var codes: [String: Int] = [:]
            var nonErrors: [String] = []
            for _ in 0..<count {
                let reply = try client.readJSON(timeout: .seconds(60))
                if let code = reply.errorCode {
                    codes[code, default: 0] += 1
                } else {
                    nonErrors.append("\(reply)")
                }
            }
            done.wait()
            #expect(writeError.withLock { $0 } == nil)
            #expect(nonErrors.isEmpty, "not errors: \(nonErrors.prefix(5))")
            #expect(codes["too-large"] == oversized)
            #expect(codes.values.reduce(0, +) == count)
            for code in ["bad-json", "bad-request", "unknown-request", "not-found", "no-such-path", "invalid-path"] {
                #expect((codes[code] ?? 0) > 0, "no \(code) among \(codes)")
            }
            // Still the same connection, still answering.
            let status = try client.request(#"{"id":"end","op":"status"}"#)
            #expect(status.ok != nil)
        }
    }

    @Test func freshConnectionsThatMisbehaveLeaveTheServerServing() throws {
        try withServer { fixture in
            var generator = GarbageLines(random: SeededGenerator(state: 42))
            for round in 0..<200 {
                let client = try LineClient(socketPath: fixture.socketPath)
                switch round % 4 {
                case 0:  // garbage before hello, read the answers
                    for _ in 0..<3 { try client.send(generator.next() + [0x0a]) }
                    for _ in 0..<3 { #expect(try client.readJSON().errorCode != nil) }
                case 1:  // half a line, then gone
                    try client.send(Array(#"{"id":1,"op":"hel"#.utf8))
                case 2:  // a flood nobody reads, then gone
                    try client.send(Array(repeating: generator.next() + [0x0a], count: 50).flatMap { $0 })
                default:  // hello, a claim and a subscription, then gone without a word
                    _ = try client.request(#"{"id":1,"op":"hello","version":1}"#)
                    try client.send(#"{"id":2,"op":"claim","write":["/r\#(round)"]}"#)
                    try client.send(#"{"id":3,"op":"subscribe","path":"/","recursive":true}"#)
                }
            }
            #expect(fixture.eventually(within: .seconds(10)) { fixture.server.connectionCount() == 0 })
            #expect(fixture.eventually { fixture.claims.snapshot().holders.isEmpty })
            #expect(fixture.hub.statistics().subscribers == 0)
            let survivor = try fixture.connect()
            #expect(try survivor.request(#"{"id":1,"op":"status"}"#).ok != nil)
        }
    }

    @Test func tooManyConnectionsAreToldSo() throws {
        var options = ControlServer.Options()
        options.maxConnections = 3
        try withServer(options: options) { fixture in
            let clients = try (0..<3).map { _ in try fixture.connect() }
            let extra = try LineClient(socketPath: fixture.socketPath)
            #expect(try extra.readJSON().errorCode == "limit")
            #expect(extra.isClosedByServer())
            #expect(try clients[0].request(#"{"id":1,"op":"status"}"#).ok != nil)
        }
    }
}
