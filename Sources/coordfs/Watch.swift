import ArgumentParser
import CoordFSClient
import CoordFSExec
import Glibc
import Synchronization

struct Watch: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print change events of paths in coordfs mounts, as they are committed.",
        discussion: """
        One line per event, "PATH KIND" ("FROM moved TO" for moves, "PATH conflict KEPT" when a \
        save met a change made behind the mount; directories end in "/"), like inotifywait -m: \
        paths are printed as their bytes, as given and as named, whether UTF-8 or not. KIND is \
        created, changed, deleted, moved, attributes or conflict; a change made directly in the \
        backing directory ends in "(outside)", or "(outside: PROCESS PID)" when known; one another host \
        of the cluster committed (mount --cluster) ends in "(host NAME: PROCESS PID)". With --json, \
        one JSON object per line: the control protocol's event (paths relative to the mount, \
        with pathBytes when a path is not UTF-8). \
        When events are lost because they were not read fast enough, a line "PATH overflow N" \
        says so: rescan ("PATH overflow N (backing)" when the mount lost track of changes made \
        directly in its backing: anything may have changed). Exit status: 0 after an event or --count events, 2 when --timeout \
        passed without any, 1 on error.
        """
    )

    @Argument(help: "Files or directories inside coordfs mounts.", completion: .file())
    var paths: [String]

    @Flag(name: [.short, .long], help: "Watch whole subtrees, not only a directory's own entries.")
    var recursive = false

    @Option(name: [.customShort("e"), .customLong("event")], parsing: .singleValue,
            help: ArgumentHelp("Only these kinds (repeat, or separate with commas).", valueName: "kinds"))
    var events: [String] = []

    @Flag(help: "Print JSON lines instead of text.")
    var json = false

    @Option(help: ArgumentHelp("First replay the events after this sequence number, if the mount still has them.", valueName: "seq"))
    var since: UInt64?

    @Option(name: [.short, .long], help: ArgumentHelp("Stop after this many seconds.", valueName: "seconds"))
    var timeout: Double?

    @Option(name: [.customShort("n"), .customLong("count")], help: ArgumentHelp("Stop after this many events.", valueName: "n"))
    var count: Int?

    @Flag(name: [.short, .long], help: "Keep watching (the default; inotifywait's -m).")
    var monitor = false

    @Flag(name: [.short, .long], help: "Say nothing on standard error but errors (inotifywait's -q).")
    var quiet = false

    @Option(help: ArgumentHelp("Print each event as inotifywait --format does: %w the directory, %f the name, %e the events in inotify's names, %T the time (--timefmt).", valueName: "format"))
    var format: String?

    @Option(help: ArgumentHelp("strftime(3) format of %T (default %H:%M).", valueName: "format"))
    var timefmt: String?

    @Option(help: ArgumentHelp("Leave out events whose path matches this extended regular expression.", valueName: "regex"))
    var exclude: String?

    @Option(help: ArgumentHelp("The same, ignoring case.", valueName: "regex"))
    var excludei: String?

    @Option(help: ArgumentHelp("Show only events whose path matches this extended regular expression.", valueName: "regex"))
    var include: String?

    @Option(help: ArgumentHelp("The same, ignoring case.", valueName: "regex"))
    var includei: String?

    /// inotify's names are accepted too, for the fingers that know them (each change a
    /// commit makes is one event here, so several of inotify's name the same kind).
    static let kindNames: [String: EventKind] = [
        "created": .created, "create": .created,
        "changed": .changed, "change": .changed, "modify": .changed, "close_write": .changed, "close": .changed,
        "deleted": .deleted, "delete": .deleted, "delete_self": .deleted,
        "moved": .moved, "move": .moved, "moved_from": .moved, "moved_to": .moved, "move_self": .moved,
        "attributes": .attributes, "attrib": .attributes,
        "conflict": .conflict,
    ]

    /// inotify's names for what no coordfs event reports: reads and opens change nothing.
    static let unreportedNames: Set<String> = ["access", "open", "close_nowrite", "unmount"]

    /// The event names given with -e, lowercased.
    var askedNames: Set<String> {
        Set(events.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters().lowercased() })
    }

    var kinds: Set<EventKind>? {
        get throws {
            let names = events.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters().lowercased() }
            guard !names.isEmpty else { return nil }
            var kinds = Set<EventKind>()
            for name in names {
                if Self.unreportedNames.contains(name) {
                    throw ValidationError("'\(name)': coordfs reports changes (created, changed, deleted, moved, attributes, conflict), not reads or opens")
                }
                guard let kind = Self.kindNames[name] else {
                    throw ValidationError("unknown event kind '\(name)'; use created, changed, deleted, moved, attributes or conflict")
                }
                kinds.insert(kind)
            }
            return kinds
        }
    }

    /// The --exclude/--include filter, nil without one.
    var filter: PathFilter? {
        get throws {
            guard exclude != nil || excludei != nil || include != nil || includei != nil else { return nil }
            if exclude != nil && excludei != nil || include != nil && includei != nil {
                throw ValidationError("give --exclude or --excludei (--include or --includei), not both")
            }
            do {
                return try PathFilter(exclude: exclude ?? excludei, excludeIgnoringCase: excludei != nil,
                                      include: include ?? includei, includeIgnoringCase: includei != nil)
            } catch {
                throw ValidationError("not an extended regular expression: \(error)")
            }
        }
    }

    func validate() throws {
        _ = try kinds
        _ = try filter
        if json && format != nil { throw ValidationError("--json and --format exclude each other") }
        if let timeout, !(timeout > 0) { throw ValidationError("--timeout must be a positive number of seconds") }
        if let count, count < 1 { throw ValidationError("--count must be at least 1") }
    }

    func run() throws {
        let located: [LocatedPath]
        do {
            located = try paths.map { path throws(CoordFSError) in try LocatedPath(path) }
        } catch {
            throw CleanExit.failure(error.commandLineMessage)
        }
        var kinds = try kinds
        if format != nil, kinds?.contains(.changed) == true {
            // A new file's first commit is its `created` event, which inotify reports as a write's close too.
            kinds?.insert(.created)
        }
        let options = WatchOptions(recursive: recursive, kinds: kinds, json: json, since: since,
                                   timeout: timeout, count: count, quiet: quiet,
                                   format: format.map { EventFormat($0, timeFormat: timefmt, askedNames: askedNames) },
                                   filter: try filter)
        let outcome: WatchOutcome
        do {
            outcome = try runBlocking { try await options.watch(located) }
        } catch let error as CoordFSError {
            throw CleanExit.failure(error.commandLineMessage)
        }
        switch outcome {
        case .sawEvents: return
        case .timedOutQuietly: throw ExitCode(2)
        }
    }
}

