import ArgumentParser
import CoordFSClient
import CSystemCalls
import Glibc
import Synchronization
import SystemPackage

/// One `exec`, however its command line was read (ArgumentParser's `Exec`, or
/// `ExecRequest.parsedQuickly`).
public struct ExecRequest: Sendable {
    public var readPaths: [String] = []
    public var writePaths: [String] = []
    public var wait: Double?
    public var nonblock = false
    public var conflictExitCode: Int32 = 1
    public var verbose = false
    public var command: [String] = []

    public init(readPaths: [String] = [], writePaths: [String] = [], wait: Double? = nil, nonblock: Bool = false,
                conflictExitCode: Int32 = 1, verbose: Bool = false, command: [String] = []) {
        (self.readPaths, self.writePaths, self.wait, self.nonblock) = (readPaths, writePaths, wait, nonblock)
        (self.conflictExitCode, self.verbose, self.command) = (conflictExitCode, verbose, command)
    }

    public func validate() throws {
        guard !readPaths.isEmpty || !writePaths.isEmpty else { throw ValidationError("name at least one --read or --write path (or, as flock(1) does, FILE before the command)") }
        guard !command.isEmpty else { throw ValidationError("name the command to run after -- (or with -c)") }
        if wait != nil && nonblock { throw ValidationError("--wait and --nonblock do not go together") }
        if let wait, !(wait >= 0 && wait.isFinite) { throw ValidationError("--wait must be a number of seconds, 0 or more") }
        guard (0...255).contains(conflictExitCode) else { throw ValidationError("--conflict-exit-code must be between 0 and 255") }
    }

    public func run() throws {
        // Which mount each path is in, and its name there. (A list, not a dictionary: there are
        // one or two, and a dictionary's first use costs more than the search.)
        var mounts: [(socket: String, reading: [FilePath], writing: [FilePath], named: [String])] = []
        do {
            for (paths, writing) in [(readPaths, false), (writePaths, true)] {
                for path in paths {
                    let location = try ControlLocation.locate(ExactArguments.path(path))
                    let index = mounts.firstIndex { $0.socket == location.socket } ?? {
                        mounts.append((location.socket, [], [], []))
                        return mounts.count - 1
                    }()
                    mounts[index].named.append(ExactArguments.display(path))
                    if writing {
                        mounts[index].writing.append(location.path)
                    } else {
                        mounts[index].reading.append(location.path)
                    }
                }
            }
        } catch {
            throw CleanExit.failure(error.commandLineMessage)
        }
        let timeout: Duration? = nonblock ? .zero : wait.map { .nanoseconds(Int64(min($0, 1e9) * 1e9)) }
        // Mounts in a fixed order, so two exec runs over the same mounts cannot deadlock.
        mounts.sort { $0.socket < $1.socket }

        let started = ContinuousClock.now
        var connections: [ClaimConnection] = []
        do {
            for mount in mounts {
                let connection = try ClaimConnection(socketPath: mount.socket, client: "coordfs exec")
                connections.append(connection)
                _ = try connection.claim(reading: mount.reading, writing: mount.writing, timeout: timeout)
            }
        } catch {
            for connection in connections { connection.close() }
            switch error.code {
            case .conflict?, .timeout?:
                printError(error.commandLineMessage)
                throw ExitCode(conflictExitCode)
            default:
                throw CleanExit.failure(error.commandLineMessage)
            }
        }
        let name = ExactArguments.display(command[0])
        if verbose {
            printError("claims held after \(formatDuration((ContinuousClock.now - started).seconds)); running \(name)")
        }
        // A claim the mount breaks (it kept another user waiting for the break time) is said
        // at once, while the command runs on without it.
        var brokenCount = 0
        var closedEarly: Set<Int32> = []
        let status = Self.spawnAndWait(command.map(ExactArguments.bytes(of:)),
                                       watching: connections.map(\.pollDescriptor)) { descriptor in
            guard let index = connections.firstIndex(where: { $0.pollDescriptor == descriptor }) else { return false }
            do {
                for broken in try connections[index].takeBrokenClaims() {
                    brokenCount += 1
                    let paths = mounts[index].named.joined(separator: ", ")
                    printError("the claim on \(paths) was broken after \(formatDuration(broken.held)): uid \(broken.byUid) (pid \(broken.byPid)) "
                               + "had waited \(formatDuration(broken.waited)) for it; \(name) runs on without it")
                }
                return true
            } catch {
                if closedEarly.insert(descriptor).inserted { printError("lost the claims: \(error)") }
                return false
            }
        }
        for connection in connections { connection.close() }
        if verbose { printError("\(name) ended with status \(status); claims released") }
        if status != 0 { throw ExitCode(status) }
        // The command did not run under its claims to the end: say so in the status too.
        if brokenCount > 0 || !closedEarly.isEmpty { throw ExitCode(conflictExitCode == 0 ? 1 : conflictExitCode) }
    }

