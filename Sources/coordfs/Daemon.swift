import ArgumentParser
import CoordFSExec
import Glibc

/// Running a mount in the background: the command re-executes itself with --foreground as a
/// child in its own session, and returns once the child reports the mount ready (or failed).
/// Re-executing, rather than fork(), keeps the Swift runtime's threads out of the picture.
enum Daemon {
    static func start(readyVariable: String) -> ExitCode {
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else {
            printError("cannot create a pipe: \(String(cString: strerror(errno)))")
            return .failure
        }
        let (readEnd, writeEnd) = (pipeEnds[0], pipeEnds[1])
        // Neither end may leak into the daemon beyond the copy dup2'd to descriptor 3.
        _ = fcntl(readEnd, F_SETFD, FD_CLOEXEC)
        _ = fcntl(writeEnd, F_SETFD, FD_CLOEXEC)
        let childDescriptor: Int32 = 3
        setenv(readyVariable, "\(childDescriptor)", 1)

        let arguments = Invocation.daemonArguments + [Array("--foreground".utf8)]
        let child: ChildProcess
        do {
            child = try ChildProcess.spawn(arguments, executable: "/proc/self/exe",
                                           descriptors: [(writeEnd, as: childDescriptor)])
        } catch {
            close(writeEnd)
            close(readEnd)
            printError("cannot start the mount daemon: \(error)")
            return .failure
        }
        close(writeEnd)

        var message = [UInt8](repeating: 0, count: 16)
        var received = 0
        while received < message.count {
            let count = message.withUnsafeMutableBytes { read(readEnd, $0.baseAddress! + received, $0.count - received) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            received += count
        }
        close(readEnd)
        if String(decoding: message[0..<received], as: UTF8.self).hasPrefix("ready") {
            return .success
        }
        // The daemon failed before mounting; it printed why. Pass its status on.
        if case .exited(let status)? = try? child.wait(), status != 0 {
            return ExitCode(status)
        }
        return .failure
    }

    /// Lets go of the terminal: standard input from /dev/null, output and errors to the log file.
    static func detach(logFile: String?) {
        let null = open("/dev/null", O_RDWR)
        let log = logFile.map { open($0, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644) } ?? -1
        if null >= 0 { dup2(null, 0) }
        let output = log >= 0 ? log : null
        if output >= 0 {
            dup2(output, 1)
            dup2(output, 2)
        }
        if null > 2 { close(null) }
        if log > 2 { close(log) }
    }
}
