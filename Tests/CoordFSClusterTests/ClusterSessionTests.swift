import CoordFSCluster
import CoordFSCore
import CoordFSTestSupport
import Dispatch
import Foundation
import Glibc
import Logging
import Synchronization
import Testing

/// One `cover` whose outcome a test waits for.
final class PendingCover: Sendable {
    let ticket: CoverageTicket
    let coverage: any HostCoverage
    let started = ContinuousClock.now
    private let box = OutcomeBox()

    init(_ coverage: any HostCoverage, _ requests: [ClaimRequest], within: Duration = .seconds(20), nonblocking: Bool = false) {
        self.coverage = coverage
        let box = self.box
        ticket = coverage.cover(requests, deadline: .now + within, nonblocking: nonblocking) { result in
            box.outcome.withLock { $0 = (result, .now) }
            box.done.signal()
        }
    }

    /// The outcome, waiting up to `timeout` for it.
    func wait(_ timeout: Duration = .seconds(20)) -> CoverageOutcome? {
        let (seconds, attoseconds) = timeout.components
        // Signalled again once passed, so that a later wait returns at once too.
        if box.done.wait(timeout: .now() + .milliseconds(Int(seconds * 1000 + attoseconds / 1_000_000_000_000_000))) == .success {
            box.done.signal()
        }
        return box.outcome.withLock { $0?.0 }
    }

    /// How long it took, once it ended.
    var took: Duration? { box.outcome.withLock { $0.map { $0.1 - started } } }

    var isWaiting: Bool { box.outcome.withLock { $0 == nil } }

    var use: CoverageUse? {
        if case .covered(let use) = wait() { return use }
        return nil
    }
}

final class OutcomeBox: Sendable {
    let outcome = Mutex<(CoverageOutcome, ContinuousClock.Instant)?>(nil)
    let done = DispatchSemaphore(value: 0)
}

func request(_ path: String, _ mode: ClaimMode) -> ClaimRequest {
    ClaimRequest(MountPath(path)!, mode)
}

/// Claims across hosts: several `ClusterSession`s in one process stand in for hosts, against a
/// private server; nothing is mounted.
@Suite(.serialized)
struct ClusterSessionTests {
    let server: PostgresServer
    let configuration: ClusterConfiguration

    init() throws {
        server = try PostgresServer()
        var configuration = ClusterConfiguration(conninfo: server.conninfo(), name: "grants")
        // A slow heartbeat, so a wake-up well under it can only be the NOTIFY.
        configuration.heartbeat = .seconds(2)
        configuration.leaseValidity = .seconds(6)
        self.configuration = configuration
    }

    func session(_ name: String, heartbeat: Duration? = nil) throws -> ClusterSession {
        var configuration = configuration
        if let heartbeat {
            configuration.heartbeat = heartbeat
            configuration.leaseValidity = heartbeat * 3
        }
        return try ClusterSession(configuration: configuration, mountpoint: Array("/mnt/\(name)".utf8), logger: Logger(label: name))
    }

    @Test func aConflictingCoverWaitsAndIsWokenWhenTheHolderReleases() throws {
        // No heartbeat (and its retry) during the test: only the NOTIFY can wake the waiter.
        let a = try session("a", heartbeat: .seconds(60))
        let b = try session("b", heartbeat: .seconds(60))
        defer { a.stop(); b.stop() }
        let held = try #require(PendingCover(a.coverage, [request("/a", .write)]).use)
        let waiting = PendingCover(b.coverage, [request("/a/b", .write)])
        usleep(500_000)
        #expect(waiting.isWaiting)
        let released = ContinuousClock.now
        a.coverage.release(held)
        let outcome = waiting.wait()
        guard case .covered = outcome else {
            Issue.record("expected covered, got \(String(describing: outcome))")
            return
        }
        let delay = ContinuousClock.now - released
        #expect(delay < .milliseconds(1500), "woken after \(delay)")
    }