    /// Runs the command as a child with the signal dispositions it would have had, and
    /// returns its exit status. `command` is bytes: its arguments reach it exactly as they
    /// reached this process, UTF-8 or not. Meanwhile this process ignores the terminal's SIGINT and
    /// SIGQUIT (the child gets them; it decides) and passes SIGTERM and SIGHUP on, so the
    /// claims stay held exactly as long as the child runs — as system(3) does.
    ///
    /// `watching`: descriptors to poll meanwhile; `readable` is called for each that becomes
    /// readable, and returns false to stop watching it.
    public static func spawnAndWait(_ command: [[UInt8]], watching: [Int32] = [],
                                    readable: (Int32) -> Bool = { _ in false }) -> Int32 {
        let ignored = [SIGINT, SIGQUIT]
        for signal in ignored { Glibc.signal(signal, SIG_IGN) }
        // Held back until the child's pid is known to the handler, then passed on: none is lost.
        var forwarded = sigset_t()
        sigemptyset(&forwarded)
        for signal in SignalForwarding.signals { sigaddset(&forwarded, signal) }
        pthread_sigmask(SIG_BLOCK, &forwarded, nil)
        SignalForwarding.install()

        let child: ChildProcess
        do {
            child = try ChildProcess.spawn(command, defaultSignals: ignored + SignalForwarding.signals + [SIGPIPE])
        } catch {
            printError("cannot run \(String(decoding: command[0], as: UTF8.self)): \(error)")
            return error == .noSuchFileOrDirectory ? 127 : 126
        }
        SignalForwarding.child.store(child.pid, ordering: .sequentiallyConsistent)
        pthread_sigmask(SIG_UNBLOCK, &forwarded, nil)
        if !watching.isEmpty { watch(watching, until: child, readable) }
        return (try? child.wait())?.shellStatus ?? 1
    }

    /// Polls `descriptors` until `child` ends (its pidfd turns readable). Without pidfds
    /// (Linux before 5.3), watches nothing: the caller just waits.
    private static func watch(_ descriptors: [Int32], until child: ChildProcess, _ readable: (Int32) -> Bool) {
        let pidfd = csys_pidfd_open(child.pid)
        guard pidfd >= 0 else { return }
        defer { close(pidfd) }
        var watched = descriptors
        while true {
            var polled = [pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)]
                + watched.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            let count = poll(&polled, nfds_t(polled.count), -1)
            if count < 0 {
                if errno == EINTR { continue }
                return
            }
            if polled[0].revents != 0 { return }
            for entry in polled.dropFirst() where entry.revents != 0 {
                if !readable(entry.fd) { watched.removeAll { $0 == entry.fd } }
            }
        }
    }
}

/// SIGTERM and SIGHUP, passed on to exec's command: a plain handler rather than a dispatch
/// source, which would start threads a command this short does not otherwise need.
private enum SignalForwarding {
    static let signals = [SIGTERM, SIGHUP]
    /// The command's pid once it runs (0 before): atomic, as the handler reads it.
    static let child = Atomic<pid_t>(0)

    static func install() {
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { signal in
            let pid = SignalForwarding.child.load(ordering: .sequentiallyConsistent)
            if pid > 0 { kill(pid, signal) }
        }
        sigemptyset(&action.sa_mask)
        action.sa_flags = SA_RESTART
        for signal in signals { sigaction(signal, &action, nil) }
    }
}

extension Duration {
    public var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}

// MARK: Without ArgumentParser

extension ExecRequest {
    /// `exec`'s usual command lines, read without ArgumentParser, whose reflection over the
    /// command tree costs about a millisecond, a third of a whole `exec -- true`
    /// (Docs/PERFORMANCE.md). Takes only the plain forms of its options (`--write P`,
    /// `--write=P`, `-n`, `--wait S`…, each single-valued one at most once) and a `--`
    /// with a command after it; anything else (help, a bundle like `-nv`, a value that looks
    /// like an option, a value that does not parse or validate) is nil and goes to
    /// ArgumentParser, which says what is wrong exactly as for any other command.
    /// `arguments` start after "exec", as ArgumentParser would get them.
    public static func parsedQuickly(_ arguments: [String]) -> ExecRequest? {
        var exec = ExecRequest()
        var exitCodeGiven = false
        var index = 0
        /// The option's value: after "=", or the next argument. Nil when there is none or it
        /// looks like an option (ArgumentParser refuses it, or reads it another way).
        func value(_ argument: String, _ name: String) -> String? {
            if argument.count > name.count {
                let value = String(argument.dropFirst(name.count + 1))
                return value.isEmpty ? nil : value
            }
            index += 1
            guard index < arguments.count, !arguments[index].isEmpty, !arguments[index].hasPrefix("-") else { return nil }
            return arguments[index]
        }
        while index < arguments.count {
            let argument = arguments[index]
            if argument == "--" {
                exec.command = Array(arguments[(index + 1)...])
                break
            }
            let name = argument.split(separator: "=", maxSplits: 1).first.map(String.init) ?? argument
            if name != argument && !name.hasPrefix("--") { return nil }
            switch name {
            case "--read":
                guard let path = value(argument, name) else { return nil }
                exec.readPaths.append(path)
            case "--write":
                guard let path = value(argument, name) else { return nil }
                exec.writePaths.append(path)
            case "-w", "--wait":
                guard exec.wait == nil, let text = value(argument, name), let seconds = Double(text) else { return nil }
                exec.wait = seconds
            case "-E", "--conflict-exit-code":
                guard !exitCodeGiven, let text = value(argument, name), let code = Int32(text) else { return nil }
                exec.conflictExitCode = code
                exitCodeGiven = true
            case "-n", "--nonblock":
                guard !exec.nonblock, name == argument else { return nil }
                exec.nonblock = true
            case "-v", "--verbose":
                guard !exec.verbose, name == argument else { return nil }
                exec.verbose = true
            default:
                return nil
            }
            index += 1
        }
        guard index < arguments.count, (try? exec.validate()) != nil else { return nil }
        return exec
    }

    /// Runs a command line `parsedQuickly` took, and exits as ArgumentParser would (`run`
    /// says what went wrong itself and throws only exit codes).
    public func runAndExit() -> Never {
        do {
            try run()
            Glibc.exit(0)
        } catch let code as ExitCode {
            Glibc.exit(code.rawValue)
        } catch {
            printError("\(error)")
            Glibc.exit(ExitCode.failure.rawValue)
        }
    }
}
