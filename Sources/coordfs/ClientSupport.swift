import ArgumentParser
import CoordFSClient
import Dispatch
import Glibc
import Synchronization

/// Runs async client work from a synchronous command (the root command is synchronous, and
/// ArgumentParser runs async subcommands only under an async root): the main thread waits
/// while the work runs on the concurrency pool.
func runBlocking<Value: Sendable>(_ body: @escaping @Sendable () async throws -> Value) throws -> Value {
    let outcome = Mutex<Result<Value, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task {
        let result: Result<Value, any Error>
        do {
            result = .success(try await body())
        } catch {
            result = .failure(error)
        }
        outcome.withLock { $0 = result }
        done.signal()
    }
    done.wait()
    return try outcome.withLock { $0! }.get()
}

/// A path the user named, found in its mount.
struct LocatedPath: Sendable {
    /// As the user wrote it (for messages and for showing event paths).
    let given: String
    let location: ControlLocation
    /// The mount's root as an absolute local path, for showing paths outside `given`.
    let mountRoot: String

    init(_ given: String) throws(CoordFSError) {
        self.given = given
        self.location = try ControlLocation.locate(given)
        let absolute = Self.absolute(given)
        let depth = location.path.split(separator: "/").count
        var components = absolute.split(separator: "/", omittingEmptySubsequences: true)
        components.removeLast(min(depth, components.count))
        self.mountRoot = "/" + components.joined(separator: "/")
    }

    /// The path made absolute (symbolic links resolved where it exists), without a trailing slash.
    private static func absolute(_ path: String) -> String {
        if let resolved = realpath(path, nil) {
            defer { free(resolved) }
            return String(cString: resolved)
        }
        var trimmed = path
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed.removeLast() }
        let slash = trimmed.lastIndex(of: "/")
        let directory = slash.map { trimmed[..<$0].isEmpty ? "/" : String(trimmed[..<$0]) } ?? "."
        let name = slash.map { String(trimmed[trimmed.index(after: $0)...]) } ?? trimmed
        guard let resolved = realpath(directory, nil) else { return trimmed }
        defer { free(resolved) }
        let base = String(cString: resolved)
        return (base == "/" ? "" : base) + "/" + name
    }

    /// How to show a mount-relative path: under the name the user gave when it lies inside
    /// it, otherwise as an absolute local path.
    func display(_ mountPath: String) -> String {
        let base = location.path
        if mountPath == base { return given }
        let prefix = base == "/" ? "/" : base + "/"
        if mountPath.hasPrefix(prefix) {
            let rest = mountPath.dropFirst(prefix.count)
            return (given.hasSuffix("/") ? given : given + "/") + rest
        }
        return (mountRoot == "/" ? "" : mountRoot) + mountPath
    }
}

/// Writes a line to standard output at once, unbuffered (watch's readers read line by line).
func emit(_ line: String) {
    var bytes = Array((line + "\n").utf8)
    var offset = 0
    while offset < bytes.count {
        let count = bytes.withUnsafeMutableBytes { write(1, $0.baseAddress! + offset, $0.count - offset) }
        if count < 0 && errno == EINTR { continue }
        if count <= 0 { return }
        offset += count
    }
}

extension CoordFSError {
    /// The error as the one line the command prints.
    var commandLineMessage: String { description }
}

/// "850ms", "2.3s", "3m12s", "2h03m".
func formatDuration(_ seconds: Double) -> String {
    if seconds < 1 { return "\(Int((seconds * 1000).rounded()))ms" }
    if seconds < 60 { return "\((seconds * 10).rounded() / 10)s" }
    let whole = Int(seconds)
    if whole < 3600 { return "\(whole / 60)m\(String(format2: whole % 60))s" }
    return "\(whole / 3600)h\(String(format2: (whole % 3600) / 60))m"
}

extension String {
    /// Two digits, zero-padded.
    init(format2 value: Int) {
        self = value < 10 ? "0\(value)" : "\(value)"
    }
}