enum WatchOutcome: Sendable {
    case sawEvents
    case timedOutQuietly
}

struct WatchOptions: Sendable {
    var recursive: Bool
    var kinds: Set<EventKind>?
    var json: Bool
    var since: UInt64?
    var timeout: Double?
    var count: Int?
    var quiet = false
    var format: EventFormat?
    var filter: PathFilter?

    /// One line to print, or the end.
    private enum Item: Sendable {
        case line(OutputLine)
        case failed(CoordFSError)
    }

    func watch(_ located: [LocatedPath]) async throws(CoordFSError) -> WatchOutcome {
        // One connection per mount; one subscription per path.
        var connections: [String: CoordFSConnection] = [:]
        var subscriptions: [(LocatedPath, EventStream)] = []
        defer { for connection in connections.values { connection.close() } }
        for path in located {
            let connection: CoordFSConnection
            if let existing = connections[path.location.socket] {
                connection = existing
            } else {
                connection = try await CoordFSConnection.connect(socketPath: path.location.socket, client: "coordfs watch")
                connections[path.location.socket] = connection
            }
            let subscription = try await connection.subscribe(path.location.path, recursive: recursive, kinds: kinds, since: since)
            if subscription.needsResync && !quiet {
                printError("\(String(decoding: path.given, as: UTF8.self)): events after \(since ?? 0) are no longer kept by the mount; rescan (watching from \(subscription.sequence))")
            }
            subscriptions.append((path, subscription))
        }

        let (lines, sink) = AsyncStream.makeStream(of: Item.self)
        let (json, format, filter) = (self.json, self.format, self.filter)
        for (path, subscription) in subscriptions {
            Task {
                do {
                    for try await message in subscription {
                        for line in Self.lines(message, path: path, json: json, format: format, filter: filter) {
                            sink.yield(.line(line))
                        }
                    }
                    sink.yield(.failed(.closed(reason: "the subscription ended")))
                } catch let error as CoordFSError {
                    sink.yield(.failed(error))
                } catch {
                    sink.yield(.failed(.closed(reason: "\(error)")))
                }
            }
        }
        if let timeout {
            Task {
                try? await Task.sleep(for: .nanoseconds(Int64(min(timeout, 1e9) * 1e9)))
                sink.finish()
            }
        }
        var printed = 0
        for await item in lines {
            switch item {
            case .line(let line):
                emit(line)
                printed += 1
                if let count, printed >= count { return .sawEvents }
            case .failed(let error):
                throw error
            }
        }
        return printed > 0 ? .sawEvents : .timedOutQuietly
    }

