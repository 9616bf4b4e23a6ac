import ArgumentParser
import CoordFSExec
import Glibc

/// The command lines mount(8) runs, turned into `coordfs mount`'s own.
///
/// For an fstab line of type `fuse.coordfs` (or `mount -t fuse.coordfs`), libfuse's
/// mount.fuse3 runs `coordfs SOURCE MOUNTPOINT -o OPTIONS`; for type `coordfs`, mount(8) runs
/// `mount.coordfs SOURCE MOUNTPOINT [-sfnv] [-o OPTIONS]` (a link to this program under that
/// name). Each mount option is a `coordfs mount` option spelled with underscores for dashes,
/// as sshfs and rclone spell theirs: `allow_other`, `claim_timeout=10`, `in_place=*.db`.
/// Options that belong to mount(8), systemd or the kernel's generic mount flags are ignored;
/// any other is an error of one line, unless mount(8) was told to be sloppy (`-s`).
enum MountHelperForm {
    /// What the command line turned out to be.
    enum Outcome: Equatable {
        /// Not mount(8)'s form: the usual subcommands.
        case notThisForm
        /// `coordfs mount`'s arguments (without the subcommand's name).
        case mount([String])
        /// mount(8) asked for a fake mount (`-f`): nothing to do.
        case nothingToDo
        /// `-o remount,...`: the mount at the path is to become read-only, or read-write again;
        /// the other options stay as they were (a running daemon cannot take new ones).
        case remount(mountpoint: String, readOnly: Bool)
        /// Why the line cannot be mounted, in one line.
        case failure(String)
    }

    /// Options that mean nothing to a coordfs mount: mount(8)'s and systemd's own (mount(8)
    /// strips most before it runs a helper, but not every version strips every one), and the
    /// generic flags mount.fuse3 adds (`rw`, `dev`, `suid`), which FUSE applies itself.
    static let ignoredOptions: Set<String> = [
        "defaults", "rw", "auto", "noauto", "user", "users", "nouser", "owner", "group", "nofail", "_netdev",
        "dev", "nodev", "suid", "nosuid", "exec", "noexec", "atime", "noatime", "diratime", "nodiratime",
        "relatime", "norelatime", "strictatime", "lazytime", "nolazytime", "async", "silent", "loud",
    ]

    /// Prefixes of options that are someone else's: systemd's and other tools' `x-` options,
    /// and fstab comments.
    static let ignoredPrefixes = ["x-", "comment="]

    /// Reads `arguments` (without the program's name) as mount(8)'s form when they are in it.
    /// - Parameters:
    ///   - programName: how the program was called (`mount.coordfs` always means this form).
    ///   - subcommands: the names that start the usual command lines.
    ///   - accepts: whether `coordfs mount` parses the arguments, or why not (one line).
    static func read(_ arguments: [String], programName: String, subcommands: Set<String>,
                     accepts: ([String]) -> String?) -> Outcome {
        let calledAsHelper = programName.split(separator: "/").last.map(String.init) == "mount.coordfs"
        guard calledAsHelper || isMountForm(arguments, subcommands: subcommands) else { return .notThisForm }

        var positionals: [String] = []
        var optionLists: [String] = []
        var sloppy = false
        var index = arguments.startIndex
        while index < arguments.endIndex {
            let argument = arguments[index]
            index += 1
            if argument == "-o" || argument == "-t" || argument == "-N" {
                guard index < arguments.endIndex else { return .failure("\(argument) needs a value") }
                let value = arguments[index]
                index += 1
                switch argument {
                case "-o": optionLists.append(ExactArguments.display(value))
                case "-N": return .failure("mounting in another namespace (-N) is not supported")
                default: break // the type: this is coordfs
                }
            } else if argument.hasPrefix("-o"), argument.count > 2 {
                optionLists.append(ExactArguments.display(String(argument.dropFirst(2))))
            } else if argument.hasPrefix("-"), argument.count > 1, !argument.hasPrefix("--") {
                // mount(8)'s single-letter flags, possibly together (-sv).
                for flag in argument.dropFirst() {
                    switch flag {
                    case "s": sloppy = true
                    case "f": return .nothingToDo
                    case "n", "v": break // no mtab to write; verbosity is the log level's
                    default: return .failure("unknown mount flag -\(flag)")
                    }
                }
            } else {
                positionals.append(argument)
            }
        }
        guard positionals.count == 2 else {
            return .failure("expected SOURCE MOUNTPOINT [-o OPTIONS], as mount(8) gives them; got \(positionals.count) paths")
        }

        let options = optionLists.flatMap { $0.split(separator: ",", omittingEmptySubsequences: true).map(String.init) }
        // The last of ro and rw wins, as with mount(8).
        let readOnly = options.last { $0 == "ro" || $0 == "rw" } == "ro"
        if options.contains("remount") { return .remount(mountpoint: positionals[1], readOnly: readOnly) }
        var translated = positionals
        if readOnly { translated.append("--read-only") }
        for option in options {
            if ignoredOptions.contains(option) || ignoredPrefixes.contains(where: option.hasPrefix) || option == "ro" { continue }
            let (name, value) = split(option)
            if name == "foreground" { continue } // mount(8) waits for the helper: it must return once mounted
            var candidate = translated + ["--" + String(name.map { $0 == "_" ? "-" : $0 })]
            if let value { candidate.append(value) }
            if let problem = accepts(candidate) {
                if sloppy { continue }
                return .failure("-o \(option): \(problem)")
            }
            translated = candidate
        }
        return .mount(translated)
    }

    /// Whether the arguments look like mount.fuse3's `SOURCE MOUNTPOINT -o OPTIONS`: they do not
    /// start with a subcommand or an option, and name two paths.
    private static func isMountForm(_ arguments: [String], subcommands: Set<String>) -> Bool {
        guard let first = arguments.first, !first.hasPrefix("-"), !subcommands.contains(first) else { return false }
        return arguments.count >= 2 && !arguments[1].hasPrefix("-")
    }

    private static func split(_ option: String) -> (name: String, value: String?) {
        guard let equals = option.firstIndex(of: "=") else { return (option, nil) }
        return (String(option[..<equals]), String(option[option.index(after: equals)...]))
    }
}
