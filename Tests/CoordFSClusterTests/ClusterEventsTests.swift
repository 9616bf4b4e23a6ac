import CoordFSCluster
import CoordFSCore
import CoordFSTestSupport
import Glibc
import Logging
import Synchronization
import Testing

/// What one host's `apply` was handed, in order.
private final class Received: Sendable {
    private let items = Mutex<[RemoteBatch.Item]>([])

    func take(_ batch: RemoteBatch) {
        items.withLock { $0 += batch.items }
    }

    var all: [RemoteBatch.Item] { items.withLock { $0 } }

    var changes: [RemoteChange] {
        all.compactMap { if case .change(let change) = $0 { change } else { nil } }
    }

    var resyncs: [ClusterResync] {
        all.compactMap { if case .resync(let reason) = $0 { reason } else { nil } }
    }

    /// Waits up to `seconds` for `condition`; true when it held.
    @discardableResult
    func wait(seconds: Double = 20, until condition: (Received) -> Bool) -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
        while ContinuousClock.now < deadline {
            if condition(self) { return true }
            usleep(10_000)
        }
        return condition(self)
    }
}

/// Two hosts' ClusterEvents against a private server, each registered as the session would
/// (a connection of its own holding the host's liveness lock).
@Suite(.serialized)
struct ClusterEventsTests {
    let server: PostgresServer
    let configuration: ClusterConfiguration
    let logger = Logger(label: "test")

    init() throws {
        server = try PostgresServer()
        // A database of its own, so a test can shut connections to it out while psql still gets in.
        try server.query("CREATE DATABASE cluster")
        var configuration = ClusterConfiguration(conninfo: server.conninfo(database: "cluster"), name: "test")
        // Dead hosts are announced half a second after they are found, not ten.
        configuration.deathGrace = .milliseconds(500)
        self.configuration = configuration
    }

    private func register(_ mountpoint: String) throws -> (DatabaseConnection, ClusterHost) {
        let session = try DatabaseConnection(conninfo: configuration.conninfo, parameters: configuration.connectionParameters)
        return (session, try HostRegistration.register(on: session, configuration: configuration, mountpoint: Array(mountpoint.utf8)))
    }

    private func start(_ host: ClusterHost, _ received: Received, retention: EventRetention = EventRetention(),
                       queueCapacity: Int = ClusterEvents.defaultQueueCapacity) throws -> ClusterEvents {
        try ClusterEvents(configuration: configuration, host: host, logger: logger, retention: retention,
                          queueCapacity: queueCapacity, apply: { received.take($0) })
    }

    private func event(_ number: Int, kind: ChangeKind = .created) -> ChangeEvent {
        ChangeEvent(sequence: UInt64(number), kind: kind, path: MountPath("/d/f\(number)")!, destination: nil, isDirectory: false,
                    origin: EventOrigin(pid: 4000 + Int32(number), uid: 1000, processName: "writer"), size: Int64(number),
                    time: .now())
    }

    private func paths(_ changes: [RemoteChange]) -> [String] {
        changes.map { $0.path.description }
    }

    private func expected(_ range: Range<Int>) -> [String] {
        range.map { "/d/f\($0)" }
    }

    @Test func changesArriveInOrderWithTheirOriginHost() throws {
        let (sessionA, hostA) = try register("/mnt/a")
        let (sessionB, hostB) = try register("/mnt/b")
        let receivedA = Received(), receivedB = Received()
        let a = try start(hostA, receivedA)
        let b = try start(hostB, receivedB)
        defer { a.stop(); b.stop() }
        for number in 0..<200 { a.publish(event(number, kind: number % 2 == 0 ? .created : .changed)) }
        b.publish(event(1000))

        #expect(receivedB.wait { $0.changes.count >= 200 })
        #expect(receivedA.wait { $0.changes.count >= 1 })
        usleep(300_000) // nothing more may come
        let changes = receivedB.changes
        #expect(paths(changes) == expected(0..<200))
        #expect(changes.map(\.kind) == (0..<200).map { $0 % 2 == 0 ? .created : .changed })
        #expect(changes.map(\.cursor) == changes.map(\.cursor).sorted())
        #expect(changes.allSatisfy { $0.origin.host == EventHost(id: hostA.id, name: hostA.hostname) && !$0.origin.isOutside })
        #expect(changes[7].origin.pid == 4007 && changes[7].origin.uid == 1000 && changes[7].origin.processName == "writer")
        #expect(changes[7].size == 7)
        // Each host hears only the other's.
        #expect(paths(receivedA.changes) == ["/d/f1000"])
        #expect(receivedB.resyncs.isEmpty && receivedA.resyncs.isEmpty)
        withExtendedLifetime((sessionA, sessionB)) {}
    }

