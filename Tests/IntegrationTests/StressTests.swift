import Foundation
import Glibc
import Testing

/// stress-ng's filesystem stressors, and its file-backed mmap stressor, all at once on one
/// mount: every stressor checks its own results (`--verify`) and reports what it finds wrong.
@Suite(.serialized) struct StressTests {
    /// Stressors that test the machine rather than a filesystem: binderfs needs a kernel
    /// module, bind-mount a mount namespace of its own (both skip themselves with an error).
    /// And fanotify: it watches the whole filesystem, and every event it has not read yet pins
    /// the file it names; when it falls behind, the inotify stressor waits in vain for the
    /// IN_DELETE_SELF of a directory it removed. That fails on a plain ext4 directory too
    /// (stress-ng 0.15.06, 20 s, --temp-path /tmp/...), so it would only test the machine's load.
    static let excluded = "binderfs,bind-mount,fanotify"

    /// Runs its arguments with no signal blocked.
    static let withSignalsUnblocked = """
        import os, signal, sys
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        os.execvp(sys.argv[1], sys.argv[1:])
        """

    @Test func filesystemStressorsReportNoFailure() throws {
        try withMount { scratch in
            let work = scratch.mountpoint + "/stress"
            try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: false)
            // Run from outside the mount: some stressors also change their working directory's
            // times, which would make the test about where it was started. stress-ng ends its
            // run with SIGALRM, which the test runner's threads (and so their children) block:
            // the command starts with every signal unblocked.
            let stress = ["stress-ng", "--class", "filesystem", "--all", "1", "--exclude", Self.excluded,
                          "--mmap", "1", "--mmap-file", "--verify", "--timeout", "60s", "--temp-path", work]
            let result = try run(["/usr/bin/python3", "-c", Self.withSignalsUnblocked] + stress, in: "/")
            let complaints = (result.output + result.errors).split(separator: "\n")
                .filter { $0.contains(" fail: ") || $0.contains(" error: ") }
            #expect(complaints.isEmpty, "stress-ng reported:\n\(complaints.joined(separator: "\n"))")
            #expect(result.status == 0, "\(result)")
            // Whatever the stressors left, the backing holds exactly what the mount shows.
            let mounted = try FileManager.default.subpathsOfDirectory(atPath: scratch.mountpoint).sorted()
            let backed = try FileManager.default.subpathsOfDirectory(atPath: scratch.backing).sorted()
            #expect(mounted == backed)
        }
    }
}
