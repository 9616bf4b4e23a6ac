import CoordFSCore
import CoreMetrics
import Prometheus

/// The Prometheus registry behind swift-metrics for this process: every counter and timer the
/// core and the FUSE layer make through swift-metrics lands here, and the endpoint prints it.
public enum MetricsBackend {
    /// Request latencies: from tens of microseconds (a cached lookup) to the claim timeout.
    static let requestBuckets: [Duration] = [
        .microseconds(50), .microseconds(100), .microseconds(250), .microseconds(500),
        .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
        .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5),
        .seconds(10), .seconds(30), .seconds(60),
    ]
    /// Claim waits: a wait is at least a context switch, at most the longest wait a client may ask for.
    static let claimWaitBuckets: [Duration] = [
        .milliseconds(1), .milliseconds(5), .milliseconds(10), .milliseconds(50), .milliseconds(100), .milliseconds(250),
        .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10), .seconds(30), .seconds(60),
        .seconds(300),
    ]

    /// Makes the registry the process's swift-metrics backend and creates every series, so a
    /// scrape shows them all from the start. Call once, before the mount is made (swift-metrics
    /// instruments take their backend when they are created).
    public static func bootstrap() -> PrometheusCollectorRegistry {
        let registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets = [
            "coordfs_fuse_request_duration_seconds": requestBuckets,
            "coordfs_claim_wait_seconds": claimWaitBuckets,
        ]
        MetricsSystem.bootstrap(factory)
        Instruments.prepare()
        return registry
    }
}

/// The registry type, named for the command line without importing Prometheus there.
public typealias PrometheusRegistry = PrometheusCollectorRegistry
