import CSystemCalls
import Glibc
import SystemPackage

extension ControlLocation {
    /// Finds the mount that holds `path`. A path that does not exist (yet), or whose attribute
    /// this user may not read, is located through its directory, and named inside the mount as
    /// that directory's path plus its last name: the server then says what the user may do
    /// with it (`not-permitted` rather than a misleading "not inside a coordfs mount").
    /// Paths are bytes throughout: a name that is not UTF-8 is found and named exactly.
    public static func locate(_ path: FilePath) throws(CoordFSError) -> ControlLocation {
        switch read(path) {
        case .success(let location):
            return location
        case .failure(let error) where error == .noSuchFileOrDirectory || error == .permissionDenied:
            guard let name = path.lastComponent, name.kind == .regular else {
                throw error == .noSuchFileOrDirectory ? .notInMount(path: path, reason: "it does not exist") : failure(path, error)
            }
            let directory = path.removingLastComponent()
            switch read(directory.isEmpty ? "." : directory) {
            case .success(var location):
                location.path.append(name)
                return location
            case .failure(let inner) where inner == .noSuchFileOrDirectory && error == .noSuchFileOrDirectory:
                throw .notInMount(path: path, reason: "neither it nor its directory exists")
            case .failure(let inner):
                // A directory outside the mount says nothing about a path this user may not read.
                throw failure(path, error == .permissionDenied ? error : inner)
            }
        case .failure(let error):
            throw failure(path, error)
        }
    }

    private static func failure(_ path: FilePath, _ error: Errno) -> CoordFSError {
        switch error {
        case .noData, .notSupported, .notSupportedOnSocket:
            return .notInMount(path: path, reason: "it has no \(attributeName) attribute")
        case .invalidArgument:
            return .notInMount(path: path, reason: "its \(attributeName) attribute is not a coordfs location")
        default:
            return .cannotLocate(path: path, error: error)
        }
    }

    /// The attribute of `path` (following symbolic links), decoded. A value that is not a
    /// location fails as `EINVAL`.
    private static func read(_ path: FilePath) -> Result<ControlLocation, Errno> {
        // A path may be up to PATH_MAX long, so the value may be longer than a first guess.
        var buffer = [UInt8](repeating: 0, count: 1024)
        var count = path.withPlatformString { path in
            buffer.withUnsafeMutableBytes { csys_getxattr(path, attributeName, $0.baseAddress, $0.count, 1) }
        }
        if count < 0 && errno == ERANGE {
            let size = path.withPlatformString { csys_getxattr($0, attributeName, nil, 0, 1) }
            guard size >= 0 else { return .failure(Errno(rawValue: errno)) }
            buffer = [UInt8](repeating: 0, count: size + 1)
            count = path.withPlatformString { path in
                buffer.withUnsafeMutableBytes { csys_getxattr(path, attributeName, $0.baseAddress, $0.count, 1) }
            }
        }
        guard count >= 0 else { return .failure(Errno(rawValue: errno)) }
        guard let location = ControlLocation(attributeValue: Array(buffer[0..<count])), location.socket.hasPrefix("/"), location.path.isAbsolute else {
            return .failure(.invalidArgument)
        }
        return .success(location)
    }
}
