import ArgumentParser
import CoordFSCore
import CoordFSExec
import Glibc

struct Unmount: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Unmount a coordfs mount; its daemon then exits.")

    @Argument(help: "The mountpoint.", completion: .directory, transform: ExactArguments.display)
    var mountpoint: String

    @Flag(name: [.short, .long], help: "Detach now even if files are open; the daemon ends when they close.")
    var lazy = false

    func run() throws {
        guard let resolved = realpath(mountpoint, nil) else {
            throw CleanExit.failure("\(mountpoint): \(String(cString: strerror(errno)))")
        }
        let path = String(cString: resolved)
        free(resolved)
        guard let entry = MountTable.current().mount(at: path) else {
            throw CleanExit.failure("\(path) is not mounted")
        }
        guard entry.filesystemType.hasSuffix("coordfs") else {
            throw CleanExit.failure("\(path) is a \(entry.filesystemType) mount, not coordfs")
        }
        if geteuid() == 0 {
            if umount2(path, lazy ? Int32(MNT_DETACH) : 0) != 0 {
                let error = errno
                if error == EBUSY {
                    throw CleanExit.failure("\(path) is busy (files are open or a process works in it); use --lazy to detach it anyway")
                }
                throw CleanExit.failure("cannot unmount \(path): \(String(cString: strerror(error)))")
            }
            return
        }
        let arguments = ["fusermount3", "-u"] + (lazy ? ["-z"] : []) + [path]
        let child: ChildProcess
        do {
            child = try ChildProcess.spawn(arguments.map { Array($0.utf8) })
        } catch {
            throw CleanExit.failure("cannot run fusermount3 (Debian package fuse3)")
        }
        if (try? child.wait()) != .exited(0) { throw ExitCode.failure }
    }
}
