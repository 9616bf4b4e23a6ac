import Foundation
import Glibc
import Testing

/// What real programs do that simple tools do not, each found by a program's own test suite
/// (CPython's) or by how common programs use files: many threads of the daemon creating under
/// different masks, a listing by a file's creator before its close, a child's view of an
/// inherited descriptor, a database whose name says nothing, inode numbers across saves, and
/// attributes on symlinks. Parity with a plain directory, plus the values a correct filesystem
/// must show.
@Suite(.serialized) struct ProgramPatternTests {
    @Test func everyThreadTakesTheCallersUmask() throws {
        try withMount { scratch in
            try SyscallParityTests.expectPythonParity("ProgramPatternTests/everyThreadTakesTheCallersUmask", in: scratch, expected: [
                "masked [('644', 800)]",
                "unmasked [('666', 800)]",
                "masked-again [('600', 800)]",
                "unmasked-again [('640', 800)]",
            ])
        }
    }
}

extension ProgramPatternTests {
    @Test func symlinksCarryTheirOwnAttributes() throws {
        try withMount { scratch in
            try SyscallParityTests.expectPythonParity("ProgramPatternTests/symlinksCarryTheirOwnAttributes", in: scratch, expected: [
                "link set trusted ok", "link get trusted b'v1'", "link list ['trusted.coordfs-test']", "link set user EPERM",
                "link get again b'v2'", "link remove trusted ok", "link get removed ENODATA", "link remove missing ENODATA",
                "dangling set trusted ok", "dangling get trusted b'v1'", "target untouched []",
            ])
        }
    }
}

extension ProgramPatternTests {
    @Test func creatorListsItsNewFiles() throws {
        try withMount { scratch in
            try SyscallParityTests.expectPythonParity("ProgramPatternTests/creatorListsItsNewFiles", in: scratch, expected: [
                "listdir while open ['a.txt']", "scandir a.txt True True", "listdir e before []",
                "listdir e through a new descriptor ['b.txt']", "child holding the descriptor lists ['a.txt']",
                "rmtree with the file open leaves False", "after close False", "listdir e after close ['b.txt']",
                "new process lists k ['a.txt']", "ls -i agrees with stat True",
            ])
        }
    }

    @Test func childrenSeeTheirParentsOpenFiles() throws {
        try withMount { scratch in
            try SyscallParityTests.expectPythonParity("ProgramPatternTests/childrenSeeTheirParentsOpenFiles", in: scratch, expected: [
                "new file 3 b'abc'", "existing file 3 b'abc'", "temporary file 4 b'temp'",
                "child holding it opens the new file by name abc", "after close b'abc' b'abc'",
            ])
        }
    }

    @Test func databasesWithAnyName() throws {
        try withMount { scratch in
            try SyscallParityTests.expectPythonParity("ProgramPatternTests/databasesWithAnyName", in: scratch, compareTree: false, expected: [
                "second connected and wrote within 5 s True", "second sees ['first', 'second']", "first sees ['first', 'second']",
                "two connections [1, 2]", "backup [1, 2]", "wal [1, 2]", "integrity ['ok', 'ok', 'ok', 'ok']",
            ])
        }
    }

    @Test func oneInodeNumberPerFile() throws {
        try withMount { scratch in
            try SyscallParityTests.expectPythonParity("ProgramPatternTests/oneInodeNumberPerFile", in: scratch, expected: [
                "while saving True True", "/proc/locks names the file True", "after the save True", "after more saves True",
                "hard link shares it True", "no two files share a number True", "listing agrees with stat True",
            ])
        }
    }
}

extension ProgramPatternTests {
    /// README's known difference for `--writeback-cache`: `st_blocks` may lag while writes wait
    /// in the kernel, and agrees with the backing once they are flushed.
    @Test func writebackCacheBlocksCatchUpAtTheFlush() throws {
        try withMount(["--writeback-cache"]) { scratch in
            let result = try run(["python3", pythonScript("ProgramPatternTests/writebackCacheBlocksCatchUpAtTheFlush"), scratch.backing],
                                 in: scratch.mountpoint)
            #expect(result.status == 0 && result.output == "size 65536 65536\nblocks agree after the flush True True\n", "\(result)")
        }
    }
}

extension ProgramPatternTests {
    /// Issue 30's defect 5: another process found no file under a name the writer had renamed
    /// its new file over and not closed yet (the kernel's entry led to the pending file).
    @Test func aFileRenamedOverAnotherStaysFoundUntilItsClose() throws {
        try withMount { scratch in
            try SyscallParityTests.expectPythonParity("ProgramPatternTests/aFileRenamedOverAnotherStaysFoundUntilItsClose", in: scratch, expected: [
                "before the rename stat ok", "before the rename open ok",
                "renamed over, still open stat ok", "renamed over, still open open ok",
                "renamed over, asked again stat ok", "renamed over, asked again open ok",
                "after the close stat ok", "after the close open ok",
                "after the close b'new contents' 4096", "names ['data.bin']",
            ])
        }
    }
}
