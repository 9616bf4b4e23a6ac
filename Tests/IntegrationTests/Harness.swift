import CoordFSProtocol
import Foundation
import Glibc
import Testing

/// The coordfs binary the tests mount with: $COORDFS_BINARY (Scripts/test sets it), else the debug build.
let coordfsBinary: String = {
    if let path = ProcessInfo.processInfo.environment["COORDFS_BINARY"] { return path }
    let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    return packageRoot.appendingPathComponent(".build/debug/coordfs").path
}()

/// The folder of the Python scripts the tests run (found from this file, so no SwiftPM resources are needed).
let scriptsDirectory: String = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Scripts").path

/// The path of a test's Python script `name` ("Suite/test"): `Scripts/<name>.py`.
func pythonScript(_ name: String) -> String {
    scriptsDirectory + "/" + name + ".py"
}

/// `text` as one word for /bin/sh.
func shellQuoted(_ text: String) -> String {
    "'" + text.replacingOccurrences(of: "'", with: #"'\''"#) + "'"
}

/// What every program a test starts gets in its environment: the scripts' shared module on
/// Python's path (and no bytecode written next to it), and the coordfs binary under test.
let scriptEnvironment: [String: String] = [
    "PYTHONPATH": scriptsDirectory,
    "PYTHONDONTWRITEBYTECODE": "1",
    "COORDFS_BINARY": coordfsBinary,
]

struct CommandResult: CustomStringConvertible {
    let status: Int32
    let output: String
    let errors: String
    /// Standard output as bytes, exactly (`output` shows bad UTF-8 as U+FFFD).
    var outputBytes: [UInt8] = []
    var description: String { "status \(status)\nstdout:\n\(output)\nstderr:\n\(errors)" }
}

/// Runs `arguments` (no shell) in `directory`, with an optional uid/gid to run as.
@discardableResult
func run(_ arguments: [String], in directory: String? = nil, environment: [String: String] = [:], input: String? = nil) throws -> CommandResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: arguments[0].hasPrefix("/") ? arguments[0] : "/usr/bin/env")
    process.arguments = arguments[0].hasPrefix("/") ? Array(arguments.dropFirst()) : arguments
    if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
    var env = ProcessInfo.processInfo.environment
    env["LC_ALL"] = "C"
    env["TZ"] = "UTC"
    env.merge(scriptEnvironment) { _, script in script }
    for (key, value) in environment { env[key] = value }
    process.environment = env
    let output = Pipe(), errors = Pipe(), inputPipe = Pipe()
    process.standardOutput = output
    process.standardError = errors
    process.standardInput = input == nil ? FileHandle.nullDevice : inputPipe
    try withChildSignalUnblocked { try process.run() }
    if let input {
        inputPipe.fileHandleForWriting.write(Data(input.utf8))
        try inputPipe.fileHandleForWriting.close()
    }
    // Read both pipes to the end before waiting, so a chatty child never blocks on a full pipe.
    let group = DispatchGroup()
    nonisolated(unsafe) var errorData = Data()
    group.enter()
    DispatchQueue.global().async {
        errorData = errors.fileHandleForReading.readDataToEndOfFile()
        group.leave()
    }
    let outputData = output.fileHandleForReading.readDataToEndOfFile()
    group.wait()
    process.waitUntilExit()
    return CommandResult(status: process.terminationStatus,
                         output: String(decoding: outputData, as: UTF8.self),
                         errors: String(decoding: errorData, as: UTF8.self),
                         outputBytes: Array(outputData))
}

/// Runs `spawn` with SIGCHLD unblocked on this thread, so the child it starts inherits it
/// unblocked. Test threads block most signals and children inherit the mask: a shell with
/// SIGCHLD blocked waits forever in `wait` for a child that is still running when it asks.
/// (SIGCHLD is ignored by default, so unblocking it here for a moment changes nothing else.)
func withChildSignalUnblocked<R>(_ spawn: () throws -> R) rethrows -> R {
    var childSignal = sigset_t()
    sigemptyset(&childSignal)
    sigaddset(&childSignal, SIGCHLD)
    var previous = sigset_t()
    pthread_sigmask(SIG_UNBLOCK, &childSignal, &previous)
    defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
    return try spawn()
}

/// Runs a shell script in `directory`; as another user when `user` is given (uid:gid).
@discardableResult
func shell(_ script: String, in directory: String, user: (uid: UInt32, gid: UInt32)? = nil) throws -> CommandResult {
    if let user {
        return try run(["/usr/bin/setpriv", "--reuid=\(user.uid)", "--regid=\(user.gid)", "--clear-groups", "/bin/sh", "-c", script],
                       in: directory)
    }
    return try run(["/bin/sh", "-c", script], in: directory)
}

