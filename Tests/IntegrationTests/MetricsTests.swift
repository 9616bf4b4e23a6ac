import CoordFSTestSupport
import Foundation
import Glibc
import Testing

/// The Prometheus endpoint of a real mount (`--metrics`), scraped over a plain socket: every
/// series Docs/METRICS.md lists is served with its documented type, values move with the work
/// done through the mount, and bad addresses or a taken port fail before anything is mounted.
@Suite(.serialized) struct MetricsTests {
    /// The series table of Docs/METRICS.md: name to type (the test and the doc cannot drift apart).
    static func documentedSeries() throws -> [String: String] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("Docs/METRICS.md"), encoding: .utf8)
        var series: [String: String] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("| `coordfs_") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            series[cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`"))] = cells[1]
        }
        return series
    }

    /// The operations the doc lists for the FUSE series' `operation` label.
    static func documentedOperations() throws -> [String] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("Docs/METRICS.md"), encoding: .utf8)
        guard let row = text.split(separator: "\n").first(where: { $0.hasPrefix("| `coordfs_fuse_requests_total`") }) else { return [] }
        let meaning = row.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }[3]
        let afterColon = meaning[meaning.range(of: ":")!.upperBound...]
        return afterColon.split(separator: ",").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: " `")) }
    }

    static func scrape(_ port: Int) throws -> Exposition {
        let response = try PlainHTTPResponse.request(port: port, path: "/metrics")
        #expect(response.status == 200)
        return Exposition(response.body)
    }

    @Test func servesEveryDocumentedSeries() throws {
        let documented = try Self.documentedSeries()
        #expect(documented.count >= 14, "the doc's table: \(documented)")
        let port = try PlainHTTPResponse.freePort()
        let scratch = try Scratch()
        try scratch.mount(["--metrics", "127.0.0.1:\(port)"])
        defer { scratch.unmount() }

        let response = try PlainHTTPResponse.request(port: port, path: "/metrics")
        #expect(response.status == 200)
        #expect(response.headers["content-type"]?.hasPrefix("text/plain; version=0.0.4") == true, "\(response.headers)")
        let exposition = Exposition(response.body)
        for (name, type) in documented {
            #expect(exposition.types[name] == type, "\(name) is documented as a \(type); served: \(exposition.types[name] ?? "nothing")")
        }
        for (name, _) in exposition.types where name.hasPrefix("coordfs_") {
            #expect(documented[name] != nil, "\(name) is served but not in Docs/METRICS.md")
        }
        let operations = try Self.documentedOperations()
        #expect(operations.count >= 30, "\(operations)")
        for operation in operations {
            #expect(exposition.samples["coordfs_fuse_requests_total{operation=\"\(operation)\"}"] != nil, "no series for \(operation)")
            #expect(exposition.samples["coordfs_fuse_request_duration_seconds_count{operation=\"\(operation)\"}"] != nil,
                    "no histogram for \(operation)")
        }

        let elsewhere = try PlainHTTPResponse.request(port: port, path: "/")
        #expect(elsewhere.status == 404)
        #expect(try PlainHTTPResponse.request(port: port, path: "/metrics/x").status == 404)
    }

    /// Creates through the mount move the request, save and event counters; a claim held by
    /// `coordfs exec` makes an open wait (the wait histogram and the open's latency grow by
    /// the wait) and, held longer than the claim timeout, time out.
    @Test func valuesFollowTheWork() throws {
        let port = try PlainHTTPResponse.freePort()
        let scratch = try Scratch()
        try scratch.mount(["--metrics", "127.0.0.1:\(port)", "--claim-timeout", "1"])
        defer { scratch.unmount() }

        let before = try Self.scrape(port)
        let count = 25
        for index in 0..<count {
            let fd = open(scratch.mountpoint + "/file\(index)", O_WRONLY | O_CREAT | O_EXCL, 0o644)
            #expect(fd >= 0)
            _ = write(fd, "x", 1)
            close(fd)
        }
        // A request is counted once answered, and the kernel sends a file's RELEASE after
        // close(2) has returned: scraped until every series has counted all the work (or 10 s
        // went by, and the checks below fail).
        let grown = [#"coordfs_fuse_requests_total{operation="create"}"#,
                     #"coordfs_fuse_request_duration_seconds_count{operation="create"}"#,
                     #"coordfs_fuse_requests_total{operation="release"}"#,
                     #"coordfs_saves_total{result="committed"}"#,
                     "coordfs_events_published_total",
                     #"coordfs_claims_total{result="granted"}"#]
        var after = try Self.scrape(port)
        let deadline = ContinuousClock.now + .seconds(10)
        while grown.contains(where: { after[$0] - before[$0] < Double(count) }), ContinuousClock.now < deadline {
            usleep(20_000)
            after = try Self.scrape(port)
        }
        for series in grown {
            #expect(after[series] - before[series] >= Double(count), "\(series)")
        }
        #expect(after["coordfs_nodes"] >= Double(count))

        // A wait: the holder lets go after 0.6 s, well within the 1 s claim timeout.
        let target = scratch.mountpoint + "/file0"
        let shortHolder = try Self.holdClaim(on: target, seconds: "0.6", scratch: scratch, port: port)
        let waited = Self.openForWriting(target)
        #expect(waited == 0, "the open after the wait: \(String(cString: strerror(waited)))")
        shortHolder.waitUntilExit()
        let afterWait = try Self.scrape(port)
        #expect(afterWait["coordfs_claim_wait_seconds_count"] - after["coordfs_claim_wait_seconds_count"] >= 1)
        #expect(afterWait["coordfs_claim_wait_seconds_sum"] - after["coordfs_claim_wait_seconds_sum"] >= 0.2)
        let openLatency = #"coordfs_fuse_request_duration_seconds_sum{operation="open"}"#
        #expect(afterWait[openLatency] - after[openLatency] >= 0.2, "the open's latency counts its wait")

        // A timeout: the holder keeps the claim past the claim timeout.
        let longHolder = try Self.holdClaim(on: target, seconds: "2.5", scratch: scratch, port: port)
        let refused = Self.openForWriting(target)
        #expect(refused == EBUSY, "the open past the claim timeout: \(String(cString: strerror(refused)))")
        longHolder.waitUntilExit()
        let afterTimeout = try Self.scrape(port)
        #expect(afterTimeout[#"coordfs_claims_total{result="timed_out"}"#] - afterWait[#"coordfs_claims_total{result="timed_out"}"#] >= 1)
        #expect(afterTimeout[openLatency] - afterWait[openLatency] >= 0.9, "a timed-out open counts its whole wait")
    }

    /// Starts `coordfs exec --write PATH -- sleep SECONDS` and returns once the claim shows as held.
    static func holdClaim(on path: String, seconds: String, scratch: Scratch, port: Int) throws -> Process {
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: coordfsBinary)
        holder.arguments = ["exec", "--write", path, "--", "sleep", seconds]
        holder.standardOutput = FileHandle.nullDevice
        holder.standardError = FileHandle.nullDevice
        try holder.run()
        let deadline = Date().addingTimeInterval(10)
        while try scrape(port)["coordfs_claims_held"] < 1 {
            guard holder.isRunning, Date() < deadline else { throw MountError(message: "coordfs exec never held its claim") }
            usleep(10_000)
        }
        return holder
    }

    /// Opens `path` for appending and closes it: 0 when the open succeeded, else its errno.
    static func openForWriting(_ path: String) -> Int32 {
        let fd = open(path, O_WRONLY | O_APPEND)
        if fd < 0 { return errno }
        close(fd)
        return 0
    }

    /// Addresses that are not loopback, or not HOST:PORT, fail the command with one line before
    /// it mounts; a port something else listens on fails the mount, and nothing is mounted.
    @Test func badAddressesAndTakenPortsMountNothing() throws {
        let scratch = try Scratch()
        for address in ["10.1.2.3:9464", "0.0.0.0:9464", "example.com:9464", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:70000", "::1:9464"] {
            let result = try run([coordfsBinary, "mount", scratch.backing, scratch.mountpoint, "--metrics", address])
            #expect(result.status != 0, "--metrics \(address) was accepted")
            let lines = result.errors.split(separator: "\n")
            #expect(lines.count == 1 && lines[0].contains("--metrics"), "--metrics \(address): \(result.errors)")
            #expect(!isMounted(scratch.mountpoint))
        }

        // Something else listens on the port.
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listening = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, length) == 0 && getsockname(listener, $0, &length) == 0 && listen(listener, 1) == 0
            }
        }
        try #require(listening)
        let port = Int(UInt16(bigEndian: address.sin_port))
        let result = try run([coordfsBinary, "mount", scratch.backing, scratch.mountpoint, "--metrics", "127.0.0.1:\(port)"])
        if isMounted(scratch.mountpoint) { _ = try? run([coordfsBinary, "unmount", scratch.mountpoint]) }
        #expect(result.status != 0, "the mount went ahead on a taken port")
        let lines = result.errors.split(separator: "\n")
        #expect(lines.count == 1 && lines[0].contains("127.0.0.1:\(port)") && lines[0].contains("in use"), "\(result.errors)")
        #expect(!isMounted(scratch.mountpoint))
    }

    /// The mount-helper form mount(8) runs (`coordfs SOURCE MOUNTPOINT -o metrics=…`) maps the
    /// option like every other, on IPv6 loopback as well.
    @Test func fstabOptionServesMetrics() throws {
        let scratch = try Scratch()
        let port = try PlainHTTPResponse.freePort()
        let result = try run([coordfsBinary, scratch.backing, scratch.mountpoint, "-o", "metrics=127.0.0.1:\(port),nofail"])
        defer {
            if isMounted(scratch.mountpoint) {
                let unmounted = try? run([coordfsBinary, "unmount", scratch.mountpoint])
                #expect(unmounted?.status == 0)
            }
        }
        #expect(result.status == 0, "\(result)")
        #expect(isMounted(scratch.mountpoint))
        let exposition = try Self.scrape(port)
        #expect(exposition.types["coordfs_fuse_requests_total"] == "counter")
    }
}
