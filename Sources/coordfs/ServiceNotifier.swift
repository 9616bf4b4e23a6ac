import CoordFSCore
import Glibc
import Synchronization

/// Tells the service manager how the mount is doing, when it started the daemon with
/// `$NOTIFY_SOCKET` (systemd's `Type=notify`): `READY=1` once the mount answers, `STATUS=`
/// lines while it serves, `STOPPING=1` on the way down.
///
/// The protocol (sd_notify(3)) is one datagram of `KEY=value` lines per message on that Unix
/// socket: no library is needed, and a manager that is not there costs nothing.
///
/// Sendable: the socket and address never change (datagrams from several threads do not
/// interleave); `stopped` is atomic.
final class ServiceNotifier: Sendable {
    private let descriptor: Int32
    /// A `sockaddr_un` as bytes, and how many of them the address takes.
    private let address: [UInt8]
    /// Set on the way down: the status thread stops reporting.
    private let stopped = Atomic<Bool>(false)

    /// The notifier `$NOTIFY_SOCKET` asks for, nil when it is unset or empty. The variable is
    /// cleared either way: what the daemon runs must not speak for it.
    static func fromEnvironment() -> ServiceNotifier? {
        guard let value = getenv("NOTIFY_SOCKET").map({ String(cString: $0) }) else { return nil }
        unsetenv("NOTIFY_SOCKET")
        return ServiceNotifier(socketPath: value)
    }

    /// A path names a socket in the filesystem; a leading `@` one in the abstract namespace.
    init?(socketPath: String) {
        var path = Array(socketPath.utf8)
        guard !path.isEmpty, path.first == UInt8(ascii: "/") || path.first == UInt8(ascii: "@") else { return nil }
        let abstract = path.first == UInt8(ascii: "@")
        if abstract { path[0] = 0 } else { path.append(0) }
        var storage = sockaddr_un()
        let pathOffset = MemoryLayout.offset(of: \sockaddr_un.sun_path)!
        guard path.count <= MemoryLayout.size(ofValue: storage.sun_path) else { return nil }
        storage.sun_family = sa_family_t(AF_UNIX)
        var bytes = withUnsafeBytes(of: &storage) { Array($0) }
        bytes.replaceSubrange(pathOffset..<(pathOffset + path.count), with: path)
        address = Array(bytes.prefix(pathOffset + path.count))
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return nil }
    }

    deinit { close(descriptor) }

    /// Sends one message of `lines`; a manager that went away is not an error of the mount's.
    func send(_ lines: [String]) {
        let message = Array(lines.joined(separator: "\n").utf8)
        _ = address.withUnsafeBytes { target in
            message.withUnsafeBytes { body in
                sendto(descriptor, body.baseAddress, body.count, Int32(MSG_NOSIGNAL),
                       target.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(target.count))
            }
        }
    }

    /// Once `mountpoint` answers (the kernel's INIT is done and a statfs through the mount
    /// comes back), sends READY=1 with the first status, then the status whenever it
    /// changes (looked at every `period`), until `stopping`. Runs on a thread of its own: the
    /// caller goes on to serve the mount, which is what the statfs waits for.
    func announceReady(mountpoint: String, every period: Duration = .seconds(2), status: @escaping @Sendable () -> String) {
        let started = try? Threads.spawn { [self] in
            guard waitUntilServing(mountpoint) else { return }
            var last = status()
            send(["READY=1", "STATUS=\(last)", "MAINPID=\(getpid())"])
            while !stopped.load(ordering: .relaxed) {
                Self.sleep(period)
                let now = status()
                if now != last, !stopped.load(ordering: .relaxed) {
                    send(["STATUS=\(now)"])
                    last = now
                }
            }
        }
        if let started { pthread_detach(started) }
    }

    /// Says the mount is going away (and stops the status reports).
    func stopping() {
        stopped.store(true, ordering: .relaxed)
        send(["STOPPING=1", "STATUS=unmounting"])
    }

    /// Waits until `mountpoint` answers as a filesystem of its own (a stat through the mount
    /// waits for the loop to take the kernel's INIT, and shows another device than the
    /// directory it sits in); false when the notifier was stopped first.
    private func waitUntilServing(_ mountpoint: String) -> Bool {
        let parent = mountpoint.lastIndex(of: "/").map { $0 == mountpoint.startIndex ? "/" : String(mountpoint[..<$0]) } ?? "."
        while !stopped.load(ordering: .relaxed) {
            var mounted = stat(), outside = stat()
            if stat(mountpoint, &mounted) == 0, stat(parent, &outside) == 0, mounted.st_dev != outside.st_dev { return true }
            Self.sleep(.milliseconds(5))
        }
        return false
    }

    private static func sleep(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        var remaining = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
        while true {
            var request = remaining
            if nanosleep(&request, &remaining) == 0 || errno != EINTR { return }
        }
    }
}
