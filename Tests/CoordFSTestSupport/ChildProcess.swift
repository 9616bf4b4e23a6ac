import Foundation
import Glibc

/// posix_spawnp of `arguments` with an empty signal mask and default signal dispositions:
/// test threads run with most signals blocked, and a child would inherit that mask (a shell's
/// `wait` then never hears of its children ending). The child gets no descriptor above
/// standard error: tests run in parallel, and a file one test holds open on its mount would
/// otherwise stay open in another test's child and make that mount busy at unmount.
/// Returns 0 or the error number.
public func spawnWithCleanSignals(_ arguments: [String], _ child: inout pid_t, actions: inout posix_spawn_file_actions_t) -> Int32 {
    if let closeFrom = closeFromAction {
        _ = closeFrom(&actions, 3)
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
    var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    defer { for argument in argv { free(argument) } }
    return posix_spawnp(&child, arguments[0], &actions, &attributes, &argv, environ)
}

/// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), which Swift's Glibc
/// module does not import.
private let closeFromAction: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32)? = {
    guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else { return nil }
    return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)
}()

/// A program the test starts beside itself (a presenter, a watcher, a claim holder), with
/// clean signals (`spawnWithCleanSignals`). Standard input is /dev/null; standard output and
/// error go to `output` (a file) or stay the test's. `stop` kills it with SIGKILL and reaps
/// it. Unlike Foundation's Process, nothing watches a pipe the child's own children inherit,
/// so a grandchild that outlives it (`coordfs exec … -- sleep`) delays nothing.
public final class ChildProcess {
    public let pid: pid_t
    public let outputPath: String?
    private var exitStatus: Int32?

    public init(_ arguments: [String], in directory: String? = nil, output: String? = nil) throws {
        outputPath = output
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        if let output {
            guard FileManager.default.createFile(atPath: output, contents: nil) else { throw LineClientError("cannot create \(output)") }
            posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_APPEND, 0)
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        }
        // Swift's Glibc module hides posix_spawn_file_actions_addchdir_np: a shell changes
        // directory, then becomes the program (same pid).
        let command = directory.map { ["/bin/sh", "-c", #"cd "$0" && exec "$@""#, $0] + arguments } ?? arguments
        var child: pid_t = 0
        let spawned = spawnWithCleanSignals(command, &child, actions: &actions)
        guard spawned == 0 else { throw LineClientError("cannot start \(command[0]): \(String(cString: strerror(spawned)))") }
        pid = child
    }

    deinit { stop() }

    /// Everything it printed so far.
    public var output: String {
        outputPath.flatMap { try? String(contentsOfFile: $0, encoding: .utf8) } ?? ""
    }

    /// Whether it still runs (reaping it when it has ended).
    public var isRunning: Bool {
        guard exitStatus == nil else { return false }
        var status: Int32 = 0
        let result = waitpid(pid, &status, WNOHANG)
        if result == pid || (result < 0 && errno == ECHILD) {
            exitStatus = status
            return false
        }
        return true
    }

    /// Its exit code once it has ended by exiting (nil while it runs, or when a signal ended it).
    public var exitCode: Int32? {
        guard !isRunning, let status = exitStatus, status & 0x7f == 0 else { return nil }
        return (status >> 8) & 0xff
    }

    /// Waits up to `limit` for it to end by itself.
    public func waitForExit(within limit: Duration) -> Bool {
        let deadline = ContinuousClock.now + limit
        while isRunning {
            if ContinuousClock.now >= deadline { return false }
            usleep(10_000)
        }
        return true
    }

    /// Kills it (SIGKILL: a test's children may block SIGTERM) and reaps it.
    public func stop() {
        guard exitStatus == nil else { return }
        kill(pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        exitStatus = status
    }
}
