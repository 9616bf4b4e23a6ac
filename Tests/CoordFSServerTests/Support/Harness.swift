import CoordFSCore
import CoordFSProtocol
import CoordFSServer
import Foundation
import Glibc
import Logging
import Testing

struct HarnessError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A control server on a socket in a private scratch directory, with the real event hub and
/// presenter registry, the stand-in claim table, and permission checks against a scratch
/// backing directory. No FUSE.
final class ServerFixture {
    let directory: String
    let backing: String
    let socketPath: String
    let hub: EventHub
    let presenters: PresenterRegistry
    let claims = ClaimTable()
    let rootDescriptor: Int32
    let server: ControlServer

    init(mode: mode_t = 0o600, queueCapacity: Int = EventHub.defaultQueueCapacity, historyCapacity: Int = EventHub.defaultHistoryCapacity,
         isInTree: @escaping @Sendable (Int32, Int32) -> Bool = ProcessFacts.isInTreeRule,
         options: ControlServer.Options = ControlServer.Options()) throws {
        var template = Array("/tmp/coordfs-control-XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else { throw HarnessError("mkdtemp") }
        directory = String(cString: made)
        chmod(directory, 0o711)  // other users may pass through to the socket, not list
        backing = directory + "/backing"
        mkdir(backing, 0o755)
        socketPath = directory + "/control.sock"
        hub = EventHub(historyCapacity: historyCapacity, queueCapacity: queueCapacity)
        presenters = PresenterRegistry(isInTree: isInTree)
        rootDescriptor = open(backing, Linux.O_PATH | O_DIRECTORY | O_CLOEXEC)
        var logger = Logger(label: "test.control")
        logger.logLevel = .warning
        server = try ControlServer.start(socketPath: socketPath, mode: mode, hub: hub, presenters: presenters, claims: claims,
                                         access: BackingPathAccess(rootDescriptor: rootDescriptor), logger: logger, options: options)
    }

    func stop() {
        server.stop()
        close(rootDescriptor)
        _ = shell("rm -rf '\(directory)'")
    }

    func connect(hello: Bool = true, client: String = "test") throws -> LineClient {
        let connection = try LineClient(socketPath: socketPath)
        if hello {
            let reply = try connection.request(#"{"id":0,"op":"hello","version":1,"client":"\#(client)"}"#)
            guard reply["ok"] != nil else { throw HarnessError("hello failed: \(reply)") }
        }
        return connection
    }

    func publish(_ kind: ChangeKind, _ path: String, to destination: String? = nil, directory: Bool = false, pid: Int32 = 4242) {
        hub.publish(kind, path: MountPath(path)!, destination: destination.flatMap(MountPath.init), isDirectory: directory,
                    origin: EventOrigin(pid: pid, uid: 1000, processName: "writer"), size: kind == .deleted ? nil : 5)
    }

    /// Waits until `condition` holds, polling.
    func eventually(within limit: Duration = .seconds(5), _ condition: () -> Bool) -> Bool {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if condition() { return true }
            usleep(2_000)
        }
        return condition()
    }

    /// `eventually` for async tests: sleeping in the task, not the thread, leaves the
    /// concurrency pool's few threads to the tasks the condition waits for.
    func eventually(within limit: Duration = .seconds(20), _ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(2))
        }
        return condition()
    }
}

/// Runs a test body against a fresh server and always cleans up.
func withServer(mode: mode_t = 0o600, queueCapacity: Int = EventHub.defaultQueueCapacity,
                historyCapacity: Int = EventHub.defaultHistoryCapacity,
                isInTree: @escaping @Sendable (Int32, Int32) -> Bool = ProcessFacts.isInTreeRule,
                options: ControlServer.Options = ControlServer.Options(),
                _ body: (ServerFixture) throws -> Void) throws {
    let fixture = try ServerFixture(mode: mode, queueCapacity: queueCapacity, historyCapacity: historyCapacity,
                                    isInTree: isInTree, options: options)
    defer { fixture.stop() }
    try body(fixture)
}

/// A blocking line-oriented client on a plain socket: what a script in any language does.
final class LineClient {
    let fd: Int32
    private var framer = LineFramer(maxLineBytes: 64 << 20)
    private var pending: [[UInt8]] = []

    init(socketPath: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            for (index, byte) in socketPath.utf8.enumerated() { buffer[index] = byte }
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard result == 0 else {
            let error = errno
            Glibc.close(fd)
            throw HarnessError("connect: \(String(cString: strerror(error)))")
        }
    }

    deinit { Glibc.close(fd) }

