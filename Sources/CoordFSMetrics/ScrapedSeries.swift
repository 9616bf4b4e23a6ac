import CoordFSCore
import Prometheus
import Synchronization

/// The series whose values the mount already keeps elsewhere (the event hub's sequence, the
/// presenters' request numbers, the node and claim tables): read at each scrape rather than
/// counted a second time on the way.
public final class ScrapedSeries: Sendable {
    private let hub: EventHub
    private let presenters: PresenterRegistry
    private let claims: ClaimTable
    private let nodes: NodeTable

    private let eventsPublished: Prometheus.Counter
    private let eventsDropped: Prometheus.Counter
    private let presenterRequests: Prometheus.Counter
    private let subscribers: Prometheus.Gauge
    private let presenterCount: Prometheus.Gauge
    private let nodeCount: Prometheus.Gauge
    private let claimsHeld: Prometheus.Gauge
    private let claimsWaiting: Prometheus.Gauge

    /// The totals the counters above were last brought to. Prometheus counters only go up, by
    /// the difference since the last scrape. A leaf lock: the sources are read before it is taken.
    private let exported = Mutex(Totals())

    private struct Totals {
        var eventsPublished: UInt64 = 0
        var eventsDropped: UInt64 = 0
        var presenterRequests: UInt64 = 0
    }

    /// The series of `mount`'s tables.
    public convenience init(registry: PrometheusCollectorRegistry, mount: CoordinatedMount) {
        self.init(registry: registry, hub: mount.events, presenters: mount.presenters, claims: mount.claims, nodes: mount.nodes)
    }

    public init(registry: PrometheusCollectorRegistry, hub: EventHub, presenters: PresenterRegistry, claims: ClaimTable, nodes: NodeTable) {
        self.hub = hub
        self.presenters = presenters
        self.claims = claims
        self.nodes = nodes
        eventsPublished = registry.makeCounter(descriptor: .coordfs("events_published", unit: "total", help: "Change events published to subscribers."))
        eventsDropped = registry.makeCounter(descriptor: .coordfs("events_dropped", unit: "total", help: "Events dropped because a subscriber's queue was full."))
        presenterRequests = registry.makeCounter(descriptor: .coordfs("presenter_requests", unit: "total", help: "Requests put to presenters."))
        subscribers = registry.makeGauge(descriptor: .coordfs("event_subscribers", unit: "", help: "Event subscriptions now open."))
        presenterCount = registry.makeGauge(descriptor: .coordfs("presenters", unit: "", help: "Presenters now registered."))
        nodeCount = registry.makeGauge(descriptor: .coordfs("nodes", unit: "", help: "Entries in the node table (inodes the kernel knows)."))
        claimsHeld = registry.makeGauge(descriptor: .coordfs("claims_held", unit: "", help: "Claims now held, one per path and holder."))
        claimsWaiting = registry.makeGauge(descriptor: .coordfs("claims_waiting", unit: "", help: "Claim requests now queued."))
    }

    /// Brings every series up to date; called before each scrape is printed.
    public func update() {
        let events = hub.statistics()
        let asked = presenters.requestsAsked
        let table = claims.snapshot()
        subscribers.set(Int64(events.subscribers))
        presenterCount.set(Int64(presenters.presenters().count))
        nodeCount.set(Int64(nodes.count))
        claimsHeld.set(Int64(table.holders.count))
        claimsWaiting.set(Int64(table.waiters.count))
        exported.withLock { totals in
            Self.advance(eventsPublished, from: &totals.eventsPublished, to: events.sequence)
            Self.advance(eventsDropped, from: &totals.eventsDropped, to: events.dropped)
            Self.advance(presenterRequests, from: &totals.presenterRequests, to: asked)
        }
    }

    private static func advance(_ counter: Prometheus.Counter, from last: inout UInt64, to now: UInt64) {
        guard now > last else { return }
        counter.increment(by: Int64(clamping: now - last))
        last = now
    }
}

extension MetricNameDescriptor {
    /// `coordfs_NAME_UNIT`, with the help line Prometheus shows.
    static func coordfs(_ name: String, unit: String, help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(namespace: "coordfs", metricName: name, unitName: unit, helpText: help)
    }
}
