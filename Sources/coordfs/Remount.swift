import CoordFSCore
import CoordFSExec
import Glibc
import SystemPackage

/// `mount -o remount,ro MOUNTPOINT` (and `remount,rw`), which mount(8) hands to the helper:
/// the kernel switches the mount between read-only and read-write itself (FUSE takes the
/// change), so the daemon goes on serving; the mount's other options stay as they are.
enum Remount {
    /// Remounts, or says in one line why not, with the exit status.
    static func run(mountpoint: String, readOnly: Bool) -> Int32 {
        guard let resolved = realpath(mountpoint, nil) else {
            printError("\(mountpoint): \(String(cString: strerror(errno)))")
            return 1
        }
        let path = String(cString: resolved)
        free(resolved)
        guard let entry = MountTable.current().mount(at: path), entry.filesystemType.hasSuffix("coordfs") else {
            printError("\(path) is not a coordfs mount: nothing to remount")
            return 1
        }
        do throws(Errno) {
            try Syscall.remount(path, flags: entry.keptMountFlags | (readOnly ? UInt(MS_RDONLY) : 0))
            return 0
        } catch .resourceBusy {
            printError("cannot remount \(path) read-only: files are open for writing on it")
        } catch .notPermitted {
            printError("cannot remount \(path): only root may remount a FUSE mount")
        } catch {
            printError("cannot remount \(path): \(error)")
        }
        return 1
    }
}
