import ArgumentParser
import CoordFSClient
import Glibc
import Synchronization
import SystemPackage

struct Exec: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a command while holding claims on paths in coordfs mounts (like flock(1), enforced on every program).",
        discussion: """
        --read PATH: nobody else changes PATH while COMMAND runs. --write PATH: nobody else \
        sees or changes it. A claim on a directory covers everything in it. All claims are \
        taken at once (per mount) or none; COMMAND and its children pass through them; they \
        are released when COMMAND ends, or at once if this process dies. The exit status is \
        COMMAND's (128+N when it dies of signal N); when the claims cannot be had, it is the \
        --conflict-exit-code.

          coordfs exec --write counter -- sh -c 'n=$(cat counter); echo $((n+1)) > counter'

        flock(1)'s spellings work too: [-s|-x] [-n] [-w SECONDS] [-E CODE] FILE COMMAND... or \
        FILE -c 'COMMAND LINE' (-s claims FILE for reading, -x, the default, for writing):

          coordfs exec -x counter -c 'n=$(cat counter); echo $((n+1)) > counter'
        """
    )

    @Option(name: .customLong("read"), help: ArgumentHelp("Claim PATH for reading (repeatable).", valueName: "path"), completion: .file())
    var readPaths: [String] = []

    @Option(name: .customLong("write"), help: ArgumentHelp("Claim PATH for writing (repeatable).", valueName: "path"), completion: .file())
    var writePaths: [String] = []

    @Option(name: [.short, .long, .customLong("timeout")], help: ArgumentHelp("Wait at most this many seconds for others to let go (default: the mount's claim timeout).", valueName: "seconds"))
    var wait: Double?

    @Flag(name: [.short, .long, .customLong("nb")], help: "Do not wait: fail at once if a path is claimed by someone else.")
    var nonblock = false

    @Option(name: [.customShort("E"), .long], help: ArgumentHelp("Exit status when the claims cannot be had.", valueName: "n"))
    var conflictExitCode: Int32 = 1

    @Flag(name: [.short, .long], help: "Say on standard error how long the claims took and when they were released.")
    var verbose = false

    /// flock(1)'s lock modes, for its form; the last one given counts, as with flock.
    enum FlockMode: EnumerableFlag {
        case shared, exclusive

        static func name(for value: FlockMode) -> NameSpecification {
            switch value {
            case .shared: [.short, .long]
            case .exclusive: [.customShort("x"), .customShort("e"), .long]
            }
        }

        static func help(for value: FlockMode) -> ArgumentHelp? {
            switch value {
            case .shared: "flock(1)'s form: claim FILE for reading (its shared lock)."
            case .exclusive: "flock(1)'s form: claim FILE for writing (its exclusive lock; the default)."
            }
        }
    }

    @Flag(exclusivity: .chooseLast)
    var flockMode: FlockMode?

    @Option(name: [.customShort("c"), .customLong("command")], help: ArgumentHelp("flock(1)'s form: run this command line with /bin/sh -c.", valueName: "command"))
    var shellCommand: String?

    @Argument(parsing: .captureForPassthrough,
              help: ArgumentHelp("After --, the command and its arguments; or, as flock(1) takes them, FILE and then the command (or -c).", valueName: "command"))
    var command: [String] = []

    /// What ArgumentParser read: `--read`/`--write` paths and the command after `--`, or
    /// flock(1)'s `[-s|-x] FILE COMMAND…` and `FILE -c COMMAND`.
    var request: ExecRequest {
        var exec = ExecRequest(readPaths: readPaths, writePaths: writePaths, wait: wait, nonblock: nonblock,
                               conflictExitCode: conflictExitCode, verbose: verbose, command: [])
        var rest = command
        let terminated = rest.first == "--"
        if terminated { rest.removeFirst() }
        var shellCommand = shellCommand
        if isFlockForm, !terminated, !rest.isEmpty {
            let file = rest.removeFirst()
            if flockMode == .shared { exec.readPaths = [file] } else { exec.writePaths = [file] }
            // flock(1) takes -c after FILE too (`flock FILE -c COMMAND`).
            if rest.count == 2, rest[0] == "-c" || rest[0] == "--command", shellCommand == nil {
                shellCommand = rest[1]
                rest = []
            }
        }
        exec.command = shellCommand.map { ["/bin/sh", "-c", $0] } ?? rest
        return exec
    }

    /// No --read or --write: the paths come as flock(1) takes its file.
    private var isFlockForm: Bool { readPaths.isEmpty && writePaths.isEmpty }

    func validate() throws {
        // The command is captured as flock(1) takes it (options and all), so a help flag before
        // anything else lands there too.
        if let first = command.first, first == "--help" || first == "-h" { throw CleanExit.helpRequest(self) }
        if !isFlockForm && flockMode != nil {
            throw ValidationError("-s and -x go with flock(1)'s form (FILE before the command), not with --read or --write")
        }
        if !isFlockForm && shellCommand != nil && !command.isEmpty && command != ["--"] {
            throw ValidationError("give the command after -- or as -c COMMAND, not both")
        }
        if isFlockForm && shellCommand != nil && command.count > 1 && command.first != "--" {
            throw ValidationError("with -c COMMAND, name only FILE (flock(1)'s form)")
        }
        try request.validate()
    }

    func run() throws {
        try request.run()
    }
}

