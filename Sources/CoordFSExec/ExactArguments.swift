import Glibc
import SystemPackage

// Paths on the command line, in and out, are bytes as Linux names are: not necessarily UTF-8.

/// The command-line arguments as the kernel gave them.
///
/// ArgumentParser works on Strings, and turning an argument that is not valid UTF-8 into a
/// String repairs it into another name (U+FFFD for each bad byte). So such an argument goes to
/// the parser as a stand-in (a NUL, which no argument can hold, and a number), and commands
/// turn what they parsed back into the exact bytes with `bytes(of:)` or `path(_:)`. In an
/// option's `--name=value` form only the value is stood in for, so the option still parses.
public enum ExactArguments {
    /// What each stand-in stands for.
    private static let table: [[UInt8]] = prepared.table
    /// The arguments after the program's name, for ArgumentParser.
    public static let forParser: [String] = prepared.arguments

    private static let prepared: (arguments: [String], table: [[UInt8]]) = {
        var arguments: [String] = []
        var table: [[UInt8]] = []
        func standIn(_ bytes: some Collection<UInt8>) -> String {
            table.append(Array(bytes))
            return "\u{0}\(table.count - 1)"
        }
        for index in 1..<Int(CommandLine.argc) {
            guard let argument = CommandLine.unsafeArgv[index] else { continue }
            if let text = String(validatingCString: argument) {
                arguments.append(text)
                continue
            }
            let bytes = UnsafeBufferPointer(start: argument, count: strlen(argument)).map { UInt8(bitPattern: $0) }
            if bytes.starts(with: [UInt8(ascii: "-"), UInt8(ascii: "-")]), let equals = bytes.firstIndex(of: UInt8(ascii: "=")),
               let option = String(validating: bytes[...equals], as: UTF8.self) {
                arguments.append(option + standIn(bytes[(equals + 1)...]))
            } else {
                arguments.append(standIn(bytes))
            }
        }
        return (arguments, table)
    }()

    /// The exact bytes of an argument (or of an option's value) as ArgumentParser handed it over.
    public static func bytes(of argument: String) -> [UInt8] {
        if argument.utf8.first == 0, let index = Int(argument.dropFirst()), table.indices.contains(index) {
            return table[index]
        }
        return Array(argument.utf8)
    }

    /// An argument that names a path, exactly.
    public static func path(_ argument: String) -> FilePath {
        let cString = bytes(of: argument).map { CChar(bitPattern: $0) } + [0]
        return cString.withUnsafeBufferPointer { FilePath(platformString: $0.baseAddress!) }
    }

    /// An argument for a message to a person (bad bytes shown as U+FFFD).
    public static func display(_ argument: String) -> String {
        String(decoding: bytes(of: argument), as: UTF8.self)
    }
}
