import ArgumentParser

@main
struct CoordFS: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "coordfs",
        abstract: "A coordinated view of a directory: every program that uses the mount is coordinated.",
        version: "0.1.0",
        subcommands: [Mount.self, Unmount.self, Watch.self, Exec.self, Status.self]
    )

    /// Parses the arguments with stand-ins for those that are not UTF-8 (see `ExactArguments`).
    static func main() {
        let arguments = ExactArguments.forParser
        if arguments.first == "exec", let exec = ExecRequest.parsedQuickly(Array(arguments.dropFirst())) {
            exec.runAndExit()
        }
        main(arguments)
    }
}
