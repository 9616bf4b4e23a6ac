import ArgumentParser
import CoordFSClient
import CoordFSExec
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
        --conflict-exit-code. When the mount breaks a claim (it kept another user waiting for \
        the mount's --break-time), COMMAND runs on to its end, the break is said on standard \
        error, and a command that succeeded exits with the --conflict-exit-code (1 if that is 0).

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
