import Foundation
import Glibc
import Testing

/// System calls one by one, through the mount and on a plain directory: the same results,
/// the same errno names, the same tree afterwards. Each script prints what it observed, so a
/// difference shows as a diff of two transcripts.
@Suite(.serialized) struct SyscallParityTests {
    /// A shell command that runs the script `name` (`Scripts/<name>.py`, which starts with
    /// `from coordtest import *`) with /usr/bin/python3 and `arguments`; "done" follows when it
    /// exits with 0, so a script that stopped early cannot pass by failing the same way twice.
    static func python(_ name: String, _ arguments: String...) -> String { python(name, arguments: arguments) }

    static func python(_ name: String, arguments: [String]) -> String {
        (["/usr/bin/python3", pythonScript(name)] + arguments).map(shellQuoted).joined(separator: " ") + " && echo done\n"
    }

    /// `expectParity` for a python script (plus an optional shell tail), and checks that the run
    /// through the mount finished and printed each of `expected`'s lines: values a correct
    /// filesystem must show, so that parity with a broken plain run would still fail.
    @discardableResult
    static func expectPythonParity(_ name: String, arguments: [String] = [], shellTail: String = "", in scratch: Scratch,
                                   snapshot options: TreeSnapshot.Options = .init(), user: (uid: UInt32, gid: UInt32)? = nil,
                                   compareTree: Bool = true, expected: [String],
                                   sourceLocation: SourceLocation = #_sourceLocation) throws -> CommandResult {
        let results = try expectParity(python(name, arguments: arguments) + shellTail, in: scratch, snapshot: options, user: user,
                                       compareTree: compareTree, sourceLocation: sourceLocation)
        let result = results.mount
        #expect(result.status == 0 && result.errors.isEmpty, "\(result)", sourceLocation: sourceLocation)
        let lines = result.output.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.contains("done"), "the script stopped early: \(result)", sourceLocation: sourceLocation)
        for line in expected {
            #expect(lines.contains(line), "missing line \"\(line)\" in:\n\(result.output)", sourceLocation: sourceLocation)
        }
        return result
    }

    @Test func missingNamesGiveENOENT() throws {
        try withMount { scratch in
            try Self.expectPythonParity("SyscallParityTests/missingNamesGiveENOENT", in: scratch, expected: [
                "open ENOENT",
                "unlink ENOENT",
                "rmdir ENOENT",
                "rename ENOENT",
                "rename into missing dir ENOENT",
                "before create ENOENT",
                "after create 3",
                "after unlink ENOENT",
                "['dangling', 'f']",
            ])
        }
    }

    @Test func existingNamesGiveEEXIST() throws {
        try withMount { scratch in
            try Self.expectPythonParity("SyscallParityTests/existingNamesGiveEEXIST", in: scratch, expected: [
                "mkdir existing dir EEXIST",
                "O_CREAT|O_EXCL existing EEXIST",
                "O_CREAT|O_EXCL dangling symlink EEXIST",
                "link onto existing EEXIST",
                "symlink onto existing EEXIST",
                "O_CREAT without O_EXCL keeps it b'x'",
                "dangling symlink with O_CREAT creates the target file",
            ])
        }
    }

    @Test func nonEmptyDirectoriesGiveENOTEMPTY() throws {
        try withMount { scratch in
            try Self.expectPythonParity("SyscallParityTests/nonEmptyDirectoriesGiveENOTEMPTY", in: scratch, expected: [
                "rmdir non-empty ENOTEMPTY",
                "rename dir onto non-empty dir ENOTEMPTY",
                "rename dir onto empty dir ok",
                "ENOENT dir dir",
                "rename dir into itself EINVAL",
                "['empty']",
            ])
        }
    }

    @Test func directoriesGiveEISDIR() throws {
        try withMount { scratch in
            try Self.expectPythonParity("SyscallParityTests/directoriesGiveEISDIR", in: scratch, expected: [
                "open dir write-only EISDIR",
                "unlink dir EISDIR",
                "rename file onto empty dir EISDIR",
                "rename file onto non-empty dir EISDIR",
                "file dir b'x'",
            ])
        }
    }

    @Test func filesInPathsGiveENOTDIR() throws {
        try withMount { scratch in
            try Self.expectPythonParity("SyscallParityTests/filesInPathsGiveENOTDIR", in: scratch, expected: [
                "stat through file ENOTDIR",
                "rmdir a file ENOTDIR",
                "rename dir onto file ENOTDIR",
                "file dir",
            ])
        }
    }

    /// A rename or link out of the mount crosses filesystems. /dev/shm is tmpfs, the plain
    /// directory lives on the scratch filesystem: when they differ, both sides must say EXDEV.
    @Test func crossDeviceRenameGivesEXDEV() throws {
        try withMount { scratch in
            let script = "SyscallParityTests/crossDeviceRenameGivesEXDEV"
            var plainStatus = stat(), shmStatus = stat()
            let otherFileSystem = lstat(scratch.plain, &plainStatus) == 0 && lstat("/dev/shm", &shmStatus) == 0
                && plainStatus.st_dev != shmStatus.st_dev
            if otherFileSystem {
                try Self.expectPythonParity(script, in: scratch, expected: ["other fs True", "rename file out EXDEV", "link out EXDEV", "False b'payload'", "False payload"])
            } else {
                let result = try shell(Self.python(script), in: scratch.mountpoint)
                #expect(result.output == """
                    other fs True
                    rename file out EXDEV
                    rename dir out EXDEV
                    link out EXDEV
                    renameat2 noreplace out EXDEV
                    False b'payload'
                    False payload
                    b'payload' False
                    done

                    """, "\(result)")
            }
            // Into the backing directory: the same disk underneath, but another mount.
            let intoBacking = try shell(Self.python("SyscallParityTests/crossDeviceRenameGivesEXDEV-intoBacking", scratch.backing), in: scratch.mountpoint)
            #expect(intoBacking.output == "rename into backing EXDEV\nlink into backing EXDEV\ndone\n", "\(intoBacking)")
        }
    }

    @Test func longNamesGiveENAMETOOLONG() throws {
        try withMount { scratch in
            try Self.expectPythonParity("SyscallParityTests/longNamesGiveENAMETOOLONG", in: scratch, expected: [
                "create 256 ENAMETOOLONG",
                "stat 256 ENAMETOOLONG",
                "mkdir 256 ENAMETOOLONG",
                "rename to 256 ENAMETOOLONG",
                "create 255 ok",
                "readlink it 4095",
                "symlink to a 4096-byte target ENAMETOOLONG",
            ])
        }
    }

    @Test func symlinkLoopsGiveELOOP() throws {
        try withMount { scratch in
            try Self.expectPythonParity("SyscallParityTests/symlinkLoopsGiveELOOP", in: scratch, expected: [
                "O_NOFOLLOW on symlink ELOOP",
                "O_NOFOLLOW|O_CREAT on symlink ELOOP",
                "O_NOFOLLOW on file ok",
                "self loop stat ELOOP",
                "O_PATH|O_NOFOLLOW on symlink l",
            ])
        }
    }

    @Test func renameat2NoReplaceAndExchange() throws {
        try withMount { scratch in
            try Self.expectPythonParity("SyscallParityTests/renameat2NoReplaceAndExchange", in: scratch, expected: [
                "noreplace onto existing EEXIST",
                "b'A' b'B'",
                "noreplace to new name ok",
                "exchange file and dir ok",
                "dir file b'B' ['inside', 'sub'] b'I'",
                "held fd still reads the file b'B' 1",
                "exchange across dirs ok",
                "exchange a name with itself ok",
                "exchange with missing target ENOENT",
                "b'N' b'A' b'rewritten'",
            ])
        }
    }

    @Test func fallocateModes() throws {
        try withMount { scratch in
            try Self.expectPythonParity("SyscallParityTests/fallocateModes", in: scratch, expected: [
                "b'x\\x00' 32768 131072",
                "punch without keep size ENOTSUP",
                "negative length EINVAL",
                "read-only fd EBADF",
            ])
        }
    }

    @Test func seekDataAndHoles() throws {
        try withMount { scratch in
            try Self.expectPythonParity("SyscallParityTests/seekDataAndHoles", in: scratch, expected: [
                "data from 0 0",
                "data from 3145729 ENXIO",
                "hole from 3145729 ENXIO",
                "end 5242880",
                "negative EINVAL",
                "dense hole 10000",
            ])
        }
    }

    @Test func copyFileRange() throws {
        try withMount { scratch in
            try Self.expectPythonParity("SyscallParityTests/copyFileRange", in: scratch, expected: [
                "50000 50010 50010",
                "True True",
                "with positions 300 400 50310",
                "True 50310",
                "past the end 0",
                "overlapping in one file EINVAL",
                "True 102400",
                "0 True",
                "after a listing, overlapping EINVAL",
                "after a listing 3000 6000",
                "6000",
            ])
        }
    }

    @Test func unlinkWhileOpen() throws {
        try withMount { scratch in
            try Self.expectPythonParity("SyscallParityTests/unlinkWhileOpen", in: scratch, expected: [
                "False 0 5 []",
                "b'hello world' 11 0",
                "b'hel' 3 0o100600",
                "b'hel' b'a new file under the old name'",
                "1 b=1",
                "b'linked more'",
                "create in removed dir ENOENT",
            ])
        }
    }

    /// A writer whose file has a second hard link loses the name it opened (its own unlink, or
    /// a rename over it) before it closes: its writes reach the other name, as on a plain disk,
    /// and neither bring the removed name back nor replace the file moved onto it. Whichever
    /// name the mount last saw the file by: with names cached, the kernel opens `f` without
    /// asking (the mount knows the file as `g`, its last lookup); without, it looks `f` up first.
    @Test(arguments: [[], ["--entry-timeout", "0"]])
    func savedFileLosesItsNameButNotItsOtherLink(options: [String]) throws {
        try withMount(options) { scratch in
            try Self.expectPythonParity("SyscallParityTests/savedFileLosesItsNameButNotItsOtherLink", in: scratch, expected: [
                "unlinked ['g'] b'new and more' g=1",
                "replaced ['f', 'g'] b'moved' b'new' f=1 g=1",
            ])
        }
    }

    /// A file created and not closed yet exists for its creator as on a plain disk, though the
    /// backing holds only an unnamed temp: its directory is not empty, and a rename by another
    /// process onto its name takes the name from it (its writes then go to a file with no
    /// name, and are gone at its close).
    @Test func createdFileNotClosedYetHoldsItsPlace() throws {
        try withMount { scratch in
            try Self.expectPythonParity("SyscallParityTests/createdFileNotClosedYetHoldsItsPlace", in: scratch, expected: [
                "links 1 1 1 1",
                "rmdir ENOTEMPTY",
                "rename its directory ok",
                "rename a directory over it ENOTEMPTY",
                "mv by another 0",
                "creator 0 13 b'theirs'",
                "after b'theirs' ['new']",
            ])
        }
    }

    /// A created file not closed yet moves with its creator's rename within the backing's
    /// filesystem, and not across into another one mounted inside it: EXDEV, as on a plain disk.
    @Test(.enabled(if: geteuid() == 0, "mounting a tmpfs needs root"))
    func createdFileNotClosedYetStaysOnItsFilesystem() throws {
        let scratch = try Scratch()
        for root in [scratch.backing, scratch.plain] {
            try #require(try run(["mkdir", root + "/other"]).status == 0)
            try #require(try run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", root + "/other"]).status == 0)
        }
        defer { for root in [scratch.backing, scratch.plain] { _ = try? run(["umount", "-l", root + "/other"]) } }
        try scratch.mount()
        defer { scratch.unmount() }
        try Self.expectPythonParity("SyscallParityTests/createdFileNotClosedYetStaysOnItsFilesystem", in: scratch, expected: [
            "rename into another filesystem EXDEV",
            "rename within ok",
            "['moved', 'other'] [] b'mine'",
        ])
    }

    @Test func renameWhileOpen() throws {
        try withMount { scratch in
            try Self.expectPythonParity("SyscallParityTests/renameWhileOpen", in: scratch, expected: [
                "False b'one two '",
                "b'one two three' 0o100640",
                "b'one two three' 13",
                "b'old' 0 b'newer'",
                "['c', 'log4', 'sub2', 'victim'] b'0 1 2 3 4 '",
            ])
        }
    }

    @Test func utimensatNowAndOmit() throws {
        try withMount { scratch in
            try Self.expectPythonParity("SyscallParityTests/utimensatNowAndOmit", in: scratch, snapshot: .init(times: true), expected: [
                "set 1000000000123456789 1200000000987654321",
                "mtime now 1000000000123456789 True True",
                "atime set 1300000000000000005 True",
                "atime now True True",
                "both omitted True True True",
                "symlink itself 950000000000000000 target kept True",
                "touch -m 1600000000250000000 1500000000000000001",
                "touch -a 1700000000000000000 1600000000250000000",
            ])
        }
    }

    @Test func truncateUpAndDown() throws {
        try withMount { scratch in
            try Self.expectPythonParity("SyscallParityTests/truncateUpAndDown", in: scratch, expected: [
                "reader sees b'hello\\x00\\x00\\x00'",
                "3 b'abc'",
                "b'ab\\x00Z'",
                "ftruncate read-only fd EINVAL",
                "truncate dir EISDIR",
            ])
        }
    }

    /// Emptying a file marks it modified now, even when nothing is written after: by O_TRUNC at
    /// open and by ftruncate to zero, on the first save in a directory (a temp made on the
    /// spot) and on later ones (a temp made ahead, before the open). The pause puts the making
    /// well before the open; file times are coarse (a tick).
    @Test func emptyingWithoutWritingUpdatesTimes() throws {
        try withMount { scratch in
            try Self.expectPythonParity("SyscallParityTests/emptyingWithoutWritingUpdatesTimes", in: scratch, expected: [
                "0 O_TRUNC 0 True",
                "2 O_TRUNC 0 True",
                "2 ftruncate 0 True 0 True b''",
            ])
        }
    }

    /// New files, directories and FIFOs get the permission bits creat(2) gives them on a
    /// plain disk: the caller's mode less its umask, or, in a directory with a default ACL,
    /// the ACL's instead of the umask (the kernel hands the mode over unmasked). Atomic and
    /// in-place creates alike; set-id bits kept.
    @Test func newObjectsFollowTheUmaskOrTheDefaultACL() throws {
        try withMount { scratch in
            try Self.expectPythonParity("SyscallParityTests/newObjectsFollowTheUmaskOrTheDefaultACL", in: scratch, expected: [
                "plain file=640 exclusive=4750 in-place.log=640 dir=750 fifo=640",
                "acl file=660 exclusive=4770 in-place.log=660 dir=770 fifo=660",
            ])
        }
    }

    @Test func appendFromTwoDescriptors() throws {
        try withMount { scratch in
            try Self.expectPythonParity("SyscallParityTests/appendFromTwoDescriptors", shellTail: """
                for i in $(seq 1 200); do echo "first $i" >> shared; done &
                for i in $(seq 1 200); do echo "second $i" >> shared; done &
                wait
                wc -l < shared && sort shared | md5sum && grep -c first shared
                """, in: scratch, compareTree: false, expected: [
                "b'a0 b0 a1 b1 a2 b2 end ' 22 18",
                "b'a0 b0 a1 b1 a2 b2 end P '",
                "b'XX b0after truncate'",
                "400",
                "200",
            ])
        }
    }

    /// A relative path of about 4000 bytes (19 directories of 200 bytes and a long file name):
    /// the daemon works on descriptors, so depth never makes its own paths too long.
    @Test func pathsCloseToPathMax() throws {
        try withMount { scratch in
            try Self.expectPythonParity("SyscallParityTests/pathsCloseToPathMax", in: scratch, expected: [
                "3999",
                "b'deep data' 9 0o100644 1",
                "longer than PATH_MAX ENAMETOOLONG",
                "['fff..180', 'fff..180', 'fff..180'] 9",
                "4",
                "[]",
            ])
        }
    }

    /// Known difference: O_TMPFILE needs FUSE's tmpfile operation, which libfuse 3.14's
    /// low-level API does not have, so the kernel answers EOPNOTSUPP through the mount while the
    /// plain disk makes the unnamed file. Programs that use it (systemd, some installers) fall
    /// back to named temporary files on EOPNOTSUPP. This pins both answers.
    @Test func unnamedTemporaryFilesAreNotSupported() throws {
        try withMount { scratch in
            let script = Self.python("SyscallParityTests/unnamedTemporaryFilesAreNotSupported")
            let throughMount = try shell(script, in: scratch.mountpoint)
            #expect(throughMount.output == "O_TMPFILE ENOTSUP\ndone\n", "\(throughMount)")
            let onPlain = try shell(script, in: scratch.plain)
            #expect(onPlain.output == "O_TMPFILE b'unnamed'\ndone\n", "\(onPlain)")
        }
    }

    /// Link counts are never stale: hard links seen through another name, an open descriptor,
    /// and directories' counts as subdirectories come, go and move between parents.
    @Test func linkCountsStayCurrent() throws {
        try withMount { scratch in
            try Self.expectPythonParity("SyscallParityTests/linkCountsStayCurrent", shellTail: """
                echo x > s1 && ln s1 s2 && stat -c '%h' s1 && rm s2 && stat -c '%h' s1
                mkdir -p m/a m/b && stat -c '%h' m && rmdir m/a && stat -c '%h' m && mv m/b n && stat -c '%h' m n .
                """, in: scratch, expected: [
                "a=2 b=2 2",
                "a=1 1",
                "b=2 c=2 2",
                "b=3 c=3 sub/d=3",
                "b=2 e=2 2",
                "sym=2 sym-hard=2 b=2",
            ])
        }
    }

    /// One process's seeded random walk (Scripts/SyscallParityTests/randomWalk.py): opens of
    /// every kind held across renames, exchanges, links and unlinks of their names, writes,
    /// reads, truncations and closes. The same transcript and tree as on a plain directory: the
    /// owner of every pending save sees the disk as if there were none. The seeds are walks
    /// that once differed (Docs/TESTING.md); more with COORDFS_PARITY_WALK_SEEDS=FIRST-LAST.
    @Test(arguments: Self.walkSeeds([3, 5, 8, 21, 65, 99, 220, 230, 337]))
    func aRandomWalkOfOneProcessLooksAsOnAPlainDirectory(seed: Int) throws {
        try withMount { scratch in
            try Self.expectPythonParity("SyscallParityTests/randomWalk", arguments: ["\(seed)", "800"], in: scratch, expected: [])
        }
    }

    /// The same with versions kept: the store's links never show in a file's link count.
    @Test(arguments: Self.walkSeeds([6, 16, 17]))
    func aRandomWalkWithVersionsLooksAsOnAPlainDirectory(seed: Int) throws {
        try withMount(["--versions"]) { scratch in
            try Self.expectPythonParity("SyscallParityTests/randomWalk", arguments: ["\(seed)", "800"], in: scratch, expected: [])
        }
    }

    /// The same with a second set of calls (fchmod, fallocate, copy_file_range, xattrs,
    /// utimensat, dup): 67 (xattrs set by a save's owner were not shown to it until its close),
    /// 73 and 74 (a save of a file an exchange moved committed into the file itself, losing its
    /// mode), 68, 78 and 145 (a listing by a save's owner set the kernel's size of the file
    /// back to the committed one: copy_file_range then found less to copy), 178 (a new file
    /// renamed over a committed one and then on to a third name left the committed one under
    /// the second), 167 (an appending owner was shown the backing's link count of a file that a
    /// new file not closed yet was renamed over).
    @Test(arguments: Self.walkSeeds([67, 68, 73, 74, 78, 145, 167, 178]))
    func aRandomWalkOfMoreCallsLooksAsOnAPlainDirectory(seed: Int) throws {
        try withMount { scratch in
            try Self.expectPythonParity("SyscallParityTests/randomWalk", arguments: ["\(seed)", "800", "more"], in: scratch, expected: [])
        }
    }

    /// The second set with versions kept: 17 and 178 (a file replaced by the commit of a new file
    /// renamed over it, or deleted into the store when that new file moved on, counted the store's
    /// link among its names, through a descriptor still open on it).
    @Test(arguments: Self.walkSeeds([17, 178]))
    func aRandomWalkOfMoreCallsWithVersionsLooksAsOnAPlainDirectory(seed: Int) throws {
        try withMount(["--versions"]) { scratch in
            try Self.expectPythonParity("SyscallParityTests/randomWalk", arguments: ["\(seed)", "800", "more"], in: scratch, expected: [])
        }
    }

    static func walkSeeds(_ found: [Int]) -> [Int] {
        guard let range = ProcessInfo.processInfo.environment["COORDFS_PARITY_WALK_SEEDS"] else { return found }
        let bounds = range.split(separator: "-").compactMap { Int($0) }
        return bounds.count == 2 && bounds[0] <= bounds[1] ? Array(bounds[0]...bounds[1]) : found
    }
}
