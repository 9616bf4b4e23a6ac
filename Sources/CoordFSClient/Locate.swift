import CSystemCalls
import Glibc

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Where a path's mount takes control requests, and what the path is called inside it.
///
/// Every item in a coordfs mount has the virtual extended attribute `user.coordfs.control`,
/// whose value is `{"version":1,"socket":"/run/…/x.sock","path":"/rel/path"}`: clients find
/// the socket from any path in the mount without being told where it is.
public struct ControlLocation: Sendable, Hashable, Codable {
    public var version: Int
    /// The control socket.
    public var socket: String
    /// The path, relative to the mount's root ("/" for the mountpoint itself).
    public var path: String

    public init(version: Int, socket: String, path: String) {
        self.version = version
        self.socket = socket
        self.path = path
    }

    /// The name of the attribute the mount answers with its location.
    public static let attributeName = "user.coordfs.control"

    /// Finds the mount that holds `path`. A path that does not exist (yet), or whose attribute
    /// this user may not read, is located through its directory, and named inside the mount as
    /// that directory's path plus its last name: the server then says what the user may do
    /// with it (`not-permitted` rather than a misleading "not inside a coordfs mount").
    public static func locate(_ path: String) throws(CoordFSError) -> ControlLocation {
        switch read(path) {
        case .success(let location):
            return location
        case .failure(let error) where error.code == ENOENT || error.code == EACCES:
            let (directory, name) = split(path)
            guard !name.isEmpty, name != ".", name != ".." else {
                throw error.code == ENOENT ? .notInMount(path: path, reason: "it does not exist") : failure(path, error.code)
            }
            switch read(directory) {
            case .success(var location):
                location.path = location.path == "/" ? "/" + name : location.path + "/" + name
                return location
            case .failure(let inner) where inner.code == ENOENT && error.code == ENOENT:
                throw .notInMount(path: path, reason: "neither it nor its directory exists")
            case .failure(let inner):
                // A directory outside the mount says nothing about a path this user may not read.
                throw failure(path, error.code == EACCES ? EACCES : inner.code)
            }
        case .failure(let error):
            throw failure(path, error.code)
        }
    }

    private static func failure(_ path: String, _ error: Int32) -> CoordFSError {
        switch error {
        case ENODATA, ENOTSUP, EOPNOTSUPP:
            return .notInMount(path: path, reason: "it has no \(attributeName) attribute")
        case EINVAL:
            return .notInMount(path: path, reason: "its \(attributeName) attribute is not a coordfs location")
        default:
            return .cannotLocate(path: path, reason: String(cString: strerror(error)))
        }
    }

    /// The directory and last name of a path as given ("a/b/" → ("a", "b"); "b" → (".", "b")).
    static func split(_ path: String) -> (directory: String, name: String) {
        var trimmed = Substring(path)
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return (".", String(trimmed)) }
        let directory = trimmed[..<slash]
        return (directory.isEmpty ? "/" : String(directory), String(trimmed[trimmed.index(after: slash)...]))
    }

    /// The attribute of `path` (following symbolic links), decoded; errno on failure.
    private static func read(_ path: String) -> Result<ControlLocation, SystemError> {
        // A path may be up to PATH_MAX long, so the value may be longer than a first guess.
        var buffer = [UInt8](repeating: 0, count: 1024)
        var count = buffer.withUnsafeMutableBytes { csys_getxattr(path, attributeName, $0.baseAddress, $0.count, 1) }
        if count < 0 && errno == ERANGE {
            let size = csys_getxattr(path, attributeName, nil, 0, 1)
            guard size >= 0 else { return .failure(SystemError(code: errno)) }
            buffer = [UInt8](repeating: 0, count: size + 1)
            count = buffer.withUnsafeMutableBytes { csys_getxattr(path, attributeName, $0.baseAddress, $0.count, 1) }
        }
        guard count >= 0 else { return .failure(SystemError(code: errno)) }
        guard let location = try? JSONDecoder().decode(ControlLocation.self, from: Data(buffer[0..<count])),
              location.socket.hasPrefix("/"), location.path.hasPrefix("/") else {
            return .failure(SystemError(code: EINVAL))
        }
        return .success(location)
    }
}

/// An errno as an Error, for `Result`.
struct SystemError: Error {
    let code: Int32
}
