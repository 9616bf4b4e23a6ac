import Dispatch
import Synchronization
import Testing
@testable import CoordFSCore

/// The matrix of DESIGN.md, written out independently of `ClaimMode.isCompatible`:
/// for each mode, the modes other owners may hold at the same time.
let claimMatrix: [ClaimMode: Set<ClaimMode>] = [
    .snapshotRead: [.snapshotRead, .read, .write],
    .read: [.snapshotRead, .read],
    .write: [.snapshotRead],
    .exclusive: [],
]

/// Parses a test path; test paths are literals, so a bad one is a bug in the test.
func path(_ text: String) -> MountPath {
    guard let parsed = MountPath(text) else { fatalError("bad test path \(text)") }
    return parsed
}

func request(_ text: String, _ mode: ClaimMode) -> ClaimRequest {
    ClaimRequest(path(text), mode)
}

extension ClaimAttempt {
    var grant: ClaimGrant? {
        if case .granted(let grant) = self { return grant }
        return nil
    }

    var ticket: ClaimWaitTicket? {
        if case .waiting(let ticket) = self { return ticket }
        return nil
    }
}

extension ClaimWaitOutcome {
    var grant: ClaimGrant? {
        if case .granted(let grant) = self { return grant }
        return nil
    }

    var blockers: [ClaimHolder]? {
        if case .timedOut(let blockers) = self { return blockers }
        return nil
    }
}

extension Result where Success == ClaimGrant, Failure == ClaimConflict {
    var grant: ClaimGrant? { try? get() }

    var blockers: [ClaimHolder]? {
        if case .failure(let conflict) = self { return conflict.blockers }
        return nil
    }
}

/// Receives one queued request's outcome, on whatever thread the table calls from, and
/// counts the calls (the table promises exactly one, or none after a successful cancel).
final class OutcomeBox: Sendable {
    /// Guards the outcome and the number of calls.
    private let state = Mutex<(outcome: ClaimWaitOutcome?, calls: Int)>((nil, 0))
    private let arrived = DispatchSemaphore(value: 0)
    private let log: OrderLog?
    private let label: String

    init(_ label: String = "", log: OrderLog? = nil) {
        self.label = label
        self.log = log
    }

    var callback: @Sendable (ClaimWaitOutcome) -> Void {
        { outcome in
            self.state.withLock {
                $0.outcome = outcome
                $0.calls += 1
            }
            self.log?.append(self.label)
            self.arrived.signal()
        }
    }

    /// Blocks until the outcome arrives, or returns nil after `seconds`.
    func wait(seconds: Double = 5) -> ClaimWaitOutcome? {
        if let outcome { return outcome }
        guard arrived.wait(timeout: .now() + seconds) == .success else { return nil }
        return outcome
    }

    /// The outcome if it has arrived, without waiting.
    var outcome: ClaimWaitOutcome? { state.withLock { $0.outcome } }
    var calls: Int { state.withLock { $0.calls } }
}

/// The order in which callbacks arrived.
final class OrderLog: Sendable {
    /// Guards the labels.
    private let labels = Mutex<[String]>([])

    func append(_ label: String) {
        labels.withLock { $0.append(label) }
    }

    var entries: [String] { labels.withLock { $0 } }
}

extension ClaimTable {
    /// Acquires with a generous deadline, sending a queued outcome to `box`.
    func acquire(_ requests: [ClaimRequest], owner: ClaimOwner, within timeout: Duration = .seconds(30),
                 box: OutcomeBox) -> ClaimAttempt {
        acquire(requests, owner: owner, deadline: .now + timeout, onOutcome: box.callback)
    }
}
