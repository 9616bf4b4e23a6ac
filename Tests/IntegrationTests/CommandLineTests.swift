import Foundation
import Glibc
import Testing

/// The command line: clear one-line errors and a non-zero status for bad input, never a
/// crash trace; background mounts that return when ready; clean ends on unmount and signals.
@Suite(.serialized) struct CommandLineTests {
    /// Runs coordfs and expects failure with `message` in its errors and no crash output.
    func expectFailure(_ arguments: [String], saying message: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let result = try run([coordfsBinary] + arguments)
        #expect(result.status != 0, "\(result)", sourceLocation: sourceLocation)
        #expect(result.errors.contains(message), "expected «\(message)» in: \(result.errors)", sourceLocation: sourceLocation)
        for crashSign in ["Fatal error", "Stack dump", "backtrace", "Illegal instruction"] {
            #expect(!result.errors.contains(crashSign), "crash output: \(result.errors)", sourceLocation: sourceLocation)
        }
    }

    @Test func missingOrWrongDirectories() throws {
        let scratch = try Scratch()
        try expectFailure(["mount", scratch.root + "/nope", scratch.mountpoint], saying: "does not exist")
        try expectFailure(["mount", scratch.backing, scratch.root + "/nope"], saying: "does not exist")
        #expect(FileManager.default.createFile(atPath: scratch.root + "/file", contents: Data("x".utf8)))
        try expectFailure(["mount", scratch.root + "/file", scratch.mountpoint], saying: "is not a directory")
        try expectFailure(["mount", scratch.backing, scratch.root + "/file"], saying: "is not a directory")
        try expectFailure(["mount", scratch.backing, scratch.backing], saying: "are the same directory")
        try FileManager.default.createDirectory(atPath: scratch.backing + "/inner", withIntermediateDirectories: false)
        try expectFailure(["mount", scratch.backing, scratch.backing + "/inner"], saying: "lies inside the backing directory")
        try expectFailure(["mount", scratch.backing, scratch.root], saying: "lies inside the mountpoint")
        #expect(!isMounted(scratch.mountpoint))
    }

    @Test func unknownOptionAndMissingArguments() throws {
        let scratch = try Scratch()
        try expectFailure(["mount", scratch.backing, scratch.mountpoint, "--no-such-option"], saying: "Unknown option")
        try expectFailure(["mount", scratch.backing], saying: "Missing expected argument")
        try expectFailure(["mount", scratch.backing, scratch.mountpoint, "--attr-timeout=-1"], saying: "cannot be negative")
        #expect(!isMounted(scratch.mountpoint))
    }

    @Test func alreadyMounted() throws {
        try withMount { scratch in
            try expectFailure(["mount", scratch.plain, scratch.mountpoint], saying: "already a mountpoint")
        }
    }

    @Test func noFuseDevice() throws {
        let scratch = try Scratch()
        // A private mount namespace whose /dev lacks fuse.
        let result = try run(["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
                              "mount -t tmpfs none /dev && exec \(coordfsBinary) mount \(scratch.backing) \(scratch.mountpoint)"])
        #expect(result.status != 0)
        #expect(result.errors.contains("/dev/fuse does not exist"), "\(result)")
    }

    @Test func unmountWhatIsNotMounted() throws {
        let scratch = try Scratch()
        try expectFailure(["unmount", scratch.mountpoint], saying: "is not mounted")
        try expectFailure(["unmount", scratch.root + "/nope"], saying: "No such file or directory")
        try expectFailure(["unmount", "/"], saying: "not coordfs")
    }

    @Test func backgroundMountReturnsWhenReady() throws {
        let scratch = try Scratch()
        try "hello\n".write(toFile: scratch.backing + "/greeting", atomically: false, encoding: .utf8)
        let mounted = try run([coordfsBinary, "mount", scratch.backing, scratch.mountpoint])
        #expect(mounted.status == 0, "\(mounted)")
        defer { if isMounted(scratch.mountpoint) { _ = try? run(["umount", "-l", scratch.mountpoint]) } }
        #expect(isMounted(scratch.mountpoint), "mount returned before the mount was ready")
        #expect((try? String(contentsOfFile: scratch.mountpoint + "/greeting", encoding: .utf8)) == "hello\n")
        let daemons = try run(["pgrep", "-f", "coordfs mount \(scratch.backing)"])
        #expect(daemons.status == 0, "no daemon process")
        // ps, top and pgrep know the daemon as coordfs (it starts through /proc/self/exe).
        let pid = daemons.output.split(separator: "\n").first.map(String.init) ?? ""
        #expect((try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)) == "coordfs\n")
        let unmounted = try run([coordfsBinary, "unmount", scratch.mountpoint])
        #expect(unmounted.status == 0, "\(unmounted)")
        #expect(!isMounted(scratch.mountpoint))
        // The daemon ends by itself once its mount is gone.
        var remaining = try run(["pgrep", "-f", "coordfs mount \(scratch.backing)"])
        for _ in 0..<200 where remaining.status == 0 {
            usleep(25_000)
            remaining = try run(["pgrep", "-f", "coordfs mount \(scratch.backing)"])
        }
        #expect(remaining.status != 0, "the daemon is still running: \(remaining.output)")
    }

    @Test(arguments: [SIGTERM, SIGINT])
    func signalUnmountsCleanly(signal: Int32) throws {
        let scratch = try Scratch()
        try scratch.mount()
        let daemons = try run(["pgrep", "-f", "coordfs mount \(scratch.backing)"])
        let pid = try #require(Int32(daemons.output.split(separator: "\n").first ?? ""))
        kill(pid, signal)
        var waited = 0
        while isMounted(scratch.mountpoint) && waited < 400 { usleep(25_000); waited += 1 }
        #expect(!isMounted(scratch.mountpoint), "a signal did not unmount")
        scratch.expectDaemonExit(status: 0)
    }

    @Test func busyMountNeedsLazy() throws {
        try withMount { scratch in
            let holder = Process()
            holder.executableURL = URL(fileURLWithPath: "/bin/sleep")
            holder.arguments = ["30"]
            holder.currentDirectoryURL = URL(fileURLWithPath: scratch.mountpoint)
            try holder.run()
            // SIGKILL: a child of the test runner may inherit a mask that blocks SIGTERM.
            defer { kill(holder.processIdentifier, SIGKILL); holder.waitUntilExit() }
            try expectFailure(["unmount", scratch.mountpoint], saying: "busy")
            #expect(isMounted(scratch.mountpoint))
        }
    }
}
