import CoordFSServer
import CoordFSTestSupport
import Foundation
import Glibc
import Testing

@Suite(.serialized) struct ServerFuzzTests {
    @Test func oneHundredThousandBadLinesEachGetAnErrorAndTheServerLivesOn() throws {
        try withServer { fixture in
            let client = try fixture.connect()
            let outcome = try client.sendGarbage(count: 100_000, oversized: 3, seed: 0xC0FFEE)
            #expect(outcome.problems(count: 100_000, oversized: 3).isEmpty, "\(outcome.problems(count: 100_000, oversized: 3))")
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

    /// A refused client that writes its hello after the server already answered (as every
    /// client does: hello first, then read) still reads why: the server closes only its
    /// sending side at once, so the hello meets an open socket rather than EPIPE.
    @Test func aRefusedClientThatWritesFirstStillReadsWhy() throws {
        var options = ControlServer.Options()
        options.maxConnections = 1
        try withServer(options: options) { fixture in
            let kept = try fixture.connect()
            let extra = try LineClient(socketPath: fixture.socketPath)
            usleep(300_000) // the refusal has gone out by now
            try extra.send(#"{"id":1,"op":"hello","version":1}"#)
            #expect(try extra.readJSON().errorCode == "limit")
            #expect(extra.isClosedByServer())
            #expect(try kept.request(#"{"id":2,"op":"status"}"#).ok != nil)
        }
    }

    /// Refused connections kept open by their clients are not all kept open by the server:
    /// past a bound, a refusal closes the whole socket at once, so opening connections faster
    /// than closing them costs the server (whose descriptors every user shares) little.
    @Test func refusedConnectionsLeftOpenCostTheServerABoundedNumberOfDescriptors() throws {
        var options = ControlServer.Options()
        options.maxConnections = 1
        try withServer(options: options) { fixture in
            let kept = try fixture.connect()
            func openDescriptors() -> Int { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0 }
            let before = openDescriptors()
            let refused = try (0..<200).map { _ in try LineClient(socketPath: fixture.socketPath) }
            for client in refused {
                #expect(try client.readJSON().errorCode == "limit")
            }
            // Each client holds one descriptor here; the server at most 64 more (and a few of its
            // own), once it has closed the others (just after their error went out).
            #expect(fixture.eventually(within: .seconds(1)) { openDescriptors() - before <= 200 + 64 + 8 },
                    "\(openDescriptors() - before) descriptors for 200 refused connections")
            #expect(try kept.request(#"{"id":2,"op":"status"}"#).ok != nil)
        }
    }
}
