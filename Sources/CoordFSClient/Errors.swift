@_exported import CoordFSProtocol
// Paths are FilePaths throughout the library: their bytes are exact on Linux, where names
// need not be UTF-8.
@_exported import struct SystemPackage.FilePath
// System calls fail with swift-system's Errno, which errors carry as they are.
@_exported import struct SystemPackage.Errno

/// What can go wrong talking to a coordfs mount, each in one sentence.
public enum CoordFSError: Error, Sendable, CustomStringConvertible {
    /// The path is not inside a coordfs mount (or the mount does not say where its socket is).
    case notInMount(path: FilePath, reason: String)
    /// Whether the path is inside a coordfs mount could not be told: reading its attribute
    /// failed with `error` (e.g. `.permissionDenied` for a directory on the way that this user
    /// may not search).
    case cannotLocate(path: FilePath, error: Errno)
    /// The control socket could not be reached.
    case cannotConnect(socket: String, reason: String)
    /// The server refused a request; `detail.code` says why (`conflict`, `timeout`, `not-permitted`…).
    case server(ErrorDetail)
    /// The connection ended (the mount stopped, or `close()` was called).
    case closed(reason: String)
    /// The server said something this client does not understand.
    case protocolViolation(String)

    public var description: String {
        switch self {
        case .notInMount(let path, let reason): return "\(path) is not inside a coordfs mount (\(reason))"
        case .cannotLocate(let path, let error): return "cannot tell which mount holds \(path): \(error)"
        case .cannotConnect(let socket, let reason): return "cannot connect to the control socket \(socket): \(reason)"
        case .server(let detail): return detail.message
        case .closed(let reason): return "the connection to the mount closed: \(reason)"
        case .protocolViolation(let what): return "unexpected message from the server: \(what)"
        }
    }

    /// The server's error code, when the server refused the request.
    public var code: ErrorCode? {
        if case .server(let detail) = self { return detail.code }
        return nil
    }
}