    @Test func bytesOfNamesAndMovesSurvive() throws {
        let (sessionA, hostA) = try register("/mnt/a")
        let (sessionB, hostB) = try register("/mnt/b")
        let receivedB = Received()
        let a = try start(hostA, Received())
        let b = try start(hostB, receivedB)
        defer { a.stop(); b.stop() }
        let odd = MountPath(bytes: [0x2f, 0x61, 0xff, 0xfe, 0x5c, 0x78])!
        let moved = ChangeEvent(sequence: 1, kind: .moved, path: odd, destination: MountPath("/b")!, isDirectory: true,
                                origin: EventOrigin(pid: 1, uid: EventOrigin.unknownUID, processName: "mv"), size: nil, time: .now())
        a.publish(moved)
        #expect(receivedB.wait { $0.changes.count == 1 })
        let change = try #require(receivedB.changes.first)
        #expect(change.path == odd && change.destination == MountPath("/b") && change.isDirectory && change.size == nil)
        #expect(change.origin.uid == EventOrigin.unknownUID)
        withExtendedLifetime((sessionA, sessionB)) {}
    }

    @Test func aDroppedConnectionCatchesUpWithoutAGap() throws {
        let (sessionA, hostA) = try register("/mnt/a")
        let (sessionB, hostB) = try register("/mnt/b")
        let receivedB = Received()
        let a = try start(hostA, Received())
        let b = try start(hostB, receivedB)
        defer { a.stop(); b.stop() }
        for number in 0..<50 { a.publish(event(number)) }
        #expect(receivedB.wait { $0.changes.count >= 50 })
        // Both hosts' event connections go; their sessions (and liveness) stay.
        try server.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'coordfs events'")
        for number in 50..<150 { a.publish(event(number)) }
        #expect(receivedB.wait { $0.changes.count >= 150 })
        usleep(300_000)
        #expect(paths(receivedB.changes) == expected(0..<150))
        #expect(receivedB.resyncs.isEmpty)
        withExtendedLifetime((sessionA, sessionB)) {}
    }

    @Test func aServerRestartLeavesNoGap() throws {
        let (sessionA, hostA) = try register("/mnt/a")
        let (sessionB, hostB) = try register("/mnt/b")
        let receivedB = Received()
        let a = try start(hostA, Received())
        let b = try start(hostB, receivedB)
        defer { a.stop(); b.stop() }
        for number in 0..<50 { a.publish(event(number)) }
        #expect(receivedB.wait { $0.changes.count >= 50 })
        try server.restart()
        for number in 50..<150 {
            a.publish(event(number))
            if number == 100 { usleep(200_000) }
        }
        #expect(receivedB.wait { $0.changes.count >= 150 }, "\(server.log)")
        usleep(300_000)
        #expect(paths(receivedB.changes) == expected(0..<150))
        // The restart ended the hosts' sessions: neither can know what the other lost, so
        // each is told once that the other died.
        #expect(receivedB.wait { $0.resyncs.contains(.hostDied(EventHost(id: hostA.id, name: hostA.hostname))) })
        withExtendedLifetime((sessionA, sessionB)) {}
    }