    @Test func anUncontendedHostAsksOnceThenCoversLocally() throws {
        let a = try session("a")
        defer { a.stop() }
        #expect(a.coverage.coverNow([request("/x/y", .write)]) == nil)
        // No time to wait is no reason to refuse what is free.
        let first = try #require(PendingCover(a.coverage, [request("/x/y", .write)], within: .zero).use)
        #expect(a.grantRoundTrips == 1)
        for path in ["/x/y", "/z", "/", "/q/r/s"] {
            let use = try #require(a.coverage.coverNow([request(path, .write)]))
            #expect(a.coverage.stillHolds(use))
            a.coverage.release(use)
        }
        // Through `cover` too: answered from the grant, no round trip.
        let second = try #require(PendingCover(a.coverage, [request("/other", .read)]).use)
        #expect(a.grantRoundTrips == 1)
        a.coverage.release(first)
        a.coverage.release(second)
    }

    /// Hierarchy and modes across hosts: a subtree conflicts with its ancestors' claims as the
    /// matrix says; snapshot-read only ever waits for exclusive.
    @Test func hierarchyAndModes() throws {
        let a = try session("a")
        let b = try session("b")
        defer { a.stop(); b.stop() }
        for (held, asked, waits) in [(request("/a", .write), request("/a/b", .write), true),
                                     (request("/a", .read), request("/a/b", .write), true),
                                     (request("/a/b", .write), request("/a", .read), true),
                                     (request("/a", .read), request("/a/b", .read), false),
                                     (request("/a", .write), request("/a/b", .snapshotRead), false),
                                     (request("/a", .exclusive), request("/a/b", .snapshotRead), true),
                                     (request("/a", .write), request("/ab", .write), false)] {
            let use = try #require(PendingCover(a.coverage, [held]).use, "\(held)")
            let pending = PendingCover(b.coverage, [asked])
            if waits {
                #expect(pending.wait(.milliseconds(500)) == nil, "\(asked) should wait for \(held)")
                a.coverage.release(use)
                let other = try #require(pending.use, "\(asked) after \(held) went")
                b.coverage.release(other)
            } else {
                let other = try #require(pending.wait(.seconds(2)).flatMap { if case .covered(let use) = $0 { use } else { nil } },
                                         "\(asked) beside \(held)")
                #expect(a.coverage.stillHolds(use))
                b.coverage.release(other)
                a.coverage.release(use)
            }
        }
    }

    /// First come, first served across hosts: once another host waits, this host's new
    /// conflicting covers queue behind it instead of riding on the grant it already holds.
    @Test func aBusyHostDoesNotStarveAnother() throws {
        let a = try session("a")
        let b = try session("b")
        defer { a.stop(); b.stop() }
        let first = try #require(PendingCover(a.coverage, [request("/f", .write)]).use)
        let second = try #require(a.coverage.coverNow([request("/f", .write)]))
        let waiting = PendingCover(b.coverage, [request("/f", .write)])
        #expect(waiting.wait(.milliseconds(300)) == nil)
        // Host a now knows b waits: nothing conflicting is covered locally any more.
        var refused = false
        for _ in 0..<100 {
            if let use = a.coverage.coverNow([request("/f/g", .read)]) {
                a.coverage.release(use)
                usleep(10_000)
            } else {
                refused = true
                break
            }
        }
        #expect(refused)
        let later = PendingCover(a.coverage, [request("/f", .write)])
        a.coverage.release(first)
        #expect(waiting.wait(.milliseconds(300)) == nil, "b waits for a's second use")
        a.coverage.release(second)
        let bUse = try #require(waiting.use)
        #expect(later.wait(.milliseconds(300)) == nil, "a's later cover waits behind b")
        b.coverage.release(bUse)
        let aUse = try #require(later.use)
        a.coverage.release(aUse)
    }

    @Test func aWaitEndsAtItsDeadlineNamingTheHolder() throws {
        let a = try session("a")
        let b = try session("b")
        defer { a.stop(); b.stop() }
        let use = try #require(PendingCover(a.coverage, [request("/t", .write)]).use)
        let waiting = PendingCover(b.coverage, [request("/t/u", .read)], within: .milliseconds(600))
        let outcome = waiting.wait()
        guard case .timedOut(let holders) = outcome else {
            Issue.record("expected timedOut, got \(String(describing: outcome))")
            return
        }
        #expect(holders.count == 1)
        #expect(holders.first?.contains("pid \(getpid())") == true, "\(holders)")
        let took = try #require(waiting.took)
        #expect(took >= .milliseconds(600) && took < .milliseconds(1500), "\(took)")
        #expect(b.status().waiting.isEmpty)
        a.coverage.release(use)
    }

    @Test func nonblockingFailsAtOnceAndQueuesNothing() throws {
        let a = try session("a")
        let b = try session("b")
        defer { a.stop(); b.stop() }
        let use = try #require(PendingCover(a.coverage, [request("/n", .exclusive)]).use)
        let attempt = PendingCover(b.coverage, [request("/n/m", .snapshotRead)], nonblocking: true)
        guard case .wouldBlock = attempt.wait() else {
            Issue.record("expected wouldBlock, got \(String(describing: attempt.wait()))")
            return
        }
        // The holder answered the recall (its use stands): no waiting for the heartbeat (2 s).
        let took = try #require(attempt.took)
        #expect(took < .milliseconds(1500), "\(took)")
        #expect(b.status().waiting.isEmpty)
        a.coverage.release(use)
        // a still caches its grant, unused: a nonblocking request gets it back from a.
        let after = PendingCover(b.coverage, [request("/n/m", .read)], nonblocking: true)
        #expect(after.use != nil)
        // Behind an earlier waiter, nonblocking fails without queueing.
        let bUse = try #require(after.use)
        let queued = PendingCover(a.coverage, [request("/n", .write)])
        #expect(queued.wait(.milliseconds(300)) == nil)
        let c = try session("c")
        defer { c.stop() }
        let behind = PendingCover(c.coverage, [request("/n/o", .read)], nonblocking: true)
        guard case .wouldBlock = behind.wait() else {
            Issue.record("expected wouldBlock behind a's request, got \(String(describing: behind.wait()))")
            return
        }
        #expect(c.status().waiting.count == 1)
        b.coverage.release(bUse)
        let aUse = try #require(queued.use)
        a.coverage.release(aUse)
    }

    @Test func aCancelledWaitLeavesTheQueue() throws {
        let a = try session("a")
        let b = try session("b")
        defer { a.stop(); b.stop() }
        let use = try #require(PendingCover(a.coverage, [request("/c", .write)]).use)
        let waiting = PendingCover(b.coverage, [request("/c", .write)])
        #expect(waiting.wait(.milliseconds(300)) == nil)
        #expect(b.status().waiting.count == 1)
        #expect(b.coverage.cancel(waiting.ticket))
        #expect(!b.coverage.cancel(waiting.ticket))
        a.coverage.release(use)
        #expect(waiting.wait(.milliseconds(500)) == nil, "a cancelled wait never reports")
        #expect(b.status().waiting.isEmpty)
    }

    /// A recall splits the holder's wide grant: the other host gets an unrelated path at once
    /// while the holder's use keeps its own.
    @Test func aRecallSplitsAWideGrant() throws {
        let a = try session("a")
        let b = try session("b")
        defer { a.stop(); b.stop() }
        let use = try #require(PendingCover(a.coverage, [request("/a/x", .write)]).use)
        #expect(a.status().grants.map(\.path) == [Array("/".utf8)], "alone, a host gets the root")
        let other = PendingCover(b.coverage, [request("/b", .write)])
        let bUse = try #require(other.use)
        let took = try #require(other.took)
        #expect(took < .milliseconds(1500), "\(took): the heartbeat is 2 s")
        #expect(a.coverage.stillHolds(use))
        let status = a.status()
        let grants = Set(status.grants.map { "\($0.host) \(String(decoding: $0.path, as: UTF8.self)) \($0.mode)" })
        #expect(grants == ["\(a.host.id) /a/x write", "\(b.host.id) /b write"])
        #expect(status.hosts.map(\.id) == [a.host.id, b.host.id])
        #expect(status.hosts.allSatisfy { $0.alive })
        // a's use stands on /a/x alone now: a conflicting cover there still waits.
        let blocked = PendingCover(b.coverage, [request("/a", .read)])
        #expect(blocked.wait(.milliseconds(300)) == nil)
        a.coverage.release(use)
        #expect(blocked.use != nil)
        b.coverage.release(bUse)
    }

    /// An operation's requests are granted together or not at all: while one waits, the
    /// others are not held (so no two hosts can each hold half of what the other needs).
    @Test func anOperationHoldsNothingWhileItWaits() throws {
        let a = try session("a")
        let b = try session("b")
        defer { a.stop(); b.stop() }
        let use = try #require(PendingCover(a.coverage, [request("/x", .write)]).use)
        let both = PendingCover(b.coverage, [request("/y", .write), request("/x/z", .write)])
        #expect(both.wait(.milliseconds(500)) == nil)
        #expect(!b.status().grants.contains { $0.host == b.host.id })
        a.coverage.release(use)
        let bUse = try #require(both.use)
        #expect(bUse.requests.count == 2)
        b.coverage.release(bUse)
    }

    /// Names are bytes: a component that is not UTF-8, or holds LIKE's wildcards, is compared
    /// exactly, and a prefix that ends inside a component is no ancestor.
    @Test func pathsAreComparedAsBytes() throws {
        let a = try session("a")
        let b = try session("b")
        defer { a.stop(); b.stop() }
        let odd = try #require(MountPath(bytes: [0x2f, 0xff, 0x25, 0x5f, 0x5c]))
        let sibling = try #require(MountPath(bytes: [0x2f, 0xff, 0x25, 0x5f, 0x5c, 0x78]))
        let beneath = try #require(MountPath(bytes: [0x2f, 0xff, 0x25, 0x5f, 0x5c, 0x2f, 0x00 + 0x79]))
        let use = try #require(PendingCover(a.coverage, [ClaimRequest(odd, .exclusive)]).use)
        let beside = try #require(PendingCover(b.coverage, [ClaimRequest(sibling, .exclusive)]).use)
        let under = PendingCover(b.coverage, [ClaimRequest(beneath, .snapshotRead)])
        #expect(under.wait(.milliseconds(500)) == nil)
        #expect(a.status().grants.contains { $0.path == odd.bytes && $0.host == a.host.id })
        a.coverage.release(use)
        #expect(under.use != nil)
        b.coverage.release(beside)
    }

    /// Three hosts, three workers each, covering random modes on overlapping paths: no two
    /// hosts ever hold conflicting uses at once, and every operation is covered in the end.
    @Test func hostsNeverHoldConflictingUsesAtOnce() throws {
        let hosts = try ["a", "b", "c"].map { try session($0) }
        defer { hosts.forEach { $0.stop() } }
        let active = Mutex<[(host: Int, request: ClaimRequest)]>([])
        let problems = Mutex<[String]>([])
        /// Times a host's use began while another host's was held.
        let overlaps = Mutex(0)
        let paths = ["/", "/a", "/a/b", "/a/c", "/d", "/d/e"]
        // Reads most often: grants shared by several hosts, then written under, are the hard case.
        let modes: [ClaimMode] = [.snapshotRead, .read, .read, .read, .write, .write, .exclusive]
        var workers: [pthread_t] = []
        for (index, host) in hosts.enumerated() {
            for _ in 0..<3 {
                // Threads of their own: the global dispatch queue runs only as many as there are cores.
                workers.append(try Threads.spawn {
                    for _ in 0..<30 {
                        var chosen = [request(paths.randomElement()!, modes.randomElement()!)]
                        if Bool.random() { chosen.append(request(paths.randomElement()!, .snapshotRead)) }
                        let use: CoverageUse
                        if let now = host.coverage.coverNow(chosen) {
                            use = now
                        } else if let waited = PendingCover(host.coverage, chosen, within: .seconds(30)).use {
                            use = waited
                        } else {
                            problems.withLock { $0.append("host \(index): \(chosen) was never covered") }
                            continue
                        }
                        active.withLock { held in
                            if held.contains(where: { $0.host != index }) { overlaps.withLock { $0 += 1 } }
                            for other in held where other.host != index {
                                for mine in chosen where !mine.mode.isCompatible(with: other.request.mode)
                                    && (mine.path.isWithin(other.request.path) || other.request.path.isWithin(mine.path)) {
                                    problems.withLock { $0.append("host \(index) got \(mine) while host \(other.host) holds \(other.request)") }
                                }
                            }
                            held += chosen.map { (index, $0) }
                        }
                        usleep(UInt32.random(in: 0...3000))
                        active.withLock { held in
                            for mine in chosen {
                                if let at = held.firstIndex(where: { $0.host == index && $0.request == mine }) { held.remove(at: at) }
                            }
                        }
                        host.coverage.release(use)
                    }
                })
            }
        }
        for worker in workers { pthread_join(worker, nil) }
        let found = problems.withLock { $0 }
        #expect(found.isEmpty, "\(found.prefix(10))")
        #expect(hosts[0].status().waiting.isEmpty)
        // The hosts did run side by side (uses of different hosts held at once).
        #expect(overlaps.withLock { $0 } > 0)
    }

    @Test func statusShowsHostsGrantsAndWaiters() throws {
        let a = try session("a")
        let b = try session("b")
        defer { a.stop(); b.stop() }
        let use = try #require(PendingCover(a.coverage, [request("/s", .exclusive)]).use)
        let waiting = PendingCover(b.coverage, [request("/s/t", .read)])
        #expect(waiting.wait(.milliseconds(300)) == nil)
        let status = b.status()
        #expect(status.connected)
        #expect(status.hosts.map(\.mountpoint) == [Array("/mnt/a".utf8), Array("/mnt/b".utf8)])
        #expect(status.hosts.map(\.isSelf) == [false, true])
        #expect(status.grants.map(\.host) == [a.host.id])
        #expect(status.waiting.map { [UInt8]($0.path) } == [Array("/s/t".utf8)])
        #expect(status.waiting.first?.mode == .read)
        #expect(status.waiting.first?.host == b.host.id)
        a.coverage.release(use)
        #expect(waiting.use != nil)
        b.stop()
        let after = a.status()
        #expect(after.hosts.map(\.id) == [a.host.id], "a clean leave removes the row")
        #expect(after.grants.allSatisfy { $0.host == a.host.id })
    }
}

