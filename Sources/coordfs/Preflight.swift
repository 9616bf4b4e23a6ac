import ArgumentParser
import CoordFSCore
import Glibc
import SystemPackage

/// A problem with what the user asked for: printed as one clear line, exit status 1.
struct UsageProblem: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Checks, before anything is mounted, the things a user can get wrong, so each gets a
/// sentence instead of a libfuse message.
enum Preflight {
    /// Resolves `path` to a canonical directory path, or says why it is not one.
    static func directory(_ path: String, role: String) throws(UsageProblem) -> String {
        var status = stat()
        if stat(path, &status) != 0 {
            let error = Errno.current
            switch error {
            case .noSuchFileOrDirectory: throw UsageProblem("the \(role) \(path) does not exist")
            case .notDirectory: throw UsageProblem("the \(role) \(path) is not a directory")
            case .permissionDenied: throw UsageProblem("the \(role) \(path) cannot be reached: permission denied")
            default: throw UsageProblem("the \(role) \(path) cannot be used: \(error)")
            }
        }
        guard (status.st_mode & S_IFMT) == S_IFDIR else {
            throw UsageProblem("the \(role) \(path) is not a directory")
        }
        guard let resolved = realpath(path, nil) else {
            throw UsageProblem("the \(role) \(path) cannot be resolved: \(Errno.current)")
        }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// Everything `mount` needs to be true; returns the canonical backing and mountpoint.
    static func mount(backing: String, mountpoint: String, allowOther: Bool) throws(UsageProblem) -> (backing: String, mountpoint: String) {
        let backing = try directory(backing, role: "backing directory")
        let mountpoint = try directory(mountpoint, role: "mountpoint")
        if let problem = MountLayout.problem(backing: backing, mountpoint: mountpoint) {
            throw UsageProblem(problem.description)
        }
        if let existing = MountTable.current().mount(at: mountpoint) {
            throw UsageProblem("\(mountpoint) is already a mountpoint (\(existing.filesystemType)); unmount it first")
        }
        if Glibc.access("/dev/fuse", R_OK | W_OK) != 0 {
            let error = Errno.current
            if error == .noSuchFileOrDirectory {
                throw UsageProblem("/dev/fuse does not exist: load the fuse kernel module (modprobe fuse) or give this container the device")
            }
            throw UsageProblem("cannot use /dev/fuse: \(error)")
        }
        if geteuid() != 0 {
            if !hasExecutable("fusermount3") {
                throw UsageProblem("mounting as a user other than root needs fusermount3 (Debian package fuse3)")
            }
            if allowOther && !userAllowOtherEnabled() {
                throw UsageProblem("--allow-other for a user other than root needs 'user_allow_other' in /etc/fuse.conf")
            }
        }
        return (backing, mountpoint)
    }

    static func hasExecutable(_ name: String) -> Bool {
        let path = getenv("PATH").map { String(cString: $0) } ?? "/usr/bin:/bin"
        return path.split(separator: ":").contains { Glibc.access("\($0)/\(name)", X_OK) == 0 }
    }

    static func userAllowOtherEnabled() -> Bool {
        guard let file = fopen("/etc/fuse.conf", "r") else { return false }
        defer { fclose(file) }
        var line = [CChar](repeating: 0, count: 4096)
        while fgets(&line, Int32(line.count), file) != nil {
            let text = line.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            if text.filter({ !$0.isWhitespace }) == "user_allow_other" { return true }
        }
        return false
    }
}

