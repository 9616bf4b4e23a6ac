import CoordFSExec
import Glibc

/// `coordfs` as people and scripts run it: a small program that starts in about a
/// millisecond. It runs `coordfs exec`'s usual command lines itself, since such a run is mostly
/// the start of the program that makes it (Docs/PERFORMANCE.md, "coordfs exec"), and hands
/// every other command line, unchanged and in the same process, to `coordfs-full`, the whole
/// program (the daemon, ArgumentParser, SwiftNIO, libfuse), installed beside it.
@main
enum Launcher {
    static func main() {
        let arguments = ExactArguments.forParser
        if arguments.first == "exec", let exec = ExecRequest.parsedQuickly(Array(arguments.dropFirst())) {
            exec.runAndExit()
        }
        FullProgram.replaceThisProcess()
    }
}

/// The whole program, beside this one.
enum FullProgram {
    static let name = "coordfs-full"

    /// Runs `coordfs-full` in this process with this process's arguments (the name it was
    /// called by included: `mount.coordfs` means mount(8)'s form) and environment.
    static func replaceThisProcess() -> Never {
        let path = location()
        execv(path, CommandLine.unsafeArgv)
        let error = errno
        let shown = String(decoding: path.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        printError("cannot run \(shown): \(String(cString: strerror(error))) (it is installed beside coordfs)")
        exit(error == ENOENT ? 127 : 126)
    }

    /// `coordfs-full` in the folder this program's file is in, links resolved (so
    /// /usr/sbin/mount.coordfs, a link to /usr/local/bin/coordfs, finds
    /// /usr/local/bin/coordfs-full): a C string of the folder's exact bytes.
    static func location() -> [CChar] {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        let folder = count > 0 ? buffer[..<count].lastIndex(of: CChar(UInt8(ascii: "/"))).map { buffer[...$0] } : nil
        return Array(folder ?? []) + name.utf8CString
    }
}