    func send(_ text: String) throws {
        try send(Array(text.utf8) + [UInt8(ascii: "\n")])
    }

    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let count = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL)) }
            if count < 0 {
                if errno == EINTR { continue }
                throw HarnessError("send: \(String(cString: strerror(errno)))")
            }
            offset += count
        }
    }

    /// The next line, or an error when none comes in time or the server closed.
    func readLine(timeout: Duration = .seconds(10)) throws -> [UInt8] {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let frame = framer.next() {
                if case .line(let line) = frame { return line }
                continue
            }
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else { throw HarnessError("no line within \(timeout)") }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(clamping: remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000 + 1)
            let ready = poll(&poller, 1, milliseconds)
            if ready < 0 && errno == EINTR { continue }
            if ready <= 0 { continue }
            var buffer = [UInt8](repeating: 0, count: 65_536)
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw HarnessError("the server closed the connection") }
            framer.append(buffer[0..<count])
        }
    }

    /// True when the server closed the connection (or closes it within `timeout`).
    func isClosedByServer(timeout: Duration = .seconds(5)) -> Bool {
        do {
            while true { _ = try readLine(timeout: timeout) }
        } catch {
            return "\(error)".contains("closed")
        }
    }

    func readJSON(timeout: Duration = .seconds(10)) throws -> [String: Any] {
        let line = try readLine(timeout: timeout)
        guard let object = try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any] else {
            throw HarnessError("not a JSON object: \(String(decoding: line, as: UTF8.self))")
        }
        return object
    }

    /// Sends a request and returns the next reply, keeping pushes that come before it.
    func request(_ text: String, timeout: Duration = .seconds(10)) throws -> [String: Any] {
        try send(text)
        while true {
            let message = try readJSON(timeout: timeout)
            if message["push"] != nil {
                pushes.append(message)
                continue
            }
            return message
        }
    }

    /// Pushes read while waiting for replies, oldest first.
    var pushes: [[String: Any]] = []

    /// The next push (a buffered one first).
    func nextPush(timeout: Duration = .seconds(10)) throws -> [String: Any] {
        if !pushes.isEmpty { return pushes.removeFirst() }
        while true {
            let message = try readJSON(timeout: timeout)
            if message["push"] != nil { return message }
            throw HarnessError("expected a push, got a reply: \(message)")
        }
    }
}

extension Dictionary where Key == String, Value == Any {
    var errorCode: String? { (self["error"] as? [String: Any])?["code"] as? String }
    var ok: [String: Any]? { self["ok"] as? [String: Any] }
}

@discardableResult
func shell(_ command: String) -> Int32 {
    runShell(command, capturing: false).status
}

/// Runs a shell command and returns its standard output.
func capture(_ command: String) -> (status: Int32, output: String) {
    runShell(command, capturing: true)
}

/// `/bin/sh -c command` with an empty signal mask and default signal dispositions. Not
/// system(3): test threads run with signals blocked, a child would inherit that mask, and
/// the shell's `wait` then never hears of its children ending.
private func runShell(_ command: String, capturing: Bool) -> (status: Int32, output: String) {
    var ends: [Int32] = [-1, -1]
    if capturing { _ = pipe(&ends) }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    if capturing {
        posix_spawn_file_actions_adddup2(&actions, ends[1], 1)
        posix_spawn_file_actions_addclose(&actions, ends[0])
        posix_spawn_file_actions_addclose(&actions, ends[1])
    }
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var empty = sigset_t()
    sigemptyset(&empty)
    posix_spawnattr_setsigmask(&attributes, &empty)
    var all = sigset_t()
    sigfillset(&all)
    sigdelset(&all, SIGKILL)
    sigdelset(&all, SIGSTOP)
    posix_spawnattr_setsigdefault(&attributes, &all)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    let words: [String] = ["/bin/sh", "-c", command]
    var argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
    defer { for argument in argv { free(argument) } }
    var child: pid_t = 0
    let spawned = posix_spawn(&child, "/bin/sh", &actions, &attributes, &argv, environ)
    var output: [UInt8] = []
    if capturing {
        close(ends[1])
        if spawned == 0 {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(ends[0], $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }
                output += buffer[0..<count]
            }
        }
        close(ends[0])
    }
    guard spawned == 0 else { return (-1, "") }
    var status: Int32 = 0
    while waitpid(child, &status, 0) < 0 && errno == EINTR {}
    let signal = status & 0x7f
    return (signal == 0 ? (status >> 8) & 0xff : 128 + signal, String(decoding: output, as: UTF8.self))
}