    @Test func publishNeverWaitsForTheServerAndAnOverflowIsAnnounced() throws {
        let (sessionA, hostA) = try register("/mnt/a")
        let (sessionB, hostB) = try register("/mnt/b")
        let receivedB = Received()
        let a = try start(hostA, Received(), queueCapacity: 100)
        let b = try start(hostB, receivedB)
        defer { a.stop(); b.stop() }
        try server.stop()
        let clock = ContinuousClock()
        let took = clock.measure {
            for number in 0..<10_000 { a.publish(event(number)) }
        }
        #expect(took < .seconds(1), "10,000 publishes with the server down took \(took)")
        #expect(a.pending == 100)
        try server.start()
        #expect(receivedB.wait { $0.resyncs.contains(.publisherOverflowed(EventHost(id: hostA.id, name: hostA.hostname))) })
        let changes = receivedB.changes
        #expect(paths(changes) == expected(0..<100))
        // The overflow's marker comes after the events that were kept.
        let marker = receivedB.all.firstIndex { $0 == .resync(.publisherOverflowed(EventHost(id: hostA.id, name: hostA.hostname))) }
        let lastKept = receivedB.all.lastIndex { if case .change = $0 { true } else { false } }
        #expect(marker != nil && lastKept != nil && marker! > lastKept!)
        withExtendedLifetime((sessionA, sessionB)) {}
    }

    @Test func aHostBehindTheRetentionIsToldToResync() throws {
        let (sessionA, hostA) = try register("/mnt/a")
        let (sessionB, hostB) = try register("/mnt/b")
        let receivedB = Received()
        var retention = EventRetention()
        retention.rows = 5
        retention.trimInterval = .milliseconds(100)
        let a = try start(hostA, Received(), retention: retention)
        let b = try start(hostB, receivedB)
        defer { a.stop(); b.stop() }
        a.publish(event(0))
        #expect(receivedB.wait { $0.changes.count == 1 })
        // B is cut off (its connection ends and it cannot connect again) while A goes on and trims.
        let observer = try DatabaseConnection(conninfo: configuration.conninfo)
        func rows() -> Int64 {
            (try? observer.execute("SELECT count(*) FROM coordfs_events WHERE cluster = 'test'").integer(0, 0)) ?? -1
        }
        try server.query("ALTER DATABASE cluster ALLOW_CONNECTIONS false")
        try server.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'coordfs events' AND pid <> (SELECT pid FROM pg_stat_activity WHERE application_name = 'coordfs events' ORDER BY backend_start LIMIT 1)")
        // (The oldest event connection is A's: A started first.)
        for number in 1..<40 { a.publish(event(number)) }
        var trimmed = false
        for _ in 0..<100 where !trimmed {
            usleep(100_000)
            trimmed = rows() == 5
        }
        #expect(trimmed, "\(rows()) rows")
        try server.query("ALTER DATABASE cluster ALLOW_CONNECTIONS true")
        #expect(receivedB.wait { $0.resyncs.contains(.fellBehind) })
        #expect(receivedB.wait { $0.changes.last?.path.description == "/d/f39" })
        // The resync comes before the rows that were kept.
        let all = receivedB.all
        let marker = try #require(all.firstIndex(of: .resync(.fellBehind)))
        #expect(paths(all[(marker + 1)...].compactMap { if case .change(let change) = $0 { change } else { nil } }) == expected(35..<40))
        withExtendedLifetime((sessionA, sessionB)) {}
    }

    @Test func aDeadHostIsAnnouncedOnceAndACleanLeaveIsNot() throws {
        let (sessionA, hostA) = try register("/mnt/a")
        let (sessionB, registeredB) = try register("/mnt/b")
        let hostB = registeredB.id
        let (sessionC, hostC) = try register("/mnt/c")
        let receivedA = Received(), receivedC = Received()
        let a = try start(hostA, receivedA)
        let c = try start(hostC, receivedC)
        defer { a.stop(); c.stop() }
        usleep(1_500_000) // both have seen B alive
        // B's session ends (as when its daemon is killed): its liveness lock goes.
        try server.query("SELECT pg_terminate_backend(server_pid) FROM coordfs_hosts WHERE host_id = \(hostB)", database: "cluster")
        #expect(receivedA.wait { $0.resyncs.contains { if case .hostDied(let host) = $0 { host.id == hostB } else { false } } })
        #expect(receivedC.wait { $0.resyncs.contains { if case .hostDied(let host) = $0 { host.id == hostB } else { false } } })
        usleep(2_500_000)
        #expect(receivedA.resyncs.count == 1 && receivedC.resyncs.count == 1)
        #expect(try server.query("SELECT count(*) FROM coordfs_events WHERE kind = 'lost'", database: "cluster").hasPrefix("1"))

        // C leaves cleanly (its events stop, then its session): nobody resynchronises.
        c.stop()
        withExtendedLifetime(sessionC) {}
        try server.query("DELETE FROM coordfs_hosts WHERE host_id = \(hostC.id)", database: "cluster")
        usleep(2_500_000)
        #expect(receivedA.resyncs.count == 1)
        withExtendedLifetime((sessionA, sessionB)) {}
    }

