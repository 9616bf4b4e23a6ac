import CoordFSMetrics
import CoordFSTestSupport
import Logging
import Prometheus
import Synchronization
import Testing

/// The --metrics address rules and the HTTP endpoint on a registry of its own, without a mount.
@Suite struct MetricsAddressTests {
    @Test(arguments: [
        ("127.0.0.1:9464", "127.0.0.1", 9464), ("127.1.2.3:1", "127.1.2.3", 1), ("[::1]:9464", "::1", 9464),
        ("localhost:65535", "localhost", 65535),
    ])
    func loopbackAddressesParse(text: String, host: String, port: Int) throws {
        let address = try MetricsAddress(text)
        #expect(address.host == host && address.port == port)
        #expect(address.description == text)
    }

    @Test(arguments: [
        "9464", "127.0.0.1", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:http", "10.0.0.1:9464",
        "0.0.0.0:9464", "192.168.1.1:9464", "[::]:9464", "::1:9464", "[fe80::1]:9464", "example.com:9464",
        "127.0.0:9464", "127.0.0.256:9464", ":9464",
    ])
    func othersAreRefusedInOneLine(text: String) {
        let error = Self.error(text)
        #expect(error != nil, "\(text) was accepted")
        if let error {
            #expect(!error.description.contains("\n") && error.description.contains("--metrics"), "\(error)")
        }
    }

    static func error(_ text: String) -> MetricsAddressError? {
        do { _ = try MetricsAddress(text) } catch { return error }
        return nil
    }
}

@Suite struct MetricsEndpointTests {
    @Test func answersMetricsAndNothingElse() throws {
        let registry = PrometheusCollectorRegistry()
        let counter = registry.makeCounter(descriptor: MetricNameDescriptor(namespace: "test", metricName: "things", unitName: "total",
                                                                            helpText: "Things."))
        let updates = Atomic<Int>(0)
        let address = try MetricsAddress("127.0.0.1:\(try PlainHTTPResponse.freePort())")
        let endpoint = try MetricsEndpoint.start(address, registry: registry, update: {
            updates.add(1, ordering: .relaxed)
            counter.increment()
        }, logger: Logger(label: "test"))
        defer { endpoint.stop() }

        let first = try PlainHTTPResponse.request(port: address.port, path: "/metrics")
        #expect(first.status == 200)
        #expect(first.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8")
        #expect(first.headers["content-length"] == "\(first.body.utf8.count)")
        #expect(first.body.contains("# TYPE test_things_total counter\n"), "\(first.body)")
        #expect(Exposition(first.body)["test_things_total"] == 1)
        let second = try PlainHTTPResponse.request(port: address.port, path: "/metrics?x=1")
        #expect(Exposition(second.body)["test_things_total"] == 2, "each scrape updates first")

        let head = try PlainHTTPResponse.request(port: address.port, path: "/metrics", method: "HEAD")
        #expect(head.status == 200 && head.body.isEmpty)
        #expect(try PlainHTTPResponse.request(port: address.port, path: "/").status == 404)
        #expect(try PlainHTTPResponse.request(port: address.port, path: "/metricsx").status == 404)
        #expect(try PlainHTTPResponse.request(port: address.port, path: "/metrics", method: "POST").status == 405)
        #expect(updates.load(ordering: .relaxed) == 3, "only the scrapes that print metrics update them")
    }

    @Test func aTakenPortIsRefusedClearly() throws {
        let address = try MetricsAddress("127.0.0.1:\(try PlainHTTPResponse.freePort())")
        let first = try MetricsEndpoint.start(address, registry: PrometheusCollectorRegistry(), update: {}, logger: Logger(label: "test"))
        defer { first.stop() }
        #expect {
            _ = try MetricsEndpoint.start(address, registry: PrometheusCollectorRegistry(), update: {}, logger: Logger(label: "test"))
        } throws: { error in
            "\(error)" == "cannot serve metrics on \(address): Address already in use"
        }
    }
}
