import Dispatch
import Glibc
import Synchronization

/// SplitMix64: a seeded generator, so a failing run can be replayed.
public struct SeededGenerator: RandomNumberGenerator {
    public var state: UInt64
    public init(state: UInt64) { self.state = state }
    public mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}

/// Lines that are each certain to be refused: never a valid request that could succeed.
public struct GarbageLines {
    var random: SeededGenerator

    public init(random: SeededGenerator) { self.random = random }

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

    public mutating func next() -> [UInt8] {
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


/// What a flood of garbage lines got back on one connection.
public struct GarbageOutcome {
    /// How many replies carried each error code.
    public var codes: [String: Int] = [:]
    /// Replies that were not errors (there must be none).
    public var nonErrors: [String] = []
    /// Why sending stopped early, if it did.
    public var writeError: String?

    /// Everything that is not as it must be after `count` lines, `oversized` of them too long:
    /// each line refused with exactly one error, the long ones as `too-large`, and every kind
    /// of refusal the generator aims at seen at least once. Empty when all is well.
    public func problems(count: Int, oversized: Int) -> [String] {
        var problems: [String] = []
        if let writeError { problems.append("sending stopped: \(writeError)") }
        if !nonErrors.isEmpty { problems.append("not errors: \(nonErrors.prefix(5))") }
        if codes["too-large"] != oversized { problems.append("too-large \(codes["too-large"] ?? 0) times, not \(oversized)") }
        let errors = codes.values.reduce(0, +)
        if errors != count { problems.append("\(errors) errors for \(count) lines") }
        for code in ["bad-json", "bad-request", "unknown-request", "not-found", "no-such-path", "invalid-path"] where (codes[code] ?? 0) == 0 {
            problems.append("no \(code) among \(codes)")
        }
        return problems
    }
}

extension LineClient {
    /// Sends `count` garbage lines (`oversized` of them longer than the 1 MiB line limit) from
    /// another thread while this one reads one reply per line, as any client must (a client
    /// that only writes would stall once the server's replies fill the socket).
    public func sendGarbage(count: Int, oversized: Int, seed: UInt64) throws -> GarbageOutcome {
        var generator = GarbageLines(random: SeededGenerator(state: seed))
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
        let writeError = Mutex<String?>(nil)
        let done = DispatchSemaphore(value: 0)
        let fd = self.fd
        DispatchQueue.global().async { [payload] in
            var offset = 0
            while offset < payload.count {
                let sent = payload.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, min(65_536, payload.count - offset), Int32(MSG_NOSIGNAL)) }
                if sent < 0 {
                    if errno == EINTR { continue }
                    writeError.withLock { $0 = String(cString: strerror(errno)) }
                    break
                }
                offset += sent
            }
            done.signal()
        }
        var outcome = GarbageOutcome()
        do {
            for _ in 0..<count {
                let reply = try readJSON(timeout: .seconds(60))
                if let code = reply.errorCode {
                    outcome.codes[code, default: 0] += 1
                } else {
                    outcome.nonErrors.append("\(reply)")
                }
            }
        } catch {
            shutdown(fd, Int32(SHUT_RDWR))  // the sender stops at once instead of blocking on a full socket
            done.wait()
            throw error
        }
        done.wait()
        outcome.writeError = writeError.withLock { $0 }
        return outcome
    }
}