/// Losing the database: an ended session, a restart, a server that is gone.
@Suite(.serialized)
struct ClusterSessionFailureTests {
    let server: PostgresServer
    let configuration: ClusterConfiguration

    init() throws {
        server = try PostgresServer()
        configuration = ClusterConfiguration(conninfo: server.conninfo(), name: "failures")
    }

    func session(_ name: String) throws -> ClusterSession {
        try ClusterSession(configuration: configuration, mountpoint: Array("/mnt/\(name)".utf8), logger: Logger(label: name))
    }

    func eventually(_ within: Duration = .seconds(10), _ condition: () -> Bool) -> Bool {
        let end = ContinuousClock.now + within
        while ContinuousClock.now < end {
            if condition() { return true }
            usleep(20_000)
        }
        return condition()
    }

    @Test func anEndedSessionFreesItsGrantsAndComesBack() throws {
        let a = try session("a")
        let b = try session("b")
        defer { a.stop(); b.stop() }
        let use = try #require(PendingCover(a.coverage, [request("/k", .write)]).use)
        let waiting = PendingCover(b.coverage, [request("/k", .write)])
        #expect(waiting.wait(.milliseconds(300)) == nil)
        let oldHost = a.host.id
        let backend = try server.query("SELECT server_pid FROM coordfs_hosts WHERE host_id = \(oldHost)")
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let ended = ContinuousClock.now
        try server.query("SELECT pg_terminate_backend(\(backend))")
        let bUse = try #require(waiting.use)
        #expect(ContinuousClock.now - ended < .milliseconds(2000), "freed after \(ContinuousClock.now - ended)")
        #expect(!a.coverage.stillHolds(use))
        #expect(eventually { a.isConnected && a.host.id != oldHost })
        b.coverage.release(bUse)
        a.coverage.release(use)
        let again = try #require(PendingCover(a.coverage, [request("/k", .write)]).use)
        #expect(a.coverage.stillHolds(again))
        a.coverage.release(again)
        #expect(!b.status().hosts.contains { $0.id == oldHost }, "the lost session's row is reaped")
    }