/// One `exec`, however its command line was read (ArgumentParser's `Exec`, or
/// `ExecRequest.parsedQuickly`).
struct ExecRequest {
    var readPaths: [String] = []
    var writePaths: [String] = []
    var wait: Double?
    var nonblock = false
    var conflictExitCode: Int32 = 1
    var verbose = false
    var command: [String] = []

    func validate() throws {
        guard !readPaths.isEmpty || !writePaths.isEmpty else { throw ValidationError("name at least one --read or --write path (or, as flock(1) does, FILE before the command)") }
        guard !command.isEmpty else { throw ValidationError("name the command to run after -- (or with -c)") }
        if wait != nil && nonblock { throw ValidationError("--wait and --nonblock do not go together") }
        if let wait, !(wait >= 0 && wait.isFinite) { throw ValidationError("--wait must be a number of seconds, 0 or more") }
        guard (0...255).contains(conflictExitCode) else { throw ValidationError("--conflict-exit-code must be between 0 and 255") }
    }

    func run() throws {
        // Which mount each path is in, and its name there. (A list, not a dictionary: there are
        // one or two, and a dictionary's first use costs more than the search.)
        var mounts: [(socket: String, reading: [FilePath], writing: [FilePath])] = []
        do {
            for (paths, writing) in [(readPaths, false), (writePaths, true)] {
                for path in paths {
                    let location = try ControlLocation.locate(ExactArguments.path(path))
                    let index = mounts.firstIndex { $0.socket == location.socket } ?? {
                        mounts.append((location.socket, [], []))
                        return mounts.count - 1
                    }()
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
        let status = Self.spawnAndWait(command.map(ExactArguments.bytes(of:)))
        for connection in connections { connection.close() }
        if verbose { printError("\(name) ended with status \(status); claims released") }
        if status != 0 { throw ExitCode(status) }
    }

    /// Runs the command as a child with the signal dispositions it would have had, and
    /// returns its exit status. `command` is bytes: its arguments reach it exactly as they
    /// reached this process, UTF-8 or not. Meanwhile this process ignores the terminal's SIGINT and
    /// SIGQUIT (the child gets them; it decides) and passes SIGTERM and SIGHUP on, so the
    /// claims stay held exactly as long as the child runs — as system(3) does.
    static func spawnAndWait(_ command: [[UInt8]]) -> Int32 {
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
        return (try? child.wait())?.shellStatus ?? 1
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
    var seconds: Double {
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
    static func parsedQuickly(_ arguments: [String]) -> ExecRequest? {
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

    /// Runs a command line `parsedQuickly` took, and exits as ArgumentParser would.
    func runAndExit() -> Never {
        do {
            try run()
            Glibc.exit(0)
        } catch let code as ExitCode {
            Glibc.exit(code.rawValue)
        } catch {
            CoordFS.exit(withError: error)
        }
    }
}
