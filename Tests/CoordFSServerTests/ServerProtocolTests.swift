import CoordFSClient
import CoordFSCore
import CoordFSServer
import Dispatch
import Glibc
import Logging
import Testing

@Suite(.serialized) struct ServerProtocolTests {
    @Test func helloComesFirstAndReportsTheCredentialsTheKernelGave() throws {
        try withServer { fixture in
            let client = try fixture.connect(hello: false)
            let early = try client.request(#"{"id":1,"op":"status"}"#)
            #expect(early.errorCode == "hello-required")
            #expect(early["id"] as? Int == 1)
            let wrongVersion = try client.request(#"{"id":2,"op":"hello","version":99}"#)
            #expect(wrongVersion.errorCode == "unsupported-version")
            let hello = try client.request(#"{"id":"h","op":"hello","version":1,"client":"probe"}"#)
            let ok = try #require(hello.ok)
            #expect(hello["id"] as? String == "h")
            #expect(ok["version"] as? Int == 1)
            #expect(ok["pid"] as? Int == Int(getpid()))
            #expect(ok["uid"] as? Int == Int(getuid()))
            #expect(ok["maxLine"] as? Int == 1 << 20)
            #expect(try client.request(#"{"id":3,"op":"hello","version":1}"#).errorCode == "bad-request")
        }
    }

    @Test func theSocketIsPrivateAndGoesAwayAtStop() throws {
        let fixture = try ServerFixture()
        var status = stat()
        #expect(lstat(fixture.socketPath, &status) == 0)
        #expect(status.st_mode & 0o777 == 0o600)
        #expect(status.st_mode & S_IFMT == S_IFSOCK)
        fixture.server.stop()
        #expect(lstat(fixture.socketPath, &status) != 0)
        fixture.stop()
    }

    @Test func aStaleSocketIsReplacedALiveOneIsNot() throws {
        try withServer { fixture in
            var logger = Logger(label: "test")
            logger.logLevel = .critical
            // Another server on the same path while this one listens: refused once the grace is over.
            var briefly = ControlServer.Options()
            briefly.previousServerGrace = .milliseconds(100)
            #expect(throws: ControlSocketError.self) {
                _ = try ControlServer.start(socketPath: fixture.socketPath, hub: EventHub(), presenters: PresenterRegistry(),
                                            claims: ClaimTable(), access: BackingPathAccess(rootDescriptor: fixture.rootDescriptor),
                                            logger: logger, options: briefly)
            }
            let reply = try fixture.connect().request(#"{"id":1,"op":"status"}"#)
            #expect(reply.ok != nil)
        }
        // A socket file nobody listens on (a crashed mount's) is replaced.
        let directory = "/tmp/coordfs-stale-\(getpid())"
        mkdir(directory, 0o700)
        defer { shell("rm -rf \(directory)") }
        let path = directory + "/s.sock"
        #expect(shell("python3 -c 'import socket; s=socket.socket(socket.AF_UNIX); s.bind(\"\(path)\")'") == 0)
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let server = try ControlServer.start(socketPath: path, hub: EventHub(), presenters: PresenterRegistry(), claims: ClaimTable(),
                                             access: BackingPathAccess(rootDescriptor: -1), logger: logger)
        let hello = try LineClient(socketPath: path).request(#"{"id":1,"op":"hello","version":1}"#)
        #expect(hello.ok != nil)
        server.stop()
        // Not a socket: left alone, and said so.
        #expect(shell("touch \(path)") == 0)
        #expect(throws: ControlSocketError.self) {
            _ = try ControlServer.start(socketPath: path, hub: EventHub(), presenters: PresenterRegistry(), claims: ClaimTable(),
                                        access: BackingPathAccess(rootDescriptor: -1), logger: logger)
        }
    }

    /// Socket paths up to the limit are served and reached; one byte more is refused with a
    /// clear error on both sides, and leaves nothing behind.
    @Test func socketPathsAreServedUpToTheLimitAndRefusedBeyond() async throws {
        let directory = "/tmp/coordfs-long-\(getpid())"
        mkdir(directory, 0o700)
        defer { shell("rm -rf \(directory)") }
        let longest = directory + "/" + String(repeating: "s", count: ProtocolLimits.maxSocketPathBytes - directory.utf8.count - 1)
        #expect(longest.utf8.count == ProtocolLimits.maxSocketPathBytes)
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let server = try ControlServer.start(socketPath: longest, hub: EventHub(), presenters: PresenterRegistry(), claims: ClaimTable(),
                                             access: BackingPathAccess(rootDescriptor: -1), logger: logger)
        let connection = try await CoordFSConnection.connect(socketPath: longest)
        #expect(connection.server.server == "coordfs")
        connection.close()
        server.stop()

        let tooLong = longest + "s"
        do {
            _ = try ControlServer.start(socketPath: tooLong, hub: EventHub(), presenters: PresenterRegistry(), claims: ClaimTable(),
                                        access: BackingPathAccess(rootDescriptor: -1), logger: logger)
            Issue.record("a socket path of \(tooLong.utf8.count) bytes was accepted")
        } catch {
            #expect("\(error)".contains("too long for a Unix socket (at most 103 bytes)"))
        }
        #expect(shell("test -e \(tooLong)") != 0)
        let refused = await failure { try await CoordFSConnection.connect(socketPath: tooLong) }
        guard case .cannotConnect(_, let reason)? = refused else {
            Issue.record("unexpected \(String(describing: refused))")
            return
        }
        #expect(reason == "the path is too long for a socket (at most 103 bytes)")
    }

    /// `fusermount3 -u m; coordfs mount b m`: the old daemon closes its socket a moment after
    /// the unmount, and the new one waits for that instead of failing.
    @Test func aServerThatIsStoppingIsWaitedFor() throws {
        let old = try ServerFixture()
        let oldServer = old.server
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(300)) { oldServer.stop() }
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let started = ContinuousClock.now
        let new = try ControlServer.start(socketPath: old.socketPath, hub: EventHub(), presenters: PresenterRegistry(), claims: ClaimTable(),
                                          access: BackingPathAccess(rootDescriptor: old.rootDescriptor), logger: logger)
        #expect(ContinuousClock.now - started >= .milliseconds(250))
        let hello = try LineClient(socketPath: old.socketPath).request(#"{"id":1,"op":"hello","version":1}"#)
        #expect(hello.ok != nil)
        // The old server removed only its own socket file, not the new one.
        var status = stat()
        #expect(lstat(old.socketPath, &status) == 0)
        new.stop()
        old.stop()
    }

    @Test func everyBadLineGetsAStructuredErrorAndTheConnectionLivesOn() throws {
        try withServer { fixture in
            let client = try fixture.connect()
            let cases: [(String, String)] = [
                ("this is not json", "bad-json"),
                ("[1,2]", "bad-json"),
                (#"{"op":"status"}"#, "bad-request"),
                (#"{"id":7,"op":"fly"}"#, "unknown-request"),
                (#"{"id":8,"op":"subscribe","path":42}"#, "bad-request"),
                (#"{"id":9,"op":"subscribe","path":"relative"}"#, "invalid-path"),
                (#"{"id":10,"op":"subscribe","path":"/../etc"}"#, "invalid-path"),
                (#"{"id":11,"op":"unsubscribe","subscription":99}"#, "not-found"),
                (#"{"id":12,"op":"release","claim":5}"#, "not-found"),
                (#"{"id":13,"op":"claim"}"#, "bad-request"),
                (#"{"id":14,"op":"claim","write":["/a"],"wait":-1}"#, "bad-request"),
                (#"{"id":15,"op":"answer","presenter":1,"request":1,"verdict":"ok"}"#, "not-found"),
                (#"{"id":16,"op":"subscribe","path":"/missing/deeper"}"#, "no-such-path"),
                (#"{"id":17,"op":"subscribe","path":"/","kinds":[]}"#, "bad-request"),
            ]
            for (line, code) in cases {
                let reply = try client.request(line)
                #expect(reply.errorCode == code, "\(line) → \(reply)")
                let message = (reply["error"] as? [String: Any])?["message"] as? String
                #expect(message?.isEmpty == false)
            }
            #expect(try client.request(#"{"id":99,"op":"status"}"#).ok != nil)
        }
    }

    @Test func anOversizedLineIsSkippedWithAnError() throws {
        try withServer(options: { var options = ControlServer.Options(); options.maxLineBytes = 4096; return options }()) { fixture in
            let client = try fixture.connect()
            try client.send(#"{"id":1,"op":"subscribe","path":"/"# + String(repeating: "x", count: 100_000) + #""}"#)
            let reply = try client.readJSON()
            #expect(reply.errorCode == "too-large")
            #expect(reply.keys.contains("id"))
            #expect(try client.request(#"{"id":2,"op":"status"}"#).ok != nil)
        }
    }

    @Test func blankLinesAreIgnoredAndCRLFIsFine() throws {
        try withServer { fixture in
            let client = try fixture.connect()
            try client.send(Array("\n  \n\r\n".utf8))
            try client.send(Array("{\"id\":5,\"op\":\"status\"}\r\n".utf8))
            let reply = try client.readJSON()
            #expect(reply["id"] as? Int == 5 && reply.ok != nil)
        }
    }

    @Test func statusShowsConnectionsAndCounters() throws {
        try withServer { fixture in
            let watcher = try fixture.connect(client: "watcher")
            _ = try watcher.request(#"{"id":1,"op":"subscribe","path":"/","recursive":true}"#)
            fixture.publish(.created, "/a")
            _ = try watcher.nextPush()
            let client = try fixture.connect(client: "observer")
            let status = try #require(try client.request(#"{"id":2,"op":"status"}"#).ok)
            let connections = try #require(status["connections"] as? [[String: Any]])
            #expect(connections.compactMap { $0["client"] as? String } == ["watcher", "observer"])
            let events = try #require(status["events"] as? [String: Any])
            #expect(events["sequence"] as? Int == 1 && events["subscribers"] as? Int == 1)
            let subscribers = try #require(status["subscribers"] as? [[String: Any]])
            #expect(subscribers.first?["path"] as? String == "/" && subscribers.first?["delivered"] as? Int == 1)
            #expect(fixture.server.connectionCount() == 2)
        }
    }

    @Test func stopSaysByeToEveryClient() throws {
        let fixture = try ServerFixture()
        let client = try fixture.connect()
        fixture.server.stop()
        let bye = try client.readJSON()
        #expect(bye["push"] as? String == "bye")
        #expect(client.isClosedByServer())
        fixture.stop()
    }
}