    /// A session that stops answering (its server process stopped) is trusted no longer
    /// than `leaseValidity` after its last confirmed round trip, though its socket stays open.
    @Test func aSilentSessionStopsBeingTrustedAfterItsLease() throws {
        let a = try session("a")
        defer { a.stop() }
        let use = try #require(PendingCover(a.coverage, [request("/l", .write)]).use)
        let backend = try #require(Int32(try server.query("SELECT server_pid FROM coordfs_hosts WHERE host_id = \(a.host.id)")
            .trimmingCharacters(in: .whitespacesAndNewlines)))
        kill(backend, SIGSTOP)
        let stopped = ContinuousClock.now
        #expect(eventually { !a.coverage.stillHolds(use) })
        let after = ContinuousClock.now - stopped
        // The session thread is stuck in its heartbeat: a wait still ends at its deadline.
        #expect(a.coverage.coverNow([request("/l", .write)]) == nil)
        #expect(a.coverage.coverNow([request("/l", .snapshotRead)]) != nil, "reads go on without proof")
        let attempt = PendingCover(a.coverage, [request("/m", .write)], within: .milliseconds(500))
        let outcome = attempt.wait(.seconds(3))
        kill(backend, SIGCONT)
        guard case .cutOff = outcome else {
            Issue.record("expected cutOff, got \(String(describing: outcome))")
            return
        }
        let took = try #require(attempt.took)
        #expect(took < .milliseconds(2000), "\(took)")
        #expect(after <= configuration.leaseValidity + .milliseconds(300), "\(after)")
        #expect(after >= configuration.leaseValidity - configuration.heartbeat - .milliseconds(300), "\(after)")
        #expect(eventually { a.coverage.stillHolds(use) }, "the same session answers again: its uses hold again")
        a.coverage.release(use)
    }

    /// An unmount does not hang on a server that stopped answering.
    @Test func stopIsBoundedWhenTheServerDoesNotAnswer() throws {
        let a = try session("a")
        let backend = try #require(Int32(try server.query("SELECT server_pid FROM coordfs_hosts WHERE host_id = \(a.host.id)")
            .trimmingCharacters(in: .whitespacesAndNewlines)))
        kill(backend, SIGSTOP)
        defer { kill(backend, SIGCONT) }
        usleep(1_500_000)  // the heartbeat is stuck by now
        let started = ContinuousClock.now
        a.stop()
        let took = ContinuousClock.now - started
        #expect(took >= .seconds(4) && took < .seconds(7), "\(took)")
    }

    @Test func aDatabaseThatCannotBeReachedFailsTheStartInOneLine() throws {
        let unreachable = ClusterConfiguration(conninfo: "postgresql:///postgres?host=/nonexistent&port=5432", name: "nowhere")
        #expect {
            _ = try ClusterSession(configuration: unreachable, mountpoint: Array("/mnt/x".utf8), logger: Logger(label: "x"))
        } throws: { error in
            let message = (error as? DatabaseError)?.description ?? ""
            return message.hasPrefix("cannot join cluster nowhere: ") && !message.contains("\n")
        }
    }

    @Test func aRestartPausesAndOldUsesStopHolding() throws {
        let a = try session("a")
        let b = try session("b")
        defer { a.stop(); b.stop() }
        let use = try #require(PendingCover(a.coverage, [request("/r", .write)]).use)
        try server.restart()
        #expect(eventually { !a.coverage.stillHolds(use) })
        let aAgain = try #require(PendingCover(a.coverage, [request("/r", .write)]).use)
        #expect(a.coverage.stillHolds(aAgain))
        let waiting = PendingCover(b.coverage, [request("/r", .read)])
        #expect(waiting.wait(.milliseconds(300)) == nil)
        a.coverage.release(aAgain)
        #expect(waiting.use != nil)
        a.coverage.release(use)
    }

    @Test func aHostCutOffFailsWhatItCannotProveAndStillReads() throws {
        let a = try session("a")
        defer { a.stop() }
        let use = try #require(PendingCover(a.coverage, [request("/c", .write)]).use)
        try server.stop()
        #expect(eventually { !a.isConnected })
        #expect(!a.coverage.stillHolds(use))
        #expect(a.coverage.coverNow([request("/c", .write)]) == nil)
        let read = try #require(a.coverage.coverNow([request("/c", .snapshotRead)]))
        a.coverage.release(read)
        let attempt = PendingCover(a.coverage, [request("/c", .write)], within: .milliseconds(800))
        let outcome = attempt.wait()
        guard case .cutOff = outcome else {
            Issue.record("expected cutOff, got \(String(describing: outcome))")
            return
        }
        let took = try #require(attempt.took)
        #expect(took >= .milliseconds(800) && took < .milliseconds(2500), "\(took)")
        try server.start()
        let back = PendingCover(a.coverage, [request("/c", .write)], within: .seconds(15))
        #expect(back.use != nil)
    }
}
