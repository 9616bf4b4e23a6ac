import CFuse
import CoreMetrics

/// The FUSE operations the mount serves, as the metrics label them (`operation="open"`).
public enum FuseOperation: UInt32, CaseIterable, Sendable {
    case lookup, forget, batchForget, getattr, setattr, readlink, mknod, mkdir, unlink, rmdir, symlink, rename, link
    case open, read, write, flush, release, fsync, opendir, readdir, readdirplus, releasedir, fsyncdir, statfs
    case setxattr, getxattr, listxattr, removexattr, access, create, fallocate, copyFileRange, lseek

    /// The label value: the kernel's name for the operation, in lower case with underscores.
    public var label: String {
        switch self {
        case .batchForget: "batch_forget"
        case .copyFileRange: "copy_file_range"
        default: "\(self)"
        }
    }
}

/// Counts FUSE requests and times them from arrival to reply, per operation, through
/// swift-metrics. A request answered at once is timed around its callback; one answered
/// later (after a claim wait or the presenters' answers) carries its arrival to the thread
/// that answers it (`RequestTiming`), and is timed there.
///
/// Sendable: the instruments are made in init and never change; each is thread-safe.
public final class RequestMetrics: Sendable {
    private let requests: [Counter]
    private let durations: [CoreMetrics.Timer]

    /// Makes one counter and one timer per operation from the bootstrapped metrics backend,
    /// so that every operation's series exists before its first request.
    public init() {
        requests = FuseOperation.allCases.map {
            Counter(label: "coordfs_fuse_requests_total", dimensions: [("operation", $0.label)])
        }
        durations = FuseOperation.allCases.map {
            CoreMetrics.Timer(label: "coordfs_fuse_request_duration_seconds", dimensions: [("operation", $0.label)])
        }
    }

    /// A request of `operation` arrived on this thread.
    @inline(__always)
    func begin(_ operation: FuseOperation) {
        cfuse_timing_put(cfuse_request_timing(arrival: cfuse_monotonic_nanoseconds(), operation: operation.rawValue))
    }

    /// The callback of this thread's request returned: records it unless a wait took it.
    @inline(__always)
    func end() {
        record(RequestTiming(raw: cfuse_timing_take()))
    }

    /// Records a request that has been answered.
    func record(_ timing: RequestTiming) {
        guard timing.raw.arrival != 0 else { return }
        let index = Int(timing.raw.operation)
        requests[index].increment()
        let elapsed = cfuse_monotonic_nanoseconds() &- timing.raw.arrival
        durations[index].recordNanoseconds(Int64(clamping: elapsed))
    }
}

/// The arrival of a request that is answered later, possibly on another thread: taken from
/// the thread that received it when it starts to wait, and resumed where it goes on.
struct RequestTiming: Sendable {
    fileprivate let raw: cfuse_request_timing

    fileprivate init(raw: cfuse_request_timing) { self.raw = raw }

    /// Takes this thread's request timing, so that the callback's return does not record it.
    static func takeCurrent() -> RequestTiming { RequestTiming(raw: cfuse_timing_take()) }

    /// Makes this thread's request timing this one again (the wait it was taken for ended on
    /// the thread that took it, and the request goes on there).
    func restore() { cfuse_timing_put(raw) }

    /// Runs `body`, which answers the request or waits again, as this request's thread: it is
    /// recorded afterwards unless `body` took it for another wait. Whatever this thread was
    /// timing before is restored.
    func resume(_ metrics: RequestMetrics?, _ body: () -> Void) {
        guard let metrics else { return body() }
        let outer = cfuse_timing_take()
        cfuse_timing_put(raw)
        body()
        metrics.end()
        cfuse_timing_put(outer)
    }
}
