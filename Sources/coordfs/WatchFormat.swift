import CoordFSClient
import Glibc
import SystemPackage

// inotifywait(1)'s spellings for `coordfs watch`: --format with %w %f %e %T, --timefmt, and
// --exclude/--include regexes, so its users' scripts read coordfs's events unchanged.

/// A `--format` as inotifywait reads it: `%w` the directory (with its slash), `%f` the name in
/// it (empty for an event on a watched file itself), `%e` the events in inotify's names
/// separated by commas (`,ISDIR` for a directory), `%T` the time per `--timefmt`, `%%` a `%`.
/// A move is two lines, MOVED_FROM for where it was and MOVED_TO for where it went, as
/// inotify reports a rename.
struct EventFormat: Sendable {
    private let format: [UInt8]
    private let timeFormat: String
    /// The event names given with -e, lowercased: a move prints only the halves asked for, and
    /// a change is MODIFY when that, not CLOSE_WRITE, was asked.
    private let asked: Set<String>

    init(_ format: String, timeFormat: String?, askedNames: Set<String>) {
        self.format = Array(format.utf8)
        self.timeFormat = timeFormat ?? "%H:%M"
        self.asked = askedNames
    }

    /// The inotify names of an event, with the place each names (a move: where it was, and where it went).
    private func inotifyNames(of event: EventRecord) -> [(name: String, place: FilePath)] {
        func askedAny(_ names: String...) -> Bool { asked.isEmpty || names.contains(where: asked.contains) }
        // A commit happens when the writer closes; MODIFY when only that was asked for.
        let written = asked.contains("modify") && !askedAny("close_write", "close", "changed", "change") ? "MODIFY" : "CLOSE_WRITE,CLOSE"
        switch event.kind {
        case .created:
            // A new file appears with its first commit, at its writer's close: inotify reports
            // that close too.
            var lines: [(name: String, place: FilePath)] = []
            if askedAny("create", "created") { lines.append(("CREATE", event.path)) }
            if !event.directory, askedAny("close_write", "close", "modify", "changed", "change") { lines.append((written, event.path)) }
            return lines
        case .changed:
            return [(written, event.path)]
        case .deleted: return [("DELETE", event.path)]
        case .moved:
            var halves: [(name: String, place: FilePath)] = []
            if askedAny("moved", "move", "moved_from", "move_self") { halves.append(("MOVED_FROM", event.path)) }
            if askedAny("moved", "move", "moved_to"), let destination = event.destination { halves.append(("MOVED_TO", destination)) }
            return halves
        case .attributes: return [("ATTRIB", event.path)]
        case .conflict: return [("CONFLICT", event.path)] // coordfs's own: the save kept the outside version beside it
        case .versionAdded, .versionRemoved, .conflictResolved:
            // The version store's, which inotify has no name for: only when asked by name,
            // so that scripts written for inotifywait meet nothing new.
            return asked.contains(event.kind.rawValue) ? [(String(event.kind.rawValue.uppercased().map { $0 == "-" ? "_" : $0 }), event.path)] : []
        }
    }

    /// The lines of one event; `path` shows event paths as the user named them.
    func lines(for event: EventRecord, watched path: LocatedPath) -> [OutputLine] {
        inotifyNames(of: event).map { name, place in
            line(path: path.display(place), isWatched: WirePath.bytes(of: place) == WirePath.bytes(of: path.location.path),
                 events: name + (event.directory ? ",ISDIR" : ""), time: event.time)
        }
    }

    /// The overflow marker, in inotify's name for it.
    func overflowLine(watched path: LocatedPath) -> OutputLine {
        line(path: path.given, isWatched: true, events: "Q_OVERFLOW", time: Double(time(nil)))
    }

