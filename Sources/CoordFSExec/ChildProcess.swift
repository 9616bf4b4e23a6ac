import Glibc
import SystemPackage

/// A program this command runs: the daemon it re-executes, fusermount3, `exec`'s command.
///
/// posix_spawn, not fork: the Swift runtime's threads never see a forked copy of themselves.
/// Not swift-subprocess: it closes every descriptor above 2 in the child, and the daemon is
/// handed its ready pipe as descriptor 3.
public struct ChildProcess: Sendable {
    public let pid: pid_t

    /// Starts `arguments`, bytes as the kernel takes them (UTF-8 or not).
    ///
    /// - Parameters:
    ///   - executable: the file to run; nil looks `arguments[0]` up in `PATH`.
    ///   - descriptors: descriptors of this process the child gets at other numbers (dup2,
    ///     which also clears close-on-exec on the copy).
    ///   - defaultSignals: when given, these signals start at their default disposition in the
    ///     child and its signal mask starts empty, whatever this process ignores or blocks;
    ///     nil leaves the child both as this process has them.
    public static func spawn(_ arguments: [[UInt8]], executable: String? = nil, descriptors: [(Int32, as: Int32)] = [],
                      defaultSignals: [Int32]? = nil) throws(Errno) -> ChildProcess {
        precondition(!arguments.isEmpty, "a child process needs a program to run")
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (descriptor, target) in descriptors {
            posix_spawn_file_actions_adddup2(&actions, descriptor, target)
        }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        if let defaultSignals {
            var defaults = sigset_t()
            sigemptyset(&defaults)
            for signal in defaultSignals { sigaddset(&defaults, signal) }
            posix_spawnattr_setsigdefault(&attributes, &defaults)
            var empty = sigset_t()
            sigemptyset(&empty)
            posix_spawnattr_setsigmask(&attributes, &empty)
            posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        }

        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { bytes in
            let argument = UnsafeMutablePointer<CChar>.allocate(capacity: bytes.count + 1)
            UnsafeMutableRawPointer(argument).copyMemory(from: bytes, byteCount: bytes.count)
            argument[bytes.count] = 0
            return argument
        } + [nil]
        defer { for argument in argv { argument?.deallocate() } }
        var pid: pid_t = 0
        let result = if let executable {
            posix_spawn(&pid, executable, &actions, &attributes, &argv, environ)
        } else {
            posix_spawnp(&pid, argv[0]!, &actions, &attributes, &argv, environ)
        }
        guard result == 0 else { throw Errno(rawValue: result) }
        return ChildProcess(pid: pid)
    }

    /// How a child ended.
    public enum Termination: Equatable, Sendable {
        case exited(Int32)
        case killed(bySignal: Int32)

        /// As a shell reports it: the exit status, or 128 + the signal.
        public var shellStatus: Int32 {
            switch self {
            case .exited(let status): status
            case .killed(let signal): 128 + signal
            }
        }
    }

    /// Waits for the child to end.
    public func wait() throws(Errno) -> Termination {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            let error = Errno(rawValue: Glibc.errno)
            if error != .interrupted { throw error }
        }
        // WIFEXITED / WEXITSTATUS / WTERMSIG, which Swift's Glibc module does not export.
        let signal = status & 0x7f
        return signal == 0 ? .exited((status >> 8) & 0xff) : .killed(bySignal: signal)
    }
}
