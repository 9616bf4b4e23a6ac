import ArgumentParser
import CoordFSClient
import CoordFSExec
import Dispatch
import Glibc
import Synchronization
import SystemPackage

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

/// A path the user named, found in its mount. Bytes throughout: a name that is not UTF-8 is
/// found, and shown back, exactly as typed.
struct LocatedPath: Sendable {
    /// As the user wrote it (for showing event paths), byte for byte.
    let given: [UInt8]
    let location: ControlLocation
    /// The mount's root as an absolute local path, for showing paths outside `given`.
    let mountRoot: [UInt8]

    /// `argument`: the command-line argument as ArgumentParser gave it (see `ExactArguments`).
    init(_ argument: String) throws(CoordFSError) {
        given = ExactArguments.bytes(of: argument)
        location = try ControlLocation.locate(ExactArguments.path(argument))
        let depth = WirePath.bytes(of: location.path).split(separator: UInt8(ascii: "/")).count
        var components = Self.absolute(given).split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true)
        components.removeLast(min(depth, components.count))
        mountRoot = [UInt8(ascii: "/")] + Array(components.joined(separator: [UInt8(ascii: "/")]))
    }

    /// The path made absolute (symbolic links resolved where it exists), without a trailing slash.
    private static func absolute(_ path: [UInt8]) -> [UInt8] {
        if let resolved = realPath(path) { return resolved }
        var trimmed = path[...]
        while trimmed.count > 1 && trimmed.last == UInt8(ascii: "/") { trimmed = trimmed.dropLast() }
        let slash = trimmed.lastIndex(of: UInt8(ascii: "/"))
        let directory = slash.map { trimmed[..<$0].isEmpty ? [UInt8(ascii: "/")] : Array(trimmed[..<$0]) } ?? [UInt8(ascii: ".")]
        let name = slash.map { Array(trimmed[($0 + 1)...]) } ?? Array(trimmed)
        guard let base = realPath(directory) else { return Array(trimmed) }
        return (base == [UInt8(ascii: "/")] ? [] : base) + [UInt8(ascii: "/")] + name
    }

    private static func realPath(_ path: [UInt8]) -> [UInt8]? {
        let cString = path.map { CChar(bitPattern: $0) } + [0]
        guard let resolved = cString.withUnsafeBufferPointer({ realpath($0.baseAddress!, nil) }) else { return nil }
        defer { free(resolved) }
        return Array(UnsafeRawBufferPointer(start: resolved, count: strlen(resolved)))
    }

    /// How to show a mount-relative path: under the name the user gave when it lies inside
    /// it, otherwise as an absolute local path. Bytes, as they are.
    func display(_ mountPath: FilePath) -> [UInt8] {
        let path = WirePath.bytes(of: mountPath)
        let base = WirePath.bytes(of: location.path)
        if path == base { return given }
        let prefix = base == [UInt8(ascii: "/")] ? base : base + [UInt8(ascii: "/")]
        if path.starts(with: prefix) {
            return (given.last == UInt8(ascii: "/") ? given : given + [UInt8(ascii: "/")]) + path.dropFirst(prefix.count)
        }
        return (mountRoot == [UInt8(ascii: "/")] ? [] : mountRoot) + path
    }
}

/// Writes a line to standard output at once, unbuffered (watch's readers read line by line).
func emit(_ line: OutputLine) {
    let bytes = line.bytes + [UInt8(ascii: "\n")]
    var offset = 0
    while offset < bytes.count {
        let count = bytes.withUnsafeBytes { write(1, $0.baseAddress! + offset, $0.count - offset) }
        if count < 0 && errno == EINTR { continue }
        if count <= 0 { return }
        offset += count
    }
}

func emit(_ text: String) {
    emit(OutputLine(bytes: Array(text.utf8)))
}
