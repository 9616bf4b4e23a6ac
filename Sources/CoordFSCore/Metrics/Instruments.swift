import CoreMetrics

/// The counters and timers the core reports through swift-metrics, where the thing counted
/// happens and nothing else keeps a total of it. Each is made from the metrics backend on its
/// first use: the daemon bootstraps one before it mounts when it serves metrics, and otherwise
/// swift-metrics' default does nothing (a call that returns). Values other places already keep
/// (event sequence numbers, the node table's size) are read when scraped instead
/// (CoordFSMetrics's `ScrapedSeries`). Names and meanings: Docs/METRICS.md.
public enum Instruments {
    static let claimsGranted = Counter(label: "coordfs_claims_total", dimensions: [("result", "granted")])
    static let claimsTimedOut = Counter(label: "coordfs_claims_total", dimensions: [("result", "timed_out")])
    static let claimsInterrupted = Counter(label: "coordfs_claims_total", dimensions: [("result", "interrupted")])
    static let claimsWouldBlock = Counter(label: "coordfs_claims_total", dimensions: [("result", "would_block")])
    /// Grants taken from a holder because they kept another user waiting for the break time.
    static let claimsBroken = Counter(label: "coordfs_claims_broken_total")
    /// How long queued claim requests waited, whatever ended the wait (grant, timeout, withdrawal).
    static let claimWait = CoreMetrics.Timer(label: "coordfs_claim_wait_seconds")

    static let savesCommitted = Counter(label: "coordfs_saves_total", dimensions: [("result", "committed")])
    static let savesDiscarded = Counter(label: "coordfs_saves_total", dimensions: [("result", "discarded")])
    static let savesRecovered = Counter(label: "coordfs_saves_total", dimensions: [("result", "recovered")])

    static let presenterTimeouts = Counter(label: "coordfs_presenter_timeouts_total")

    /// Creates every instrument now (each is otherwise made at its first use), so that all
    /// their series show from the first scrape. Call after bootstrapping the backend.
    public static func prepare() {
        _ = [claimsGranted, claimsTimedOut, claimsInterrupted, claimsWouldBlock, savesCommitted, savesDiscarded,
             savesRecovered, presenterTimeouts, claimsBroken]
        _ = claimWait
    }

    /// A save's changes reached the backing under the file's name.
    public static func saveCommitted() { savesCommitted.increment() }

    /// A save left by a crash was moved to the recovery folder (or an unfinished append rolled back) at mount.
    public static func saveRecovered() { savesRecovered.increment() }

    /// A request that would not wait was refused because of a conflicting claim.
    public static func claimWouldBlock() { claimsWouldBlock.increment() }

    static func claimWaitEnded(since: ContinuousClock.Instant) {
        claimWait.recordNanoseconds((ContinuousClock.now - since).wholeNanoseconds)
    }
}

extension Duration {
    /// Whole nanoseconds, saturating (a duration of centuries does not occur here).
    var wholeNanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (product, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? .max : product &+ attoseconds / 1_000_000_000
    }
}
