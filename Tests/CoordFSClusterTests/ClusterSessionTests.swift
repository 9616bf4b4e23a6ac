import CoordFSCluster
import CoordFSCore
import CoordFSTestSupport
import Dispatch
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
        _ = box.done.wait(timeout: .now() + .milliseconds(Int(seconds * 1000 + attoseconds / 1_000_000_000_000_000)))
        box.done.signal()
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

    func session(_ name: String) throws -> ClusterSession {
        try ClusterSession(configuration: configuration, mountpoint: Array("/mnt/\(name)".utf8), logger: Logger(label: name))
    }

    @Test func aConflictingCoverWaitsAndIsWokenWhenTheHolderReleases() throws {
        let a = try session("a")
        let b = try session("b")
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
        #expect(delay < .milliseconds(700), "woken after \(delay), heartbeat 2 s")
    }

    @Test func anUncontendedHostAsksOnceThenCoversLocally() throws {
        let a = try session("a")
        defer { a.stop() }
        #expect(a.coverage.coverNow([request("/x/y", .write)]) == nil)
        let first = try #require(PendingCover(a.coverage, [request("/x/y", .write)]).use)
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
}
