import Foundation
import Glibc
import Testing

/// Shared mappings (mmap MAP_SHARED) on real mounts: of a file being saved, of a file another
/// process saves, of in-place files. A save's handles, and readers' that opened during a save,
/// bypass the page cache (direct I/O), which the kernel maps shared only because the mount
/// asks for FUSE_DIRECT_IO_ALLOW_MMAP (Sources/CFuse/cfuse.c); before that, such mappings
/// failed with ENODEV.
@Suite(.serialized) struct MappingTests {
    /// fio's mmap engine writes the file through a shared mapping and checks every block, then
    /// a second run opens it again and checks it once more: on the mount as on a plain directory.
    @Test func fioWritesThroughAMappingAndVerifies() throws {
        try withMount { scratch in
            for directory in [scratch.mountpoint, scratch.plain] {
                let common = ["fio", "--name=mapped", "--ioengine=mmap", "--rw=write", "--bs=4k", "--size=8m",
                              "--verify=crc32c", "--filename=data"]
                let written = try run(common, in: directory)
                #expect(written.status == 0, "fio write and verify in \(directory): \(written)")
                let verified = try run(common + ["--verify_only"], in: directory)
                #expect(verified.status == 0, "fio verify after reopening in \(directory): \(verified)")
                #expect(verified.output.contains("err= 0"), "\(verified)")
                var status = stat()
                #expect(stat(directory + "/data", &status) == 0 && status.st_size == 8 << 20)
            }
        }
    }

    /// A mapping shared across fork: each process sees the other's writes at once, and the close
    /// commits exactly what they wrote. Pages written back from a mapping of an O_APPEND handle
    /// land where they were mapped, not at the end.
    @Test func processesSharingAWritableMappingSeeEachOther() throws {
        try withMount { scratch in
            try SyscallParityTests.expectPythonParity("MappingTests/processesSharingAWritableMappingSeeEachOther", in: scratch, expected: [
                    "parent sees b'child' b'CHILD'",
                    "child sees b'parent'",
                    "committed 8192 b'child' b'parent' b'CHILD' 8176",
                    "appended 8195 b'aaMAPDaa' b'aaend'",
                ])
        }
    }

    /// An in-place file (a `*.db` name) mapped by two independent processes: what one writes
    /// through its mapping, the other sees through its own, and a third reads it with read(2).
    @Test func independentProcessesShareAMappedInPlaceFile() throws {
        try withMount { scratch in
            try SyscallParityTests.expectPythonParity("MappingTests/independentProcessesShareAMappedInPlaceFile", in: scratch, expected: [
                    "B sees b'\\x00\\x00\\x00\\x00\\x00\\x00'",
                    "A sees b'from B'",
                    "C reads b'from A'",
                    "after b'from A' b'from B'",
                ])
        }
    }

    /// A reader maps a file shared and keeps the mapping while other processes save it, shorter
    /// and then longer: the mapping keeps working (no SIGBUS) and shows the version the reader
    /// opened, whole, as its read(2) would. A reader that opens the newer version meanwhile
    /// maps the older one (the kernel keeps one page cache per file, and the older reader's
    /// version holds it) until the older reader closes. A reader that opened while a save was
    /// pending (its handle bypasses the page cache, which the kernel refused to map shared
    /// before) keeps its version across that save's commit too. A stat after a save that made
    /// the file shorter cuts an older reader's mapping at the new size (a known difference).
    @Test func readOnlyMappingsSurviveOtherProcessesSaves() throws {
        try withMount { scratch in
            let output = try CoordinationTests.python("MappingTests/readOnlyMappingsSurviveOtherProcessesSaves", in: scratch.mountpoint)
            #expect(output == """
                map A 8192
                shorter A 8192
                longer A 8192
                others read {67} 16384
                late map peek A 16384
                late alone stat C 16384
                during map C 16384
                during committed C 16384
                others read {68} 8192
                map D 8192
                shorter D 8192
                stat: the reader died (-7)

                """, "\(output)")
        }
    }

    /// The owner of a save grows its file with ftruncate, maps it shared (through libc: no stat
    /// on the way, as a C program does it) and writes through the mapping. Until the commit,
    /// others read the committed version; the kernel keeps one size and one page cache per file,
    /// so while the owner's mapping holds them others' stat shows the save's size, and their
    /// mappings its pages. After the close others see exactly what the mapping wrote; a program
    /// that closes before it unmaps commits at the munmap.
    @Test func aWritersMappingCommitsAtItsClose() throws {
        try withMount { scratch in
            let output = try CoordinationTests.python("MappingTests/aWritersMappingCommitsAtItsClose", in: scratch.mountpoint)
            #expect(output == """
                mapped True
                msync 0
                others read True
                others stat 12288
                others map map !enw 12288
                owner sees b'new!'
                after close True 12288
                before munmap b'new!'
                after munmap b'lastnew!' 12288
                ['f']

                """, "\(output)")
        }
    }
}
