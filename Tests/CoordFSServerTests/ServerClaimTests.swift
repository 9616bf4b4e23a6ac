import CoordFSCore
import Foundation
import Glibc
import Testing

@Suite(.serialized) struct ServerClaimTests {
    func holders(_ fixture: ServerFixture) -> [ClaimHolder] { fixture.claims.snapshot().holders }

    @Test func aWriteClaimIsExclusiveForTheSessionsProcessTree() throws {
        try withServer { fixture in
            let owner = try fixture.connect()
            let granted = try #require(try owner.request(#"{"id":1,"op":"claim","write":["/counter"],"read":["/config"]}"#).ok)
            #expect(granted["write"] as? [String] == ["/counter"] && granted["read"] as? [String] == ["/config"])
            let held = holders(fixture)
            #expect(Set(held.map(\.path.description)) == ["/counter", "/config"])
            #expect(held.first { $0.path.description == "/counter" }?.mode == .exclusive)
            #expect(held.first { $0.path.description == "/config" }?.mode == .read)
            guard case .client(_, let tree)? = held.first?.owner else {
                Issue.record("not a client claim")
                return
            }
            #expect(tree == getpid())

            let other = try fixture.connect()
            let conflict = try other.request(#"{"id":1,"op":"claim","write":["/counter"],"nonblock":true}"#)
            #expect(conflict.errorCode == "conflict")
            let error = try #require(conflict["error"] as? [String: Any])
            #expect((error["message"] as? String)?.contains("/counter is held (exclusive)") == true)
            let blocker = try #require((error["blockers"] as? [[String: Any]])?.first)
            #expect(blocker["path"] as? String == "/counter" && blocker["mode"] as? String == "exclusive")
            #expect((blocker["owner"] as? [String: Any])?["kind"] as? String == "client")
            // Read claims share.
            #expect(try other.request(#"{"id":2,"op":"claim","read":["/config"],"nonblock":true}"#).ok != nil)
            // A claim on the directory above conflicts with the one inside.
            #expect(try other.request(#"{"id":3,"op":"claim","write":["/"],"wait":0}"#).errorCode == "conflict")
        }
    }

    @Test func aWaitEndsWithATimeoutNamingTheBlocker() throws {
        try withServer { fixture in
            let owner = try fixture.connect()
            _ = try owner.request(#"{"id":1,"op":"claim","write":["/a"]}"#)
            let other = try fixture.connect()
            let started = ContinuousClock.now
            let reply = try other.request(#"{"id":1,"op":"claim","write":["/a"],"wait":0.3}"#)
            let waited = ContinuousClock.now - started
            #expect(reply.errorCode == "timeout")
            #expect(((reply["error"] as? [String: Any])?["blockers"] as? [[String: Any]])?.count == 1)
            #expect(waited >= .milliseconds(300) && waited < .seconds(3))
        }
    }

    @Test func aWaiterIsGrantedWhenTheHolderReleases() throws {
        try withServer { fixture in
            let owner = try fixture.connect()
            let claim = try #require(try owner.request(#"{"id":1,"op":"claim","write":["/a"]}"#).ok?["claim"] as? Int)
            let other = try fixture.connect()
            try other.send(#"{"id":"w","op":"claim","write":["/a"],"wait":30}"#)
            #expect(fixture.eventually { fixture.claims.snapshot().waiters.count == 1 })
            let status = try #require(try owner.request(#"{"id":2,"op":"status"}"#).ok)
            let waiting = try #require((status["claims"] as? [String: Any])?["waiting"] as? [[String: Any]])
            #expect(waiting.first?["paths"] as? [String] == ["/a"] && waiting.first?["mode"] as? String == "exclusive")
            #expect(try owner.request(#"{"id":3,"op":"release","claim":\#(claim)}"#).ok != nil)
            let granted = try other.readJSON()
            #expect(granted["id"] as? String == "w" && granted.ok?["claim"] as? Int != nil)
            #expect((granted.ok?["waited"] as? Double ?? -1) > 0)
        }
    }

    @Test func aWaitingClaimCanBeCancelled() throws {
        try withServer { fixture in
            let owner = try fixture.connect()
            _ = try owner.request(#"{"id":1,"op":"claim","write":["/a"]}"#)
            let other = try fixture.connect()
            try other.send(#"{"id":7,"op":"claim","write":["/a"],"wait":30}"#)
            #expect(fixture.eventually { fixture.claims.snapshot().waiters.count == 1 })
            try other.send(#"{"id":8,"op":"cancel","request":7}"#)
            let first = try other.readJSON()
            let second = try other.readJSON()
            #expect(first["id"] as? Int == 7 && first.errorCode == "cancelled")
            #expect(second["id"] as? Int == 8 && second.ok?["cancelled"] as? Bool == true)
            #expect(fixture.claims.snapshot().waiters.isEmpty)
        }
    }

    @Test func disconnectingReleasesAtOnce() throws {
        try withServer { fixture in
            var owner: LineClient? = try fixture.connect()
            _ = try owner!.request(#"{"id":1,"op":"claim","write":["/a"]}"#)
            let other = try fixture.connect()
            try other.send(#"{"id":2,"op":"claim","write":["/a"],"wait":30}"#)
            #expect(fixture.eventually { fixture.claims.snapshot().waiters.count == 1 })
            let started = ContinuousClock.now
            owner = nil
            let granted = try other.readJSON()
            #expect(granted.ok != nil)
            #expect(ContinuousClock.now - started < .seconds(1))
        }
    }

    /// A separate process takes a claim and is killed with SIGKILL: the kernel closes its
    /// socket and the claim goes with it.
    @Test func aKilledClientsClaimIsReleasedAtOnce() throws {
        try withServer { fixture in
            let script = fixture.directory + "/holder.py"
            try """
            import json, socket, sys, time
            s = socket.socket(socket.AF_UNIX)
            s.connect(sys.argv[1])
            f = s.makefile("rw")
            for request in ({"id": 1, "op": "hello", "version": 1, "client": "holder"}, {"id": 2, "op": "claim", "write": ["/locked"]}):
                f.write(json.dumps(request) + "\\n"); f.flush()
                reply = json.loads(f.readline())
                assert "ok" in reply, reply
            print("held", flush=True)
            time.sleep(600)
            """.write(toFile: script, atomically: true, encoding: .utf8)
            let output = fixture.directory + "/holder.out"
            let pid = capture("python3 \(script) \(fixture.socketPath) > \(output) 2>&1 & echo $!").output
                .trimmingCharacters(in: .whitespacesAndNewlines)
            let holderPID = try #require(Int32(pid))
            defer { kill(holderPID, SIGKILL) }
            #expect(fixture.eventually(within: .seconds(10)) { (try? String(contentsOfFile: output, encoding: .utf8))?.contains("held") == true })
            guard case .client(_, let tree)? = holders(fixture).first?.owner else {
                Issue.record("the holder's claim is not in the table")
                return
            }
            #expect(tree == holderPID)
            let started = ContinuousClock.now
            kill(holderPID, SIGKILL)
            #expect(fixture.eventually(within: .seconds(2)) { holders(fixture).isEmpty })
            #expect(ContinuousClock.now - started < .seconds(1))
        }
    }

    @Test func claimPathsMustBeSomewhere() throws {
        try withServer { fixture in
            let client = try fixture.connect()
            #expect(try client.request(#"{"id":1,"op":"claim","write":["/not-yet-created"]}"#).ok != nil)
            #expect(try client.request(#"{"id":2,"op":"claim","write":["/no/such/dir/file"]}"#).errorCode == "no-such-path")
            #expect(try client.request(#"{"id":3,"op":"claim","write":["/a/../b"]}"#).errorCode == "invalid-path")
        }
    }
}
