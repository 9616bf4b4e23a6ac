import CSystemCalls
import Glibc
import SystemPackage

// The process and its mounts: remounting, naming threads, closing inherited descriptors
// and the descriptor limit.
extension Syscall {
    // MARK: Mounts

    /// Remounts the mount at `path` with `flags` (MS_REMOUNT is added): read-only or
    /// read-write, keeping the mount's other flags only if `flags` names them.
    public static func remount(_ path: String, flags: UInt) throws(Errno) {
        _ = try check(Glibc.mount(nil, path, nil, flags | UInt(MS_REMOUNT), nil))
    }

    // MARK: Process

    /// Names the calling thread, and the threads it starts from now on, as `ps`, `top` and
    /// `pgrep` show them. A daemon started through /proc/self/exe would otherwise be "exe".
    public static func nameThisThread(_ name: String) {
        _ = csys_set_thread_name(name)
    }

    /// Closes every descriptor numbered `first` or above: a daemon must not keep its
    /// starter's pipes and sockets open (whoever waits for their end would wait forever).
    public static func closeDescriptors(from first: Int32) {
        _ = csys_close_from(UInt32(first))
    }

    /// The soft limit on open descriptors.
    public static func descriptorLimit() -> Int {
        var limit = rlimit()
        guard Glibc.getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        return Int(min(limit.rlim_cur, rlim_t(Int32.max)))
    }

    /// The decimal number at the start of a small file (a /proc or /sys setting).
    static func readNumber(_ path: String) -> UInt64? {
        guard let descriptor = try? openAt(AT_FDCWD, path, O_RDONLY) else { return nil }
        var bytes = [UInt8](repeating: 0, count: 32)
        let count = bytes.withUnsafeMutableBytes { Glibc.read(descriptor.raw, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        return UInt64(String(decoding: bytes[0..<count].prefix { $0 >= 48 && $0 <= 57 }, as: UTF8.self))
    }

    /// Raises the descriptor limit as far as the process may: every node the kernel remembers
    /// holds one, so a tree of a million files needs a million. Root may lift the hard limit up
    /// to the kernel's nr_open; others get their hard limit.
    public static func raiseDescriptorLimit() {
        var limit = rlimit()
        guard Glibc.getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
        if Glibc.geteuid() == 0, let ceiling = readNumber("/proc/sys/fs/nr_open") {
            limit.rlim_max = max(limit.rlim_max, rlim_t(ceiling))
        }
        limit.rlim_cur = limit.rlim_max
        if Glibc.setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) != 0 {
            _ = Glibc.getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            limit.rlim_cur = limit.rlim_max
            _ = Glibc.setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
    }
}