    /// What one message prints: nothing when the filter leaves its event out, two lines for a
    /// move in `--format`, else one.
    static func lines(_ message: SubscriptionMessage, path: LocatedPath, json: Bool, format: EventFormat?,
                      filter: PathFilter?) -> [OutputLine] {
        if let filter, case .event(let event) = message {
            let suffix: [UInt8] = event.directory ? [UInt8(ascii: "/")] : []
            let shown = [event.path] + (event.destination.map { [$0] } ?? [])
            guard shown.contains(where: { filter.shows(path.display($0) + suffix) }) else { return [] }
        }
        guard let format else { return [Self.format(message, path: path, json: json)] }
        switch message {
        case .event(let event): return format.lines(for: event, watched: path)
        case .overflow: return [format.overflowLine(watched: path)]
        }
    }

    static func format(_ message: SubscriptionMessage, path: LocatedPath, json: Bool) -> OutputLine {
        if json { return jsonLine(message) }
        switch message {
        case .event(let event):
            let suffix = event.directory ? "/" : ""
            var line: OutputLine
            if event.kind == .moved || event.kind == .conflict, let destination = event.destination {
                line = "\(raw: path.display(event.path))\(suffix) \(event.kind) \(raw: path.display(destination))\(suffix)"
            } else {
                line = "\(raw: path.display(event.path))\(suffix) \(event.kind)"
            }
            if let host = event.origin.host {
                line = "\(raw: line.bytes) (host \(host.name): \(event.origin.process ?? "?") \(event.origin.pid ?? 0))"
            } else if event.origin.isOutside {
                if let process = event.origin.process, let pid = event.origin.pid {
                    line = "\(raw: line.bytes) (outside: \(process) \(pid))"
                } else {
                    line = "\(raw: line.bytes) (outside)"
                }
            }
            return line
        case .overflow(let overflow):
            return "\(raw: path.given) overflow \(overflow.dropped)\(overflow.reason.map { " (\($0))" } ?? "")"
        }
    }

    /// `--json`'s line: the protocol's event as a push carries it, or its overflow marker
    /// under `"overflow"`, so that a reader tells the two apart at once.
    static func jsonLine(_ message: SubscriptionMessage) -> OutputLine {
        switch message {
        case .event(let event): OutputLine(json: event)
        case .overflow(let overflow): OutputLine(json: ["overflow": overflow])
        }
    }
}

extension StringProtocol {
    func trimmingCharacters() -> String {
        String(drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
    }
}
