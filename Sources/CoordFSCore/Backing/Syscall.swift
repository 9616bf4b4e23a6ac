import CSystemCalls
import Glibc
import SystemPackage

/// Every system call coordfs makes on the backing directory goes through here: one typed
/// wrapper per call, `Errno` as the error, `EINTR` retried where the call may be restarted.
///
/// Keeping them in one place (this type: its helpers here, a file beside it for each family
/// of calls, `Syscall+Files`, `+Attributes`, `+Names` and `+Process`, and the watch's in
/// `Watch/WatchSyscalls.swift`) makes every failure path reviewable together, and lets the
/// core's unit tests drive the real calls on a scratch directory, without a mount.
public enum Syscall {
    /// Runs `body` with the calling thread's file creation mask set to `mask`, then puts the
    /// old one back. `body` gets the mode to create with: `mode` itself, which the kernel then
    /// masks as creat(2) does on a plain disk (by the umask, or by the directory's default ACL
    /// instead); or, where threads cannot have masks of their own, `mode` less `mask`.
    ///
    /// Each thread first gets a mask of its own (`unshare(CLONE_FS)`, once per thread), so
    /// that callers served at the same time on other threads do not see each other's. The
    /// mask is set for every call, even one that clears no bit: a thread's mask is whatever
    /// the daemon started with, or one copied from another thread in the middle of a create (a
    /// thread started from an unshared one shares its mask until it unshares itself), never
    /// known to be 0.
    public static func withCreationMask<R: ~Copyable>(_ mask: mode_t, mode: mode_t,
                                                      _ body: (mode_t) throws(Errno) -> R) throws(Errno) -> R {
        guard csys_unshare_fs_once() == 0 else { return try body(mode & ~mask) }
        let previous = umask(mask)
        defer { umask(previous) }
        return try body(mode)
    }

    /// Whether threads can have creation masks of their own (see `withCreationMask`); asks
    /// for one for the calling thread. False under a seccomp filter that refuses unshare(2).
    public static func threadsHaveOwnCreationMasks() -> Bool {
        csys_unshare_fs_once() == 0
    }

    @inline(__always)
    public static func check(_ result: Int32) throws(Errno) -> Int32 {
        if result < 0 { throw Errno.current }
        return result
    }

    @inline(__always)
    public static func check(_ result: Int) throws(Errno) -> Int {
        if result < 0 { throw Errno.current }
        return result
    }

    /// Repeats a call interrupted by a signal before it did anything.
    @inline(__always)
    @usableFromInline
    static func retrying(_ body: () -> Int32) throws(Errno) -> Int32 {
        while true {
            let result = body()
            if result >= 0 { return result }
            let error = Errno.current
            if error != .interrupted { throw error }
        }
    }

    @inline(__always)
    @usableFromInline
    static func retrying(_ body: () -> Int) throws(Errno) -> Int {
        while true {
            let result = body()
            if result >= 0 { return result }
            let error = Errno.current
            if error != .interrupted { throw error }
        }
    }
}
