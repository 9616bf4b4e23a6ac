import ArgumentParser
import CoordFSExec
import Glibc

@main
struct CoordFS: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "coordfs",
        abstract: "A coordinated view of a directory: every program that uses the mount is coordinated.",
        version: "0.1.0",
        subcommands: [Mount.self, Unmount.self, Watch.self, Exec.self, Status.self, Versions.self]
    )

    /// Parses the arguments with stand-ins for those that are not UTF-8 (see `ExactArguments`),
    /// reading mount(8)'s command lines as `coordfs mount` (see `MountHelperForm`).
    static func main() {
        let arguments = ExactArguments.forParser
        if arguments.first == "exec", let exec = ExecRequest.parsedQuickly(Array(arguments.dropFirst())) {
            exec.runAndExit()
        }
        switch Invocation.form {
        case .notThisForm:
            main(arguments)
        case .mount(let arguments):
            main(["mount"] + arguments)
        case .nothingToDo:
            Glibc.exit(0)
        case .remount(let mountpoint, let readOnly):
            Glibc.exit(Remount.run(mountpoint: mountpoint, readOnly: readOnly))
        case .failure(let message):
            printError(message)
            Glibc.exit(1)
        }
    }
}

/// How this process was called, read once.
enum Invocation {
    /// The command line in mount(8)'s form, or not.
    static let form: MountHelperForm.Outcome = {
        let subcommands = Set(CoordFS.configuration.subcommands.map { $0.configuration.commandName ?? String(describing: $0).lowercased() })
        return MountHelperForm.read(ExactArguments.forParser, programName: CommandLine.arguments.first ?? "",
                                    subcommands: subcommands.union(["help"])) { arguments in
            do {
                _ = try Mount.parse(arguments)
                return nil
            } catch {
                let message = Mount.message(for: error)
                return message.hasPrefix("Unknown option") ? "not a coordfs mount option (see coordfs mount --help: -o some_option is --some-option)" : message
            }
        }
    }()

    /// The command line a background mount runs its daemon with (before `--foreground`), as
    /// exact bytes: this one, or for mount(8)'s form the `coordfs mount` line it stands for.
    static var daemonArguments: [[UInt8]] {
        guard case .mount(let arguments) = form else {
            return [Array((CommandLine.arguments.first ?? "coordfs").utf8)] + ExactArguments.forParser.map(ExactArguments.bytes(of:))
        }
        // Not under the helper's name, which would make the daemon read its line as mount(8)'s.
        return [Array("coordfs".utf8), Array("mount".utf8)] + arguments.map(ExactArguments.bytes(of:))
    }
}