func isMounted(_ path: String) -> Bool {
    guard let text = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return false }
    return text.split(separator: "\n").contains { $0.split(separator: " ")[4] == path }
}

/// A private scratch folder with a backing directory, a mountpoint and a plain directory to
/// compare against; `mount` runs coordfs in the foreground as a child of the test. A scratch
/// made `sharingBackingOf` another mounts that one's backing instead (another host over the
/// same shared folder).
final class Scratch {
    let root: String
    let backing: String
    var mountpoint: String { root + "/mnt" }
    var plain: String { root + "/plain" }
    private var daemon: Process?
    /// The foreground daemon's process id while mounted.
    var daemonID: Int32? { daemon?.processIdentifier }
    /// Everything the daemon wrote to standard error, read as it comes (a full pipe would
    /// block the daemon's logging), complete once `daemonErrorsDone` is signalled.
    private let daemonErrorText = ErrorCollector()
    /// What the last daemon wrote to standard error, once it exited (`unmount`, `expectDaemonExit`).
    private(set) var lastDaemonLog = ""

    init(sharedBacking: String? = nil) throws {
        // Scripts/test names its run, so that its check for mounts left behind sees only its own.
        let run = ProcessInfo.processInfo.environment["COORDFS_TEST_RUN"].map { $0 + "-" } ?? ""
        var template = Array("/tmp/coordfs-test-\(run)XXXXXX".utf8CString)
        guard let path = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw POSIXError(.EIO)
        }
        root = String(cString: path)
        backing = sharedBacking ?? root + "/backing"
        chmod(root, 0o755)
        for directory in (sharedBacking == nil ? [backing] : []) + [mountpoint, plain] {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        }
    }

    /// A scratch with its own mountpoint over `other`'s backing. Keep `other` alive as long:
    /// its teardown removes the backing.
    convenience init(sharingBackingOf other: Scratch) throws {
        try self.init(sharedBacking: other.backing)
    }

    /// Mounts backing at mountpoint and waits until the kernel shows the mount. `environment`
    /// is added to the daemon's (FaultTests preload their failing backing this way).
    func mount(_ options: [String] = [], environment: [String: String] = [:]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: coordfsBinary)
        process.arguments = ["mount", backing, mountpoint, "--foreground"] + options
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, added in added }
        }
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        daemon = process
        daemonErrorText.collect(from: errors)
        let deadline = Date().addingTimeInterval(15)
        while !isMounted(mountpoint) {
            if !process.isRunning {
                let message = daemonErrorText.finished()
                daemon = nil
                throw MountError(message: "coordfs exited with \(process.terminationStatus) before mounting: \(message)")
            }
            if Date() > deadline { throw MountError(message: "the mount did not appear within 15 s") }
            usleep(10_000)
        }
    }

    /// Unmounts with `coordfs unmount`, then checks the daemon exited with status 0 and
    /// nothing stays mounted. Falls back to fusermount3 and a lazy umount so no mount is left.
    func unmount(sourceLocation: SourceLocation = #_sourceLocation) {
        guard let process = daemon else { return }
        daemon = nil
        let result = try? run([coordfsBinary, "unmount", mountpoint])
        #expect(result?.status == 0, "coordfs unmount: \(result?.description ?? "did not run")", sourceLocation: sourceLocation)
        let deadline = Date().addingTimeInterval(15)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning {
            Issue.record("""
                the daemon did not exit after unmount; its threads: \(threadStates(of: process.processIdentifier))
                its log so far: \(daemonErrorText.soFar().split(separator: "\n").suffix(30).joined(separator: "\n"))
                """, sourceLocation: sourceLocation)
            process.terminate()
        }
        if isMounted(mountpoint) {
            Issue.record("the mount was left behind", sourceLocation: sourceLocation)
            _ = try? run(["fusermount3", "-u", mountpoint])
            if isMounted(mountpoint) { _ = try? run(["umount", "-l", mountpoint]) }
        }
        process.waitUntilExit()
        let errorText = daemonErrorText.finished()
        lastDaemonLog = errorText
        #expect(process.terminationStatus == 0, "the daemon exited with \(process.terminationStatus): \(errorText)", sourceLocation: sourceLocation)
    }

    /// For tests that end the daemon themselves (by a signal): expects it to exit with `status`.
    func expectDaemonExit(status: Int32, sourceLocation: SourceLocation = #_sourceLocation) {
        guard let process = daemon else { return }
        daemon = nil
        let deadline = Date().addingTimeInterval(15)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning {
            Issue.record("the daemon did not exit", sourceLocation: sourceLocation)
            process.terminate()
        }
        process.waitUntilExit()
        lastDaemonLog = daemonErrorText.finished()
        #expect(process.terminationStatus == status, "daemon exit status", sourceLocation: sourceLocation)
    }

    /// Ends the daemon with SIGKILL, as a crash would, and takes its dead mount away
    /// (fusermount3, else a lazy umount). Returns when the daemon is gone.
    func killDaemon() {
        guard let process = daemon else { return }
        daemon = nil
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        lastDaemonLog = daemonErrorText.finished()
        _ = try? run(["fusermount3", "-u", mountpoint])
        if isMounted(mountpoint) { _ = try? run(["umount", "-l", mountpoint]) }
    }

    /// What the daemon wrote to standard error so far (it goes on collecting).
    var daemonLogSoFar: String { daemonErrorText.soFar() }

    deinit {
        if daemon != nil { unmount() }
        if isMounted(mountpoint) { _ = try? run(["umount", "-l", mountpoint]) }
        _ = try? run(["rm", "-rf", root])
    }
}