    private func line(path: [UInt8], isWatched: Bool, events: String, time: Double) -> OutputLine {
        let (directory, name) = isWatched ? (path, [UInt8]()) : Self.split(path)
        var bytes: [UInt8] = []
        var index = format.startIndex
        while index < format.endIndex {
            let byte = format[index]
            index += 1
            guard byte == UInt8(ascii: "%"), index < format.endIndex else {
                bytes.append(byte)
                continue
            }
            let code = format[index]
            index += 1
            switch code {
            case UInt8(ascii: "w"): bytes += directory
            case UInt8(ascii: "f"): bytes += name
            case UInt8(ascii: "e"): bytes += events.utf8
            case UInt8(ascii: "T"): bytes += Self.formatTime(time, timeFormat).utf8
            case UInt8(ascii: "%"): bytes.append(UInt8(ascii: "%"))
            default: bytes += [UInt8(ascii: "%"), code] // as inotifywait: unknown codes stay as typed
            }
        }
        return OutputLine(bytes: bytes)
    }

    /// A path as inotifywait splits it: the directory with its trailing slash, and the name.
    static func split(_ path: [UInt8]) -> (directory: [UInt8], name: [UInt8]) {
        guard let slash = path.lastIndex(of: UInt8(ascii: "/")) else { return ([], path) }
        return (Array(path[...slash]), Array(path[(slash + 1)...]))
    }

    static func formatTime(_ time: Double, _ format: String) -> String {
        var seconds = time_t(time)
        var parts = tm()
        localtime_r(&seconds, &parts)
        var buffer = [CChar](repeating: 0, count: 256)
        let count = strftime(&buffer, buffer.count, format, &parts)
        return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// inotifywait's `--exclude`/`--include` (and their case-insensitive `i` forms): a POSIX
/// extended regular expression matched against an event's whole path as printed. An event
/// is shown when it matches the include (if any) and not the exclude.
final class PathFilter: @unchecked Sendable {
    // @unchecked Sendable: the compiled expressions are written once, in init, and only read (regexec)
    // after, which glibc allows from several threads at once; they are freed in deinit.
    private let exclude: UnsafeMutablePointer<regex_t>?
    private let include: UnsafeMutablePointer<regex_t>?

    init(exclude: String?, excludeIgnoringCase: Bool, include: String?, includeIgnoringCase: Bool) throws(RegexError) {
        let excluding = try exclude.map { pattern throws(RegexError) in try Self.compile(pattern, ignoringCase: excludeIgnoringCase) }
        do {
            self.include = try include.map { pattern throws(RegexError) in try Self.compile(pattern, ignoringCase: includeIgnoringCase) }
        } catch {
            excluding.map(Self.free)
            throw error
        }
        self.exclude = excluding
    }

    deinit {
        exclude.map(Self.free)
        include.map(Self.free)
    }

    struct RegexError: Error, CustomStringConvertible {
        let description: String
    }

    private static func compile(_ pattern: String, ignoringCase: Bool) throws(RegexError) -> UnsafeMutablePointer<regex_t> {
        let compiled = UnsafeMutablePointer<regex_t>.allocate(capacity: 1)
        compiled.initialize(to: regex_t())
        let result = regcomp(compiled, pattern, REG_EXTENDED | REG_NOSUB | (ignoringCase ? REG_ICASE : 0))
        guard result == 0 else {
            var message = [CChar](repeating: 0, count: 256)
            regerror(result, compiled, &message, message.count)
            compiled.deallocate()
            throw RegexError(description: "'\(pattern)': \(String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))")
        }
        return compiled
    }

    private static func free(_ compiled: UnsafeMutablePointer<regex_t>) {
        regfree(compiled)
        compiled.deallocate()
    }

    /// Whether an event at `path` (bytes as printed) is shown.
    func shows(_ path: [UInt8]) -> Bool {
        let text = path.map { CChar(bitPattern: $0) } + [0]
        if let include, regexec(include, text, 0, nil, 0) != 0 { return false }
        if let exclude, regexec(exclude, text, 0, nil, 0) == 0 { return false }
        return true
    }
}
