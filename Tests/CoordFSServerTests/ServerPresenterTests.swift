import CoordFSCore
import Glibc
import Synchronization
import Testing

/// Receives one verdict from the registry.
final class VerdictWaiter: Sendable {
    private let verdicts = Mutex<[PresenterVerdict]>([])
    var completion: @Sendable (PresenterVerdict) -> Void { { verdict in self.verdicts.withLock { $0.append(verdict) } } }

    func wait(_ fixture: ServerFixture, within limit: Duration = .seconds(10)) -> PresenterVerdict? {
        _ = fixture.eventually(within: limit) { verdicts.withLock { !$0.isEmpty } }
        return verdicts.withLock { $0.first }
    }

    /// For async tests: a presenter of the client library answers from a task, which needs one
    /// of the concurrency pool's few threads; a blocking wait could hold the last one.
    func wait(_ fixture: ServerFixture, within limit: Duration = .seconds(10)) async -> PresenterVerdict? {
        _ = await fixture.eventually(within: limit) { verdicts.withLock { !$0.isEmpty } }
        return verdicts.withLock { $0.first }
    }
}

/// Another process's pid, so the test process (the presenter's owner) is not the requester.
private let stranger: Int32 = 1

@Suite(.serialized) struct ServerPresenterTests {
    @Test func aPresenterIsAskedAndItsAnswerLetsTheAccessProceed() throws {
        try withServer { fixture in
            let client = try fixture.connect()
            let presented = try #require(try client.request(#"{"id":1,"op":"present","path":"/doc.txt","answers":["save","relinquish"]}"#).ok)
            let presenter = try #require(presented["presenter"] as? Int)
            let waiter = VerdictWaiter()
            #expect(fixture.presenters.ask(.save, path: MountPath("/doc.txt")!, requester: stranger, timeout: .seconds(10), completion: waiter.completion))
            let ask = try client.nextPush()
            #expect(ask["push"] as? String == "ask")
            #expect(ask["kind"] as? String == "save" && ask["path"] as? String == "/doc.txt" && ask["presented"] as? String == "/doc.txt")
            #expect(ask["presenter"] as? Int == presenter && ask["requester"] as? Int == Int(stranger))
            #expect((ask["timeout"] as? Double ?? 0) > 5)
            let request = try #require(ask["request"] as? Int)
            let answered = try client.request(#"{"id":2,"op":"answer","presenter":\#(presenter),"request":\#(request),"verdict":"ok"}"#)
            #expect(answered.ok?["accepted"] as? Bool == true)
            let verdict = try #require(waiter.wait(fixture))
            #expect(verdict.mayProceed && verdict.timedOut.isEmpty)
            // Answering twice is harmless and says it came too late.
            let again = try client.request(#"{"id":3,"op":"answer","presenter":\#(presenter),"request":\#(request),"verdict":"ok"}"#)
            #expect(again.ok?["accepted"] as? Bool == false)
        }
    }

    @Test func aRefusalFailsTheDeletion() throws {
        try withServer { fixture in
            let client = try fixture.connect()
            let presenter = try #require(try client.request(#"{"id":1,"op":"present","path":"/keep","answers":["accommodate-deletion"]}"#).ok?["presenter"] as? Int)
            let waiter = VerdictWaiter()
            #expect(fixture.presenters.ask(.accommodateDeletion, path: MountPath("/keep")!, requester: stranger, timeout: .seconds(10), completion: waiter.completion))
            let request = try #require(try client.nextPush()["request"] as? Int)
            _ = try client.request(#"{"id":2,"op":"answer","presenter":\#(presenter),"request":\#(request),"verdict":"refuse","reason":"unsaved"}"#)
            let verdict = try #require(waiter.wait(fixture))
            guard case .refused(let refusals) = verdict.decision else {
                Issue.record("not refused: \(verdict)")
                return
            }
            #expect(refusals.first?.reason == "unsaved")
            #expect(refusals.first?.presenter.label.contains("session") == true)
        }
    }

    @Test func aSilentPresenterDelaysByTheTimeoutAndNoMore() throws {
        try withServer { fixture in
            let client = try fixture.connect()
            _ = try client.request(#"{"id":1,"op":"present","path":"/f","answers":["relinquish"]}"#)
            let waiter = VerdictWaiter()
            let started = ContinuousClock.now
            #expect(fixture.presenters.ask(.relinquish, path: MountPath("/f")!, requester: stranger, timeout: .milliseconds(300), completion: waiter.completion))
            let verdict = try #require(waiter.wait(fixture))
            #expect(verdict.mayProceed && verdict.timedOut.count == 1)
            #expect(verdict.waited >= .milliseconds(300) && verdict.waited < .seconds(1))
            #expect(ContinuousClock.now - started >= .milliseconds(300))
            let status = try #require(try client.request(#"{"id":2,"op":"status"}"#).ok)
            #expect((status["presenters"] as? [[String: Any]])?.first?["timedOut"] as? Int == 1)
        }
    }

    @Test func theClientsOwnProcessTreeIsNotAsked() throws {
        try withServer { fixture in
            let client = try fixture.connect()
            _ = try client.request(#"{"id":1,"op":"present","path":"/f","answers":["save"]}"#)
            // The requester is this very process, which is the presenter's peer: nothing to ask.
            #expect(!fixture.presenters.ask(.save, path: MountPath("/f")!, requester: getpid(), timeout: .seconds(5)) { _ in })
            #expect(try client.request(#"{"id":2,"op":"status"}"#).ok != nil)
            #expect(client.pushes.isEmpty)
        }
    }

    @Test func notificationsArriveAndFollowMoves() throws {
        try withServer { fixture in
            mkdir(fixture.backing + "/dir", 0o755)
            let client = try fixture.connect()
            let presenter = try #require(try client.request(#"{"id":1,"op":"present","path":"/dir/f"}"#).ok?["presenter"] as? Int)
            fixture.presenters.notify(.didChange, path: MountPath("/dir/f")!, origin: stranger)
            fixture.presenters.notify(.didMove, path: MountPath("/dir")!, destination: MountPath("/moved")!, origin: stranger)
            let changed = try client.nextPush()
            #expect(changed["push"] as? String == "notify" && changed["kind"] as? String == "did-change")
            #expect(changed["presenter"] as? Int == presenter)
            let moved = try client.nextPush()
            #expect(moved["kind"] as? String == "did-move" && moved["destination"] as? String == "/moved")
            #expect(moved["presented"] as? String == "/moved/f")
        }
    }

    @Test func aPresenterThatDisconnectsIsNotWaitedFor() throws {
        try withServer { fixture in
            var client: LineClient? = try fixture.connect()
            _ = try client!.request(#"{"id":1,"op":"present","path":"/f","answers":["save"]}"#)
            let waiter = VerdictWaiter()
            #expect(fixture.presenters.ask(.save, path: MountPath("/f")!, requester: stranger, timeout: .seconds(30), completion: waiter.completion))
            _ = try client!.nextPush()
            client = nil
            let verdict = try #require(waiter.wait(fixture, within: .seconds(5)))
            #expect(verdict.mayProceed && verdict.vanished.count == 1)
            #expect(fixture.presenters.isEmpty)
        }
    }

    @Test func unpresentStopsTheQuestions() throws {
        try withServer { fixture in
            let client = try fixture.connect()
            let presenter = try #require(try client.request(#"{"id":1,"op":"present","path":"/f","answers":["save"]}"#).ok?["presenter"] as? Int)
            #expect(try client.request(#"{"id":2,"op":"unpresent","presenter":\#(presenter)}"#).ok != nil)
            #expect(!fixture.presenters.ask(.save, path: MountPath("/f")!, requester: stranger, timeout: .seconds(5)) { _ in })
            #expect(try client.request(#"{"id":3,"op":"unpresent","presenter":\#(presenter)}"#).errorCode == "not-found")
        }
    }
}