    /// Issue 32: a host that lost its session and registered again, naming the id it had
    /// (`succeeds`, as a daemon does after a database restart or failover), is not announced
    /// dead: its events go on under its new id and nobody resynchronises. One that does not
    /// come back within the grace is, once.
    @Test func aHostThatComesBackUnderANewIdIsNotAnnouncedDead() throws {
        let (firstSession, firstA) = try register("/mnt/a")
        let (sessionB, hostB) = try register("/mnt/b")
        let (sessionC, hostC) = try register("/mnt/c")
        let receivedB = Received()
        let b = try start(hostB, receivedB)
        defer { b.stop() }
        usleep(1_500_000) // B has seen A and C alive
        try server.query("SELECT pg_terminate_backend(server_pid) FROM coordfs_hosts WHERE host_id IN (\(firstA.id), \(hostC.id))",
                         database: "cluster")
        let secondSession = try DatabaseConnection(conninfo: configuration.conninfo, parameters: configuration.connectionParameters)
        _ = try HostRegistration.register(on: secondSession, configuration: configuration, mountpoint: Array("/mnt/a".utf8),
                                          succeeding: [firstA.id])
        #expect(receivedB.wait { $0.resyncs.contains { if case .hostDied(let host) = $0 { host.id == hostC.id } else { false } } })
        usleep(1_500_000)
        #expect(receivedB.resyncs.count == 1, "only C, which did not come back: \(receivedB.resyncs)")
        withExtendedLifetime((firstSession, sessionB, sessionC, secondSession)) {}
    }

    /// A session that reconnected registered again under a new id: the host's events go out
    /// under it, and what it published under either id never comes back to it.
    @Test func aHostRegisteredAgainKeepsItsEventsItsOwn() throws {
        let (firstSession, firstA) = try register("/mnt/a")
        let (sessionB, hostB) = try register("/mnt/b")
        let currentA = Mutex(firstA)
        let receivedA = Received(), receivedB = Received()
        let a = try ClusterEvents(configuration: configuration, host: firstA, logger: logger,
                                  currentHost: { currentA.withLock { $0 } }, apply: { receivedA.take($0) })
        let b = try start(hostB, receivedB)
        defer { a.stop(); b.stop() }
        for number in 0..<10 { a.publish(event(number)) }
        #expect(receivedB.wait { $0.changes.count >= 10 })
        let (secondSession, secondA) = try register("/mnt/a")
        currentA.withLock { $0 = secondA }
        for number in 10..<20 { a.publish(event(number)) }
        #expect(receivedB.wait { $0.changes.count >= 20 })
        usleep(1_500_000)
        #expect(paths(receivedB.changes) == expected(0..<20))
        #expect(receivedB.changes.map { $0.origin.host!.id } == Array(repeating: firstA.id, count: 10) + Array(repeating: secondA.id, count: 10))
        #expect(receivedA.changes.isEmpty)
        withExtendedLifetime((firstSession, secondSession, sessionB)) {}
    }

    @Test func peerDaemonsOnThisBootAreKnown() throws {
        let (sessionA, hostA) = try register("/mnt/a")
        let a = try start(hostA, Received())
        defer { a.stop() }
        // A second host registered after A started, from this process: A learns of it at once
        // (its events announce it) or at the next tick.
        let (sessionB, hostB) = try register("/mnt/b")
        let b = try start(hostB, Received())
        defer { b.stop() }
        var known = false
        for _ in 0..<200 where !known {
            known = a.isPeerDaemon(pid: getpid())
            usleep(10_000)
        }
        #expect(known)
        #expect(!a.isPeerDaemon(pid: 1))
        withExtendedLifetime((sessionA, sessionB)) {}
    }
}
