import ArgumentParser
import CoordFSClient
import CoordFSExec
import Glibc

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show who holds and waits for claims, presenters, subscribers and event counters of a coordfs mount (and, with --cluster, the hosts, their grants and their waiting requests).",
        discussion: "Paths are shown relative to the mount, as their bytes (UTF-8 or not). Entries about paths your user could not read are left out."
    )

    @Argument(help: "The mountpoint (or any path inside the mount).", completion: .directory)
    var mountpoint: String

    @Flag(help: "Print the status as one JSON object (the control protocol's status reply).")
    var json = false

    @Flag(name: .shortAndLong, help: "Refresh until interrupted, as watch(1) does (with --json: one JSON line per refresh).")
    var watch = false

    @Option(name: [.customShort("n"), .long], help: ArgumentHelp("Seconds between refreshes with --watch (default 2).", valueName: "seconds"))
    var interval: Double = 2

    func validate() throws {
        guard interval >= 0.1 else { throw ValidationError("--interval must be at least 0.1 seconds") }
    }

    func run() throws {
        do {
            let location = try ControlLocation.locate(ExactArguments.path(mountpoint))
            let display = Display(json: json, watch: watch, interval: interval, mountpoint: ExactArguments.display(mountpoint))
            try runBlocking {
                let connection = try await CoordFSConnection.connect(socketPath: location.socket, client: "coordfs status")
                defer { connection.close() }
                display.show(try await connection.status(), refreshing: false)
                while display.watch {
                    try await Task.sleep(for: .milliseconds(Int64(display.interval * 1000)))
                    display.show(try await connection.status(), refreshing: true)
                }
            }
        } catch let error as CoordFSError {
            throw CleanExit.failure(error.commandLineMessage)
        }
    }

    /// How reports are printed.
    struct Display: Sendable {
        let json: Bool
        let watch: Bool
        let interval: Double
        let mountpoint: String

        /// Prints one report: a JSON line, or the text; with --watch on a terminal, on a
        /// cleared screen under a watch(1)-style heading.
        func show(_ report: StatusReport, refreshing: Bool) {
            if json {
                emit(OutputLine(json: report))
                return
            }
            guard watch else { return emit(Status.render(report)) }
            var heading = Array((isatty(1) != 0 ? "\u{1B}[H\u{1B}[2J" : (refreshing ? "\n" : "")).utf8)
            heading += Array("Every \(interval)s: coordfs status \(mountpoint)  (Ctrl-C to stop)\n\n".utf8)
            emit(OutputLine(bytes: heading + Status.render(report).bytes))
        }
    }

    static func render(_ report: StatusReport) -> OutputLine {
        var lines: [OutputLine] = []
        let server = report.server
        lines.append("\(server.name) · protocol \(server.version) · up \(formatDuration(server.uptime)) · socket \(server.socket)")
        if let versions = report.versions {
            lines.append("\(versions.paused ? "versions paused (the backing is short of free space)" : "keeping versions"): \(versions.versions) of \(versions.files) file\(versions.files == 1 ? "" : "s"), \(Self.mebibytes(Int(versions.bytes)))")
        }
        lines.append(server.watch.map { "watching the backing for changes made directly in it (\($0))" }
                     ?? "not watching the backing: changes made directly in it are not seen")

        let events = report.events
        lines.append("")
        lines.append("events: sequence \(events.sequence), history \(events.history)/\(events.historyCapacity)\(events.historyBytes.map { " in \(Self.mebibytes($0))" } ?? "")\(events.historyByteCapacity.map { "/\(Self.mebibytes($0))" } ?? "") (from \(events.oldest)), \(events.subscribers) subscriber\(events.subscribers == 1 ? "" : "s"), dropped \(events.dropped), overflows \(events.overflows)")

        section(&lines, "claims held", report.claims.held) { holder in
            "\(holder.path)  \(holder.mode)  \(holder.owner)  for \(formatDuration(holder.held))"
        }
        section(&lines, "claims waiting", report.claims.waiting) { waiter in
            "\(waiter.paths, separator: ", ")  \(waiter.mode)  \(waiter.owner)  waiting \(formatDuration(waiter.waiting))"
        }
        section(&lines, "claims broken (held another user back for the break time)", report.claims.broken ?? []) { broken in
            "\(broken.paths, separator: ", ")  \(broken.owner) (uid \(broken.uid))  for \(broken.by) (uid \(broken.byUid)), who waited \(formatDuration(broken.waited))  \(formatDuration(broken.ago)) ago"
        }
        if let limits = report.userLimits, let users = report.users {
            lines.append("per-user limits: \(limits.connections) connections, \(limits.subscriptions) subscriptions, \(limits.presenters) presenters, \(limits.claims) claims, \(limits.asks) unanswered asks (not for root or the mount's owner)")
            section(&lines, "users", users) { user in
                "uid \(user.uid)  \(user.connections) connections, \(user.subscriptions) subscriptions, \(user.presenters) presenters, \(user.claims) claims\(user.limited ? "" : "  (not limited)")"
            }
        }
        section(&lines, "presenters", report.presenters) { presenter in
            let answers = presenter.answers.isEmpty ? "notifications only" : presenter.answers.map(\.rawValue).joined(separator: ",")
            let session = presenter.session.map { "session \($0), " } ?? ""
            return "#\(presenter.presenter)  \(presenter.path)  \(answers)  (\(session)pid \(presenter.pid))  pending \(presenter.pending), asked \(presenter.asked), timed out \(presenter.timedOut), refused \(presenter.refused)\(presenter.unresponsive ? ", unresponsive: not asked until it answers" : "")"
        }
        section(&lines, "presenter requests waiting", report.presenterRequests) { request in
            "#\(request.request)  \(request.kind) \(request.path)  for pid \(request.requester)  waiting \(formatDuration(request.waiting)) on \(request.awaiting.map { "#\($0)" }.joined(separator: ","))"
        }
        section(&lines, "subscribers", report.subscribers) { subscriber in
            let kinds = subscriber.kinds.count == EventKind.allCases.count ? "all kinds" : subscriber.kinds.map(\.rawValue).joined(separator: ",")
            return "session \(subscriber.session) #\(subscriber.subscription)  \(subscriber.path)\(subscriber.recursive ? " (recursive)" : "")  \(kinds)  queue \(subscriber.queued)/\(subscriber.capacity), delivered \(subscriber.delivered), dropped \(subscriber.dropped)"
        }
        if let cluster = report.cluster {
            lines.append("")
            let state = cluster.connected ? "connected" : "cut off from its database" + (cluster.problem.map { ": \($0)" } ?? "")
            lines.append("cluster \"\(cluster.name)\": this is host \(cluster.host), \(state)")
            section(&lines, "hosts", cluster.hosts) { host in
                "host \(host.id)\(host.id == cluster.host ? " (this one)" : "")  \(host.hostname)  pid \(host.pid)  \(host.mountpoint)\(host.alive ? "" : "  (gone: reaped once its lease is over)")"
            }
            section(&lines, "grants held by hosts", cluster.held) { claim in
                "\(claim.path)  \(claim.mode)  host \(claim.host)  for \(formatDuration(claim.age))"
            }
            section(&lines, "hosts waiting for grants", cluster.waiting) { claim in
                "\(claim.path)  \(claim.mode)  host \(claim.host)  waiting \(formatDuration(claim.age))"
            }
        }
        section(&lines, "connections", report.connections) { connection in
            "session \(connection.session)  pid \(connection.pid)  uid \(connection.uid)  \(connection.client ?? "-")  for \(formatDuration(connection.age))"
        }
        return OutputLine(bytes: Array(lines.map(\.bytes).joined(separator: [UInt8(ascii: "\n")])))
    }

    /// "3.2 MiB".
    private static func mebibytes(_ bytes: Int) -> String {
        "\((Double(bytes) / 1_048_576 * 10).rounded() / 10) MiB"
    }

    private static func section<Item>(_ lines: inout [OutputLine], _ title: String, _ items: [Item], _ describe: (Item) -> OutputLine) {
        lines.append("")
        lines.append(items.isEmpty ? "\(title): none" : "\(title) (\(items.count)):")
        for item in items { lines.append(OutputLine(bytes: Array("  ".utf8) + describe(item).bytes)) }
    }
}
