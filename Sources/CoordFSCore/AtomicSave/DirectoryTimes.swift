import Glibc
import SystemPackage

/// Saving a file does not change its directory on a plain disk, and rsync, make and backups
/// look at a directory's modification time. Every step of a save that adds, renames over or
/// removes a name in the directory (a named temp, the name an unnamed temp commits under)
/// puts that time back afterwards.
public enum DirectoryTimes {
    /// Runs `step`, then sets the directory's modification time back to what it was before.
    /// A change by someone else inside the step's few microseconds would lose its time update;
    /// the change itself stays.
    @discardableResult
    public static func keeping<R: ~Copyable, E: Error>(of directory: Int32, _ step: () throws(E) -> R) throws(E) -> R {
        let before = try? Syscall.statOfPathDescriptor(directory)
        let result = try step()
        if let before {
            let times = (timespec(tv_sec: 0, tv_nsec: Linux.UTIME_OMIT), before.st_mtim)
            try? Syscall.setTimes(at: directory, "", times, flags: Linux.AT_EMPTY_PATH)
        }
        return result
    }
}
