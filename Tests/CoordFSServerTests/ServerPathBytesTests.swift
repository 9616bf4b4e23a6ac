import CoordFSClient
import CoordFSCore
import CoordFSProtocol
import Foundation
import Glibc
import Testing

/// Paths that are not UTF-8 on the control socket: subscriptions, events, claims, status and
/// presenters take and give back the exact bytes (`pathBytes` and its kin beside a stand-in),
/// and a path's U+FFFD repair is another path.
@Suite(.serialized) struct ServerPathBytesTests {
    /// "/d\xFF", a directory whose name is not UTF-8, and a file in it.
    static let directory: [UInt8] = [0x2F, 0x64, 0xFF]
    static let file: [UInt8] = directory + [0x2F, 0x66, 0xC3, 0x28]
    static let moved: [UInt8] = directory + [0x2F, 0x80]

    static func base64(_ bytes: [UInt8]) -> String { Data(bytes).base64EncodedString() }
    static func bytes(_ base64: Any?) -> [UInt8]? { (base64 as? String).flatMap { Data(base64Encoded: $0) }.map(Array.init) }

    /// Makes the directory in the fixture's backing (the server checks what it may see there).
    static func makeDirectory(_ fixture: ServerFixture) {
        let path = Array(fixture.backing.utf8) + directory + [0]
        #expect(path.withUnsafeBufferPointer { $0.withMemoryRebound(to: CChar.self) { mkdir($0.baseAddress!, 0o755) } } == 0)
    }

    static func publish(_ fixture: ServerFixture, _ kind: ChangeKind, _ path: [UInt8], to destination: [UInt8]? = nil) {
        fixture.hub.publish(kind, path: MountPath(bytes: path)!, destination: destination.flatMap { MountPath(bytes: $0) },
                            isDirectory: false, origin: EventOrigin(pid: 4242, uid: 1000, processName: "writer"), size: 5)
    }

    @Test func subscriptionsAndEventsCarryTheBytes() throws {
        try withServer { fixture in
            Self.makeDirectory(fixture)
            let client = try fixture.connect()
            let reply = try #require(try client.request(#"{"id":1,"op":"subscribe","pathBytes":"\#(Self.base64(Self.directory))"}"#).ok)
            #expect(reply["path"] as? String == "/d\u{FFFD}")
            #expect(Self.bytes(reply["pathBytes"]) == Self.directory)
            // The repair names a directory that does not exist.
            let repaired = try client.request(#"{"id":2,"op":"subscribe","path":"/d\#u{FFFD}/f"}"#)
            #expect(repaired.errorCode == "no-such-path", "\(repaired)")

            Self.publish(fixture, .created, Self.file)
            Self.publish(fixture, .moved, Self.file, to: Self.moved)
            Self.publish(fixture, .created, Array("/d/plain".utf8))
            let created = try #require(try client.nextPush()["event"] as? [String: Any])
            #expect(created["path"] as? String == "/d\u{FFFD}/f\u{FFFD}(")
            #expect(Self.bytes(created["pathBytes"]) == Self.file)
            let move = try #require(try client.nextPush()["event"] as? [String: Any])
            #expect(Self.bytes(move["pathBytes"]) == Self.file && Self.bytes(move["destinationBytes"]) == Self.moved)
            #expect(client.pushes.isEmpty)
        }
    }

    @Test func claimsAndStatusCarryTheBytes() throws {
        try withServer { fixture in
            Self.makeDirectory(fixture)
            let holder = try fixture.connect()
            let other = try fixture.connect()
            let claim = try #require(try holder.request(#"{"id":1,"op":"claim","writeBytes":["\#(Self.base64(Self.directory))"],"read":["/plain"]}"#).ok)
            #expect(claim["write"] as? [String] == ["/d\u{FFFD}"])
            #expect((claim["writeBytes"] as? [Any])?.map(Self.bytes) == [Self.directory])
            #expect(claim["read"] as? [String] == ["/plain"] && claim["readBytes"] == nil, "a list of UTF-8 paths has no bytes beside it")
            #expect(fixture.claims.snapshot().holders.map(\.path.bytes).contains(Self.directory))

            // Its repair is another path: no conflict. The bytes themselves: a conflict, named exactly.
            #expect(try other.request(#"{"id":2,"op":"claim","write":["/d\#u{FFFD}"],"nonblock":true}"#).ok != nil)
            let conflict = try other.request(#"{"id":3,"op":"claim","writeBytes":["\#(Self.base64(Self.file))"],"nonblock":true}"#)
            #expect(conflict.errorCode == "conflict")
            let blockers = ((conflict["error"] as? [String: Any])?["blockers"] as? [[String: Any]]) ?? []
            #expect(blockers.map { Self.bytes($0["pathBytes"]) } == [Self.directory])

            let status = try #require(try holder.request(#"{"id":4,"op":"status"}"#).ok)
            let held = ((status["claims"] as? [String: Any])?["held"] as? [[String: Any]]) ?? []
            #expect(held.contains { Self.bytes($0["pathBytes"]) == Self.directory })
        }
    }

    @Test func theClientLibraryGivesFilePathsOfTheBytes() async throws {
        try await withServerAsync { fixture in
            Self.makeDirectory(fixture)
            let connection = try await CoordFSConnection.connect(socketPath: fixture.socketPath)
            defer { connection.close() }
            let directory = WirePath.path(Self.directory)!
            let subscription = try await connection.subscribe(directory)
            #expect(WirePath.bytes(of: subscription.path) == Self.directory)
            Self.publish(fixture, .moved, Self.file, to: Self.moved)
            for try await message in subscription {
                guard case .event(let event) = message else { continue }
                #expect(WirePath.bytes(of: event.path) == Self.file)
                #expect(event.destination.map(WirePath.bytes(of:)) == Self.moved)
                break
            }

            let held = try await connection.claim(writing: [WirePath.path(Self.file)!])
            #expect(held.writing.map(WirePath.bytes(of:)) == [Self.file])
            try await connection.release(held)

            let presenter = RecordingPresenter()
            let registration = try await connection.present(presenter, at: directory)
            #expect(WirePath.bytes(of: registration.path) == Self.directory)
            let saved = VerdictWaiter()
            // The presenter answers from a task of the concurrency pool, which the suite's other
            // tests can keep busy for a long while on two cores (seen: over 10 s): a minute.
            #expect(fixture.presenters.ask(.save, path: MountPath(bytes: Self.file)!, requester: 1, timeout: .seconds(60), completion: saved.completion))
            #expect(try #require(await saved.wait(fixture, within: .seconds(70))).mayProceed)
            #expect(presenter.items.map { WirePath.bytes(of: $0.path) } == [Self.file])
            #expect(presenter.items.map { WirePath.bytes(of: $0.presented) } == [Self.directory])
            try await registration.stop()
        }
    }
}
