import CoordFSCore
import Glibc
import Testing

@Suite(.serialized) struct ServerEventTests {
    @Test func eventsArriveInOrderWithEveryField() throws {
        try withServer { fixture in
            let client = try fixture.connect()
            let reply = try #require(try client.request(#"{"id":1,"op":"subscribe","path":"/docs","recursive":true}"#).ok)
            let subscription = try #require(reply["subscription"] as? Int)
            #expect(reply["sequence"] as? Int == 0 && reply["resync"] as? Bool == false)
            fixture.publish(.created, "/docs/a.txt")
            fixture.publish(.moved, "/docs/a.txt", to: "/docs/b.txt")
            fixture.publish(.created, "/elsewhere")
            fixture.publish(.deleted, "/docs/sub", directory: true)
            var events: [[String: Any]] = []
            for _ in 0..<3 {
                let push = try client.nextPush()
                #expect(push["push"] as? String == "event")
                #expect(push["subscription"] as? Int == subscription)
                events.append(try #require(push["event"] as? [String: Any]))
            }
            #expect(events.map { $0["sequence"] as? Int } == [1, 2, 4])
            #expect(events.map { $0["kind"] as? String } == ["created", "moved", "deleted"])
            #expect(events[1]["path"] as? String == "/docs/a.txt" && events[1]["destination"] as? String == "/docs/b.txt")
            #expect(events[2]["directory"] as? Bool == true && events[2]["size"] == nil)
            let origin = try #require(events[0]["origin"] as? [String: Any])
            #expect(origin["pid"] as? Int == 4242 && origin["uid"] as? Int == 1000 && origin["process"] as? String == "writer")
            #expect(events[0]["size"] as? Int == 5)
            #expect((events[0]["time"] as? Double ?? 0) > 1_600_000_000)
        }
    }

    @Test func kindsFilterAndUnsubscribe() throws {
        try withServer { fixture in
            let client = try fixture.connect()
            let reply = try #require(try client.request(#"{"id":1,"op":"subscribe","path":"/","recursive":true,"kinds":["deleted"]}"#).ok)
            fixture.publish(.created, "/x")
            fixture.publish(.deleted, "/x")
            let event = try #require(try client.nextPush()["event"] as? [String: Any])
            #expect(event["kind"] as? String == "deleted")
            let unsubscribed = try client.request(#"{"id":2,"op":"unsubscribe","subscription":\#(reply["subscription"] as! Int)}"#)
            #expect(unsubscribed.ok != nil)
            fixture.publish(.deleted, "/y")
            #expect(try client.request(#"{"id":3,"op":"status"}"#).ok != nil)
            #expect(client.pushes.isEmpty)
        }
    }

    @Test func sinceReplaysOrAsksForAResync() throws {
        try withServer(historyCapacity: 8) { fixture in
            for index in 1...5 { fixture.publish(.changed, "/f\(index)") }
            let client = try fixture.connect()
            let replay = try #require(try client.request(#"{"id":1,"op":"subscribe","path":"/","since":3}"#).ok)
            #expect(replay["replayed"] as? Int == 2 && replay["sequence"] as? Int == 5 && replay["resync"] as? Bool == false)
            #expect(try client.nextPush()["event"].flatMap { ($0 as? [String: Any])?["sequence"] as? Int } == 4)
            #expect(try client.nextPush()["event"].flatMap { ($0 as? [String: Any])?["sequence"] as? Int } == 5)
            for index in 6...20 { fixture.publish(.changed, "/g\(index)") }
            for _ in 6...20 { _ = try client.nextPush() }
            let late = try #require(try client.request(#"{"id":2,"op":"subscribe","path":"/","since":2}"#).ok)
            #expect(late["resync"] as? Bool == true && late["replayed"] as? Int == 0 && late["sequence"] as? Int == 20)
        }
    }

    @Test func aSubscriptionFollowsItsDirectoryWhenMoved() throws {
        try withServer { fixture in
            mkdir(fixture.backing + "/project", 0o755)
            let client = try fixture.connect()
            _ = try client.request(#"{"id":1,"op":"subscribe","path":"/project","recursive":true,"kinds":["changed","moved"]}"#)
            fixture.publish(.moved, "/project", to: "/renamed", directory: true)
            fixture.publish(.changed, "/renamed/file")
            let moved = try #require(try client.nextPush()["event"] as? [String: Any])
            #expect(moved["kind"] as? String == "moved")
            let changed = try #require(try client.nextPush()["event"] as? [String: Any])
            #expect(changed["path"] as? String == "/renamed/file")
            let status = try #require(try client.request(#"{"id":2,"op":"status"}"#).ok)
            #expect((status["subscribers"] as? [[String: Any]])?.first?["path"] as? String == "/renamed")
        }
    }

    /// A subscriber that never reads: the publisher does not slow down, the queue stays bounded,
    /// and once the client reads it finds an overflow marker with the exact range it lost.
    @Test func aSubscriberThatNeverReadsOverflowsWithoutSlowingWriters() throws {
        try withServer(queueCapacity: 64) { fixture in
            let stuck = try fixture.connect()
            _ = try stuck.request(#"{"id":1,"op":"subscribe","path":"/","recursive":true}"#)
            let total = 20_000
            let clock = ContinuousClock()
            var slowest = Duration.zero
            let elapsed = clock.measure {
                for index in 0..<total {
                    let one = clock.measure { fixture.publish(.changed, "/file-with-a-long-enough-name-\(index % 100)") }
                    slowest = max(slowest, one)
                }
            }
            #expect(elapsed < .seconds(10))
            #expect(slowest < .seconds(1))  // a blocked writer would wait until the reader read
            #expect(fixture.eventually { fixture.hub.statistics().overflows >= 1 })
            #expect(fixture.hub.subscriptionStatistics().first?.queued ?? .max <= 64)

            // Reading now: every sequence number is either delivered or inside exactly one
            // overflow marker's range, in order (the loop may also have overflowed while the
            // socket still took data, whenever the writer outran it).
            var expected = 1
            var delivered = 0
            var markers = 0
            while expected <= total {
                let push = try stuck.nextPush()
                if push["push"] as? String == "overflow" {
                    #expect(push["first"] as? Int == expected)
                    let last = try #require(push["last"] as? Int)
                    #expect(push["dropped"] as? Int == last - expected + 1)
                    expected = last + 1
                    markers += 1
                } else {
                    #expect((push["event"] as? [String: Any])?["sequence"] as? Int == expected)
                    expected += 1
                    delivered += 1
                }
            }
            #expect(markers >= 1 && markers == Int(fixture.hub.statistics().overflows))
            #expect(delivered < total)
            // After the marker, events flow again.
            fixture.publish(.changed, "/after")
            let next = try #require(try stuck.nextPush()["event"] as? [String: Any])
            #expect(next["sequence"] as? Int == total + 1)
        }
    }

    @Test func manySubscribersEachGetEveryEvent() throws {
        try withServer { fixture in
            let clients = try (0..<20).map { _ in try fixture.connect() }
            for (index, client) in clients.enumerated() {
                _ = try client.request(#"{"id":\#(index),"op":"subscribe","path":"/","recursive":true}"#)
            }
            for index in 0..<200 { fixture.publish(.changed, "/f\(index)") }
            for client in clients {
                let sequences = try (0..<200).map { _ in try #require((try client.nextPush()["event"] as? [String: Any])?["sequence"] as? Int) }
                #expect(sequences == Array(1...200))
            }
        }
    }
}
