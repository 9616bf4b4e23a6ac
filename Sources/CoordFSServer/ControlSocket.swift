import CoordFSCore
import CoordFSProtocol
import Glibc
import NIOCore
import SystemPackage

/// Why the control socket could not be set up.
public struct ControlSocketError: Error, CustomStringConvertible, Sendable {
    public let description: String

    init(_ description: String) {
        self.description = description
    }

    init(_ what: String, _ path: String, _ error: Errno) {
        self.description = "\(what) \(path): \(error)"
    }
}

/// Creating, finding and removing the socket file.
public enum ControlSocket {
    /// Where a mount's socket goes when the mount command is not told: in the runtime
    /// directory (`/run/coordfs` for root, `$XDG_RUNTIME_DIR/coordfs` or `/run/user/UID/coordfs`
    /// otherwise, `/tmp/coordfs-UID` as a last resort), named after a hash of the mountpoint
    /// so it stays short (socket paths are limited to `ProtocolLimits.maxSocketPathBytes`). A socket shared with other
    /// users (`shared`) must be reachable by them, and per-user runtime directories are not:
    /// it goes to `/run/coordfs` for root and `/tmp/coordfs-UID` for anyone else.
    ///
    /// Clients never need this rule: they read the path from the mount (`user.coordfs.control`).
    public static func defaultPath(forMountpoint mountpoint: String, shared: Bool = false) -> String {
        let uid = getuid()
        let directory: String
        if uid == 0 {
            directory = "/run/coordfs"
        } else if !shared, let runtime = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), runtime.hasPrefix("/") {
            directory = runtime + "/coordfs"
        } else if !shared, access("/run/user/\(uid)", W_OK | X_OK) == 0 {
            directory = "/run/user/\(uid)/coordfs"
        } else {
            directory = "/tmp/coordfs-\(uid)"
        }
        return directory + "/" + hexHash(mountpoint) + ".sock"
    }

    /// 64-bit FNV-1a of the path, in hex: stable across runs and builds (Swift's Hasher is not).
    static func hexHash(_ text: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        let digits = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    /// The socket's address, or the clear error for a path too long to be one.
    static func address(_ path: String) throws(ControlSocketError) -> SocketAddress {
        do {
            return try SocketAddress(unixDomainSocketPath: path)
        } catch {
            throw ControlSocketError("the socket path \(path) is too long for a Unix socket (at most \(ProtocolLimits.maxSocketPathBytes) bytes)")
        }
    }

    /// Makes the socket's directory when missing (its parent must exist): private (0700) for a
    /// private socket, 0711 (others may pass through, not list) for a shared one. An existing
    /// directory must belong to us or root and not be writable by others (unless sticky, as
    /// /tmp), or someone could swap the socket.
    static func prepareDirectory(of path: String, shared: Bool) throws(ControlSocketError) {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return }
        let directory = String(path[..<slash])
        var status = stat()
        if lstat(directory, &status) != 0 {
            guard errno == ENOENT else { throw ControlSocketError("cannot use the socket directory", directory, .current) }
            if mkdir(directory, shared ? 0o711 : 0o700) != 0 && errno != EEXIST {
                throw ControlSocketError("cannot create the socket directory", directory, .current)
            }
            if shared { chmod(directory, 0o711) }
            guard lstat(directory, &status) == 0 else { throw ControlSocketError("cannot use the socket directory", directory, .current) }
        }
        guard (status.st_mode & S_IFMT) == S_IFDIR else {
            throw ControlSocketError("the socket directory \(directory) is not a directory")
        }
        let sticky = status.st_mode & S_ISVTX != 0
        guard status.st_uid == geteuid() || status.st_uid == 0 else {
            throw ControlSocketError("the socket directory \(directory) belongs to uid \(status.st_uid), not to this user")
        }
        if status.st_mode & 0o022 != 0 && !sticky {
            throw ControlSocketError("the socket directory \(directory) is writable by others; choose another place")
        }
        if shared && status.st_uid == geteuid() && status.st_mode & 0o011 != 0o011 && directory != "/run" && directory != "/tmp" {
            chmod(directory, (status.st_mode & 0o7777) | 0o011)
        }
    }

    /// Removes a socket file that no server listens on any more; refuses to touch anything
    /// else. A server that still listens is given up to `grace` to go (a daemon whose mount
    /// was just unmounted closes its socket a moment later); one that stays means another
    /// daemon uses this path.
    static func removeStale(_ path: String, at address: SocketAddress, waitingUpTo grace: Duration) throws(ControlSocketError) {
        let deadline = ContinuousClock.now + grace
        while try isListening(path, at: address) {
            guard ContinuousClock.now < deadline else {
                throw ControlSocketError("another coordfs daemon still listens on \(path) (one whose mount was detached lazily "
                                         + "serves until its open files close); wait for it to exit, or choose another path with --socket")
            }
            usleep(20_000)
        }
        if unlink(path) != 0 && errno != ENOENT {
            throw ControlSocketError("cannot remove the stale socket", path, .current)
        }
    }

    /// Whether a server accepts connections on the socket file at `path`; false when there is
    /// no file. Anything there but a socket is an error: it is not ours to replace.
    private static func isListening(_ path: String, at address: SocketAddress) throws(ControlSocketError) -> Bool {
        var status = stat()
        guard lstat(path, &status) == 0 else { return false }
        guard (status.st_mode & S_IFMT) == S_IFSOCK else {
            throw ControlSocketError("\(path) exists and is not a socket; not replacing it")
        }
        let probe = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard probe >= 0 else { throw ControlSocketError("cannot create a socket for", path, .current) }
        defer { close(probe) }
        return address.withSockAddr { connect(probe, $0, socklen_t($1)) } == 0
    }

    /// A bound (not yet listening) stream socket at `path` whose file has exactly `mode`.
    /// The socket's inode is made owner-only before `bind` (Linux gives the new file the
    /// socket's mode, less the umask), so the file never exists with wider permissions than
    /// asked, whatever the umask; `chmod` then sets the exact mode.
    static func bind(_ path: String, at address: SocketAddress, mode: mode_t) throws(ControlSocketError)
        -> (descriptor: Int32, identity: FileIdentity) {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw ControlSocketError("cannot create a socket for", path, .current) }
        guard fchmod(fd, 0o600) == 0, address.withSockAddr({ Glibc.bind(fd, $0, socklen_t($1)) }) == 0 else {
            let error = Errno.current
            close(fd)
            throw ControlSocketError("cannot create the socket", path, error)
        }
        var status = stat()
        guard chmod(path, mode & 0o777) == 0, lstat(path, &status) == 0 else {
            let error = Errno.current
            close(fd)
            unlink(path)
            throw ControlSocketError("cannot set the mode of", path, error)
        }
        return (fd, FileIdentity(status))
    }

    /// Removes the socket file if it is still the one this server created.
    static func remove(_ path: String, identity: FileIdentity) {
        var status = stat()
        if lstat(path, &status) == 0, FileIdentity(status) == identity {
            unlink(path)
        }
    }
}
