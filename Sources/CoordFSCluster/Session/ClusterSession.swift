import CoordFSCore
import Dispatch
import Glibc
import Logging
import Synchronization
import SystemPackage

/// This mount's membership of its cluster: one database session, owned by one thread, that
/// registers the host (its liveness lock), LISTENs on the cluster's channel, proves itself
/// every `heartbeat` (reaping hosts whose session ended), asks for and gives back grants, and
/// comes back after losing the database (a new host id and a new fence every time: the old
/// row and grants are left to be reaped like a dead host's, so nothing of the lost session can
/// be mistaken for the new one's; `host` changes with it).
///
/// Bounds, with the default configuration (Docs/LOCKING.md, "Across hosts"):
/// - A host that unmounts leaves: its grants go at once.
/// - A host whose process dies: its socket closes and the server ends its session and its
///   liveness lock at once, but its grants go only once the lease of its last heartbeat is
///   over (the server cannot tell a dead host from a live one whose session it ended): ≤ 4.4 s.
/// - A host whose machine or network dies: the server ends its session after
///   `serverSideTimeout` (8 s, keepalives and TCP_USER_TIMEOUT), then as above.
/// - A host that cannot prove its session trusts its grants no longer than `leaseValidity`
///   (3 s) after its last heartbeat was sent: the server recorded that heartbeat no earlier
///   (`proved_at`), and reaps no session of the host before that lease (with a margin) is over.
/// - Lost session: reconnects at once, then every second, and takes the lost session's grants
///   out; waits go on up to their deadline (then `.cutOff`), and every use given out before
///   fails `stillHolds`.
///
/// Sendable: the shared state is behind its lock, the thread handle behind another.
public final class ClusterSession: Sendable {
    private let shared: SessionShared
    private let coverageImplementation: ClusterCoverage
    /// The session thread, until `stop` joins it. Guards nothing else; taken alone.
    private let thread = Mutex<pthread_t?>(nil)

    /// Connects, registers and starts the session thread; throws (one clear line) when the
    /// database cannot be reached at mount time.
    public init(configuration: ClusterConfiguration, mountpoint: [UInt8], logger: Logger) throws(DatabaseError) {
        let sent = ContinuousClock.now
        let link: SessionLink
        do throws(DatabaseError) {
            link = try SessionLink(configuration: configuration, mountpoint: mountpoint)
        } catch {
            // libpq's messages run over several lines; a mount that cannot start says it in one.
            let message = error.description.split(whereSeparator: \.isNewline)
                .map { $0.trimmingPrefix(while: \.isWhitespace) }.joined(separator: "; ")
            throw DatabaseError("cannot join cluster \(configuration.name): \(message)", sqlState: error.sqlState,
                                connectionLost: error.connectionLost)
        }
        let wake: OwnedDescriptor
        do {
            wake = try Syscall.eventCounter()
        } catch {
            throw DatabaseError("cannot make the cluster session's wake-up descriptor: \(error)")
        }
        shared = SessionShared(configuration: configuration, mountpoint: mountpoint, logger: logger,
                               host: link.host, lastProof: sent, wake: wake)
        coverageImplementation = ClusterCoverage(shared: shared)
        let loop = SessionLoop(shared: shared, link: link)
        let handOver = HandOver(loop)
        do {
            let started = try Threads.spawn { handOver.loop.run() }
            thread.withLock { $0 = started }
        } catch {
            throw DatabaseError("cannot start the cluster session's thread: \(error)")
        }
        logger.info("joined cluster \(configuration.name) as host \(link.host.id)")
    }

    deinit {
        stop()
    }

    /// Who this mount is in the cluster (a new id after each reconnection).
    public var host: ClusterHost { shared.state.withLock { $0.host } }

    public var coverage: any HostCoverage { coverageImplementation }

    /// Whether the session is up now.
    public var isConnected: Bool { shared.state.withLock { $0.connected } }

    /// Round trips that asked the database for grants so far: an uncontended host makes one
    /// for its first operation and none after (for the tests).
    public var grantRoundTrips: UInt64 { shared.grantRoundTrips.load(ordering: .relaxed) }

    /// Hosts, grants and waiting requests of the whole cluster, as the database has them now
    /// (asked on the session's connection by its thread; this thread waits up to 5 s). Not to
    /// be called from a coverage callback (they run on the session thread).
    public func status() -> ClusterStatus {
        let answer = Mutex<ClusterStatus?>(nil)
        let done = DispatchSemaphore(value: 0)
        let job: @Sendable (SessionLink?) -> Void = { link in
                let status: ClusterStatus
                if let link {
                    do throws(DatabaseError) {
                        status = try link.status()
                    } catch {
                        status = ClusterStatus(hosts: [], grants: [], waiting: [], connected: link.connection.isOpen,
                                               problem: error.description)
                    }
                } else {
                    status = ClusterStatus(hosts: [], grants: [], waiting: [], connected: false, problem: nil)
                }
                answer.withLock { $0 = status }
                done.signal()
        }
        let (problem, stopping) = shared.state.withLock { state in
            if !state.stopping { state.jobs.append(job) }
            return (state.problem, state.stopping)
        }
        if stopping { return ClusterStatus(hosts: [], grants: [], waiting: [], connected: false, problem: "the mount is stopping") }
        shared.signal()
        guard done.wait(timeout: .now() + 5) == .success, let status = answer.withLock({ $0 }) else {
            return ClusterStatus(hosts: [], grants: [], waiting: [], connected: false,
                                 problem: problem ?? "the cluster session did not answer in 5 s")
        }
        if !status.connected, status.problem == nil {
            return ClusterStatus(hosts: [], grants: [], waiting: [], connected: false, problem: problem)
        }
        return status
    }

    /// A clean leave: this host's grants, requests and row go (the others are woken), waiting
    /// covers end `.cutOff`, and the session closes. Idempotent. Waits up to 5 s for the
    /// session thread, which may be stuck in a round trip to a server that stopped answering
    /// (an unmount must not hang on it): then it is left to end on its own.
    public func stop() {
        shared.state.withLock { $0.stopping = true }
        shared.signal()
        guard let running = thread.withLock({ $0.take() }) else { return }
        if pthread_equal(running, pthread_self()) == 0, shared.finished.wait(timeout: .now() + 5) == .success {
            pthread_join(running, nil)
        } else {
            if pthread_equal(running, pthread_self()) == 0 {
                shared.logger.warning("the cluster session did not end in 5 s (its database does not answer); leaving it behind")
            }
            pthread_detach(running)
        }
    }
}

/// Moves the loop (and its connection) to the session thread, which alone uses it from then on.
private final class HandOver: @unchecked Sendable {
    let loop: SessionLoop
    init(_ loop: SessionLoop) { self.loop = loop }
}
