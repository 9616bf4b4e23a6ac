import ArgumentParser
import CoordFSClient
import Dispatch
import Glibc
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
        """
    )

    @Option(name: .customLong("read"), help: ArgumentHelp("Claim PATH for reading (repeatable).", valueName: "path"), completion: .file())
    var readPaths: [String] = []

    @Option(name: .customLong("write"), help: ArgumentHelp("Claim PATH for writing (repeatable).", valueName: "path"), completion: .file())
    var writePaths: [String] = []

    @Option(name: [.short, .long], help: ArgumentHelp("Wait at most this many seconds for others to let go (default: the mount's claim timeout).", valueName: "seconds"))
    var wait: Double?

    @Flag(name: [.short, .long], help: "Do not wait: fail at once if a path is claimed by someone else.")
    var nonblock = false

    @Option(name: [.customShort("E"), .long], help: ArgumentHelp("Exit status when the claims cannot be had.", valueName: "n"))
    var conflictExitCode: Int32 = 1

    @Flag(name: [.short, .long], help: "Say on standard error how long the claims took and when they were released.")
    var verbose = false

    @Argument(parsing: .postTerminator, help: ArgumentHelp("The command and its arguments, after --.", valueName: "command"))
    var command: [String] = []

    func validate() throws {
        guard !readPaths.isEmpty || !writePaths.isEmpty else { throw ValidationError("name at least one --read or --write path") }
        guard !command.isEmpty else { throw ValidationError("name the command to run after --") }
        if wait != nil && nonblock { throw ValidationError("--wait and --nonblock do not go together") }
        if let wait, !(wait >= 0 && wait.isFinite) { throw ValidationError("--wait must be a number of seconds, 0 or more") }
        guard (0...255).contains(conflictExitCode) else { throw ValidationError("--conflict-exit-code must be between 0 and 255") }
    }

    func run() throws {
        // Which mount each path is in, and its name there.
        var byMount: [String: (reading: [FilePath], writing: [FilePath])] = [:]
        do {
            for (paths, writing) in [(readPaths, false), (writePaths, true)] {
                for path in paths {
                    let location = try ControlLocation.locate(ExactArguments.path(path))
                    if writing {
                        byMount[location.socket, default: ([], [])].writing.append(location.path)
                    } else {
                        byMount[location.socket, default: ([], [])].reading.append(location.path)
                    }
                }
            }
        } catch {
            throw CleanExit.failure(error.commandLineMessage)
        }
        let timeout: Duration? = nonblock ? .zero : wait.map { .nanoseconds(Int64(min($0, 1e9) * 1e9)) }
        // Mounts in a fixed order, so two exec runs over the same mounts cannot deadlock.
        let mounts = byMount.sorted { $0.key < $1.key }.map { (socket: $0.key, reading: $0.value.reading, writing: $0.value.writing) }

        let started = ContinuousClock.now
        let connections: [CoordFSConnection]
        do {
            connections = try runBlocking {
                var held: [CoordFSConnection] = []
                do {
                    for mount in mounts {
                        let connection = try await CoordFSConnection.connect(socketPath: mount.socket, client: "coordfs exec")
                        held.append(connection)
                        _ = try await connection.claim(reading: mount.reading, writing: mount.writing, timeout: timeout)
                    }
                    return held
                } catch {
                    for connection in held { connection.close() }
                    throw error
                }
            }
        } catch let error as CoordFSError {
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
        let forwarded = [SIGTERM, SIGHUP]
        let ignored = [SIGINT, SIGQUIT]
        for signal in ignored + forwarded { Glibc.signal(signal, SIG_IGN) }

        let child: ChildProcess
        do {
            child = try ChildProcess.spawn(command, defaultSignals: ignored + forwarded + [SIGPIPE])
        } catch {
            printError("cannot run \(String(decoding: command[0], as: UTF8.self)): \(error)")
            return error == .noSuchFileOrDirectory ? 127 : 126
        }

        let queue = DispatchQueue(label: "coordfs.exec.signals")
        let sources = forwarded.map { signal -> any DispatchSourceSignal in
            let source = DispatchSource.makeSignalSource(signal: signal, queue: queue)
            source.setEventHandler { kill(child.pid, signal) }
            source.resume()
            return source
        }
        defer { sources.forEach { $0.cancel() } }

        return (try? child.wait())?.shellStatus ?? 1
    }
}

extension Duration {
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
