import CoordFSTestSupport
import Foundation
import Glibc
import Testing

/// Faults of the backing leave the disk as it was (issue 32). The daemon runs with a shim
/// preloaded (Tests/FaultShim/faultshim.c) that makes chosen calls on the backing fail with
/// ENOSPC, EIO or EDQUOT on demand, as a full disk, a quota or a failing device would; the
/// scripts of `Scripts/FaultTests` set the faults while a program saves, appends, writes in
/// place or renames. Each case shows that the error reaches the program, the committed version
/// stays byte for byte in the mount and the backing, the backing holds exactly the case's files
/// once the daemon is done with the program's file, while the fault still lasts (no temp, no
/// conflict copy, no append journal), and that once the fault is gone the same program
/// succeeds (nothing stuck). Mounts sync every commit (`--durability file`), so a failing
/// fsync meets every commit.
@Suite(.serialized) struct FaultTests {
    static let errors = ["ENOSPC", "EIO", "EDQUOT"]

    /// How saves stage: in unnamed temps (the default; committed by a link, and a rename when
    /// replacing) or in named ones (committed by one rename).
    enum Temps: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case unnamed, named
        var options: [String] { self == .named ? ["--named-temps"] : [] }
        var testDescription: String { rawValue }
    }

    /// Compiles the shim into `scratch`'s folder with the toolchain's clang, else the system's cc.
    static func compileShim(into scratch: Scratch) throws -> String {
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("FaultShim/faultshim.c").path
        let library = scratch.root + "/faultshim.so"
        var failures: [String] = []
        for compiler in ["clang", "cc"] {
            let result = try run([compiler, "-shared", "-fPIC", "-O1", "-o", library, source, "-ldl"])
            if result.status == 0 { return library }
            failures.append("\(compiler): \(result)")
        }
        throw MountError(message: "could not compile \(source):\n" + failures.joined(separator: "\n"))
    }

    /// Mounts a fresh scratch folder whose daemon fails calls on the backing as the control file
    /// says (empty: none), runs the script `name` in the mount with `error` and `cases`, and
    /// returns what it printed. Unmounts whatever happens.
    static func runScript(_ name: String, _ error: String, cases: [String], options: [String] = [],
                          sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let scratch = try Scratch()
        let shim = try compileShim(into: scratch)
        let control = scratch.root + "/faults"
        try "".write(toFile: control, atomically: false, encoding: .utf8)
        let faults = ["COORDFS_FAULT_ROOT": scratch.backing, "COORDFS_FAULT_CONTROL": control]
        try scratch.mount(["--durability", "file"] + options, environment: faults.merging(["LD_PRELOAD": shim]) { $1 })
        defer { scratch.unmount(sourceLocation: sourceLocation) }
        // The launcher hands the mount to coordfs-full by execv, in the same process: the
        // environment, and with it the shim, must have come along.
        let mapped = try run(["grep", "-qF", shim, "/proc/\(scratch.daemonID ?? 0)/maps"])
        try #require(mapped.status == 0, "the daemon has not loaded the fault shim", sourceLocation: sourceLocation)
        let result = try run(["python3", pythonScript("FaultTests/" + name), error] + cases, in: scratch.mountpoint, environment: faults)
        #expect(result.status == 0, "\(result)", sourceLocation: sourceLocation)
        return result.output
    }

    /// With `--durability full`, a save whose commit took effect but whose directory then fails
    /// to sync: too late to fail the save (everyone reads the new version already), so the
    /// program's close succeeds, the new bytes are in the mount and the backing, and the log
    /// says the save may not survive a crash.
    @Test func aDirectorySyncFailingAfterTheCommitIsLogged() throws {
        let scratch = try Scratch()
        let shim = try Self.compileShim(into: scratch)
        let control = scratch.root + "/faults"
        try "".write(toFile: control, atomically: false, encoding: .utf8)
        try "before\n".write(toFile: scratch.backing + "/file", atomically: false, encoding: .utf8)
        let faults = ["COORDFS_FAULT_ROOT": scratch.backing, "COORDFS_FAULT_CONTROL": control, "LD_PRELOAD": shim]
        try scratch.mount(["--durability", "full"], environment: faults)
        defer { scratch.unmount() }
        // The commit syncs the staged file first (let through), then its directory (fails).
        try "fsync EIO 1 1\n".write(toFile: control, atomically: false, encoding: .utf8)
        let save = try run(["sh", "-c", "printf 'after\\n' > file"], in: scratch.mountpoint)
        #expect(save.status == 0, "\(save)")
        #expect(try String(contentsOfFile: scratch.mountpoint + "/file", encoding: .utf8) == "after\n")
        #expect(try String(contentsOfFile: scratch.backing + "/file", encoding: .utf8) == "after\n")
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.backing) == ["file"])
        // The commit comes with the release, which the kernel sends after close returned.
        var logged = scratch.daemonLogSoFar
        for _ in 0..<100 where !logged.contains("syncing its directory failed") {
            usleep(50_000)
            logged = scratch.daemonLogSoFar
        }
        #expect(logged.contains("syncing its directory failed"), "\(logged)")
    }

    /// A save of an existing file whose second write, staging copy, commit fsync, own fsync,
    /// commit link or commit rename fails: the program's failing call gets the error, and so
    /// does its close whenever the save had changed anything (a program that does not check its
    /// writes still learns at the close that its save did not happen); the file keeps its
    /// 12 KiB byte for byte, nothing is left beside it, and the next save commits. The
    /// program's own fsync matters: a failed fsync may have lost the temp's pages, so the save
    /// must not commit them even when the commit's fsync then passes. Named temps commit by a
    /// rename alone, so no link of theirs can fail.
    @Test(arguments: errors, Temps.allCases)
    func aFailedSaveKeepsTheCommittedFile(error: String, temps: Temps) throws {
        let calls = [
            "write": "write ok, write \(error), close \(error)",
            "copy": "write \(error), close ok",
            "fsync": "write ok, write ok, close \(error)",
            "fsync-by-program": "write ok, fsync \(error), close \(error)",
            "link": "write ok, write ok, close \(error)",
            "rename": "write ok, write ok, close \(error)",
        ]
        let cases = ["write", "copy", "fsync", "fsync-by-program"] + (temps == .unnamed ? ["link"] : []) + ["rename"]
        let output = try Self.runScript("saveFails", error, cases: cases, options: temps.options)
        let expected = cases.map { name in
            """
            \(name): \(calls[name]!); mount as before; backing as before; names ['file']
              then write ok, close ok; b'after\\n'; names ['file']

            """
        }.joined()
        #expect(output == expected)
    }

    /// The first save of a file created through the mount whose write, commit fsync or commit
    /// link (unnamed temps: straight to the name) or rename (named temps) fails: the program
    /// gets the error, no name shows in the mount or exists in the backing, and creating the
    /// file again works.
    @Test(arguments: errors, Temps.allCases)
    func aFailedFirstSaveLeavesNoName(error: String, temps: Temps) throws {
        let cases = ["write", "fsync", temps == .unnamed ? "link" : "rename"]
        let output = try Self.runScript("firstSaveFails", error, cases: cases, options: temps.options)
        let expected = cases.map { name in
            """
            \(name): \(name == "write" ? "write \(error)" : "write ok"), close \(error); mount ENOENT; backing ENOENT; listed []; names []
              then write ok, close ok; b'after\\n'; names ['new']

            """
        }.joined()
        #expect(output == expected)
    }

    /// An append (O_APPEND) whose first write went to the file itself, behind the committed
    /// size, and whose second write or commit fsync then fails: the program gets the error, the
    /// file is cut back to its committed part byte for byte (the first write goes with the
    /// failed save), the append journal is gone from the backing, and the next append commits.
    @Test(arguments: errors)
    func aFailedAppendKeepsTheCommittedPart(error: String) throws {
        let output = try Self.runScript("appendFails", error, cases: ["write", "fsync"])
        #expect(output == """
            write: write ok, write \(error), close \(error); mount as before; backing as before; names ['log']
              then write ok, close ok; b'line 1\\nline 4\\n'; names ['log']
            fsync: write ok, close \(error); mount as before; backing as before; names ['log']
              then write ok, close ok; b'line 1\\nline 4\\n'; names ['log']

            """)
    }

    /// A write to a file the in-place policy writes directly (`*.db`), or the program's fsync of
    /// it, that fails: the program gets the error from that call (there is no save to fail at
    /// the close), the file is as before, and writing it again works.
    @Test(arguments: errors)
    func aFailedInPlaceWriteReachesTheProgram(error: String) throws {
        let output = try Self.runScript("inPlaceWriteFails", error, cases: ["write", "fsync"])
        #expect(output == """
            write: write \(error), close ok; mount as before; backing as before; names ['data.db']
              then write ok, fsync ok, close ok; b'DATABASE\\ndatabase\\nda'; names ['data.db']
            fsync: fsync \(error), close ok; mount as before; backing as before; names ['data.db']
              then write ok, fsync ok, close ok; b'DATABASE\\ndatabase\\nda'; names ['data.db']

            """)
    }

    /// A rename through the mount, onto an existing name or a free one, whose rename in the
    /// backing fails: the program gets the error, both names are as before in the mount and the
    /// backing (the kernel's cached names too), and the same rename then works.
    @Test(arguments: errors)
    func aFailedRenameKeepsBothNames(error: String) throws {
        let output = try Self.runScript("renameFails", error, cases: ["over", "new"])
        #expect(output == """
            over: rename \(error); from: mount as before; backing as before; to: mount as before; backing as before; names ['from', 'to']
              then rename ok; ['to'] b'moving\\n'; names ['to']
            new: rename \(error); from: mount as before; backing as before; to: mount ENOENT; backing ENOENT; names ['from']
              then rename ok; ['to'] b'moving\\n'; names ['to']

            """)
    }

    /// A save that finds its file written behind the mount keeps that version as a conflict
    /// copy (a link) before its commit. When that link fails, or the commit after it does, the
    /// save fails with the error, the outside version stays under the name, and neither a
    /// conflict copy nor a temp is left: the disk is as the outside writer left it. The next
    /// save (which starts from the outside version, so meets no conflict) commits.
    @Test(arguments: errors, Temps.allCases)
    func aFailedConflictCopyKeepsTheOutsideVersion(error: String, temps: Temps) throws {
        let output = try Self.runScript("conflictCopyFails", error, cases: ["link", "commit"], options: temps.options)
        let expected = ["link", "commit"].map { name in
            """
            \(name): write ok, close \(error); mount as before; backing as before; names ['shared']
              then write ok, close ok; b'after\\n'; names ['shared']

            """
        }.joined()
        #expect(output == expected)
    }
}