/// Reads a pipe to its end on a thread of its own.
final class ErrorCollector: @unchecked Sendable {
    private let lock = NSLock()
    private var data = Data()
    private let done = DispatchSemaphore(value: 0)
    private var collecting = false

    func collect(from pipe: Pipe) {
        lock.withLock { data = Data(); collecting = true }
        let handle = pipe.fileHandleForReading
        Thread.detachNewThread { [self] in
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                lock.withLock { data.append(chunk) }
            }
            done.signal()
        }
    }

    /// What came so far.
    func soFar() -> String {
        lock.withLock { String(decoding: data, as: UTF8.self) }
    }

    /// The whole text, once the writer has closed the pipe (the daemon exited).
    func finished() -> String {
        guard lock.withLock({ collecting }) else { return "" }
        done.wait()
        return lock.withLock {
            collecting = false
            return String(decoding: data, as: UTF8.self)
        }
    }
}

struct MountError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

/// Mounts a fresh scratch folder for the length of `body`, unmounting even when it throws.
func withMount(_ options: [String] = [], sourceLocation: SourceLocation = #_sourceLocation, _ body: (Scratch) throws -> Void) throws {
    let scratch = try Scratch()
    try scratch.mount(options)
    defer { scratch.unmount(sourceLocation: sourceLocation) }
    try body(scratch)
}

// MARK: Waiting for facts

/// Polls `condition` every 20 ms until it holds or `limit` has passed (generous: a loaded
/// machine is slow, not wrong); whether it held.
func eventually(within limit: Duration = .seconds(20), _ condition: () -> Bool) -> Bool {
    let deadline = ContinuousClock.now + limit
    while ContinuousClock.now < deadline {
        if condition() { return true }
        usleep(20_000)
    }
    return condition()
}

extension Scratch {
    /// Polls the mount's status, as `coordfs status --json` reports it, until `fact` holds, and
    /// returns that status. A test hands off to another process this way (it holds a claim, it
    /// waits for one, a presenter was asked) instead of sleeping for a time a loaded machine may
    /// not keep. Throws, naming `what` and the last status, once `limit` has passed.
    @discardableResult
    func waitForStatus(_ what: String, within limit: Duration = .seconds(20), until fact: (StatusReport) -> Bool) throws -> StatusReport {
        let deadline = ContinuousClock.now + limit
        while true {
            let result = try run([coordfsBinary, "status", "--json", mountpoint])
            let report = result.status == 0 ? try? JSONDecoder().decode(StatusReport.self, from: Data(result.outputBytes)) : nil
            if let report, fact(report) { return report }
            if ContinuousClock.now >= deadline {
                throw FactNeverShowed(message: "waited \(limit) for \(what); the last status: \(result)")
            }
            usleep(20_000)
        }
    }
}

/// A wait for a fact that ran out of time.
struct FactNeverShowed: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

/// Each thread of `pid` with its name, state and where the kernel has it waiting (as root, its
/// kernel stack's top frames): what a daemon that does not exit is stuck in.
func threadStates(of pid: Int32) -> String {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
    return tasks.sorted().map { task in
        let directory = "/proc/\(pid)/task/\(task)/"
        func read(_ name: String) -> String {
            ((try? String(contentsOfFile: directory + name, encoding: .utf8)) ?? "?").trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let state = read("stat").split(separator: " ").dropFirst(2).first.map(String.init) ?? "?"
        let stack = read("stack").split(separator: "\n").prefix(4).joined(separator: " < ")
        return "\n  \(task) \(read("comm")) \(state) wchan=\(read("wchan")) \(stack)"
    }.joined()
}
