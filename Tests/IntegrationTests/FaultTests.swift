import CoordFSTestSupport
import Foundation
import Glibc
import Testing

/// Faults of the backing leave the disk as it was (issue 32): a shim preloaded into the daemon
/// (Tests/FaultShim/faultshim.c) makes writes, syncs, links or renames under the backing fail with
/// ENOSPC, EIO or EDQUOT on demand, and for saves, a first save, appends, in-place writes,
/// renames and conflict copies the error reaches the program, the committed version stays
/// whole, nothing is left in the backing, and the next save works.
@Suite(.serialized) struct FaultTests {
    /// The shim, compiled once per run with the toolchain's clang (or the system's cc).
    static let shim: Result<String, LineClientError> = {
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("FaultShim/faultshim.c").path
        let output = "/tmp/coordfs-faultshim-\(getpid()).so"
        for compiler in ["clang", "cc"] {
            if let built = try? run(["/usr/bin/env", compiler, "-shared", "-fPIC", "-O1", "-o", output, source, "-ldl"]), built.status == 0 {
                return .success(output)
            }
        }
        return .failure(LineClientError("neither clang nor cc could build \(source)"))
    }()

    /// What `matrix.py` prints for `error` (see its cases): every failure reaches the program
    /// and leaves the committed version and nothing else. With named temps a save commits by
    /// rename alone, so a failing link does not touch it.
    static func expected(_ error: String, namedTemps: Bool) -> String {
        let linkCase = namedTemps ? "save, link fails: ok; save-link.txt 'new version\\n'; left []"
            : "save, link fails: \(error); save-link.txt 'committed\\n'; left []"
        return """
            save, write fails: \(error); save-write.txt 'committed\\n'; left []
              then 'after\\n'
            save, fsync fails: \(error); save-fsync.txt 'committed\\n'; left []
              then 'after\\n'
            \(linkCase)
              then 'after\\n'
            save, rename fails: \(error); save-rename.txt 'committed\\n'; left []
              then 'after\\n'
            first save, write fails: \(error); name left False; left []
            append, write fails: \(error); log.txt 'line 1\\n'; left []
              then 'line 1\\nline 3\\n'
            in place, write fails: \(error); data.db 'database\\n'; left []
            rename fails: \(error); from.txt 'moving\\n'; left []; to.txt 'ENOENT'
            conflict copy fails: \(error); shared.txt 'behind the mount\\n'; left []

            """
    }

    @Test(arguments: ["ENOSPC", "EIO", "EDQUOT"], [false, true])
    func aFailingBackingLeavesTheDiskAsItWas(error: String, namedTemps: Bool) throws {
        let shim = try Self.shim.get()
        let scratch = try Scratch()
        let control = scratch.root + "/faults"
        try "".write(toFile: control, atomically: false, encoding: .utf8)
        try scratch.mount(["--durability", "file"] + (namedTemps ? ["--named-temps"] : []),
                          environment: ["LD_PRELOAD": shim, "COORDFS_FAULT_ROOT": scratch.backing, "COORDFS_FAULT_CONTROL": control])
        defer { scratch.unmount() }
        let result = try run(["python3", pythonScript("FaultTests/matrix"), scratch.mountpoint, scratch.backing, control, error],
                             in: scratch.root)
        #expect(result.status == 0, "\(result)")
        #expect(result.output == Self.expected(error, namedTemps: namedTemps), "\(result.output)")
        // The shim was there: the daemon said so in its log for the failed commits.
        #expect(scratch.daemonLogSoFar.contains("commit failed"), "\(scratch.daemonLogSoFar)")
    }
}
