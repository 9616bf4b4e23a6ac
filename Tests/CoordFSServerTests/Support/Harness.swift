import CoordFSCore
import CoordFSProtocol
import CoordFSServer
@_exported import CoordFSTestSupport
import Foundation
import Glibc
import Logging
import Testing

struct HarnessError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A control server on a socket in a private scratch directory, with the real event hub and
/// presenter registry, the claim table, and permission checks against a scratch
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

@discardableResult
func shell(_ command: String) -> Int32 {
    runShell(command, capturing: false).status
}

/// Runs a shell command and returns its standard output.
func capture(_ command: String) -> (status: Int32, output: String) {
    runShell(command, capturing: true)
}

/// `/bin/sh -c command` with an empty signal mask and default signal dispositions (not
/// system(3), see `spawnWithCleanSignals`).
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
    var child: pid_t = 0
    let spawned = spawnWithCleanSignals(["/bin/sh", "-c", command], &child, actions: &actions)
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
