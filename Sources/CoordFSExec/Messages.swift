import ArgumentParser
import CoordFSClient
import Glibc

// How the commands speak to a person: one line on standard error, durations short.

/// Prints "coordfs: message" on standard error.
public func printError(_ message: String) {
    let line = "coordfs: \(message)\n"
    _ = line.withCString { write(2, $0, strlen($0)) }
}

extension CleanExit {
    /// Ends the command with a one-line message and status 1, without a usage dump.
    public static func failure(_ message: String) -> ExitCode {
        printError(message)
        return .failure
    }
}

extension CoordFSError {
    /// The error as the one line the command prints.
    public var commandLineMessage: String { description }
}

/// "850ms", "2.3s", "3m12s", "2h03m".
public func formatDuration(_ seconds: Double) -> String {
    if seconds < 1 { return "\(Int((seconds * 1000).rounded()))ms" }
    if seconds < 60 { return "\((seconds * 10).rounded() / 10)s" }
    let whole = Int(seconds)
    if whole < 3600 { return "\(whole / 60)m\(String(format2: whole % 60))s" }
    return "\(whole / 3600)h\(String(format2: (whole % 3600) / 60))m"
}

extension String {
    /// Two digits, zero-padded.
    public init(format2 value: Int) {
        self = value < 10 ? "0\(value)" : "\(value)"
    }
}
