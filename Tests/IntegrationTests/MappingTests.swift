import Foundation
import Glibc
import Testing

/// Shared mappings (mmap MAP_SHARED) on real mounts. A save's handles bypass the page cache
/// (direct I/O), which the kernel maps shared only because the mount asks for
/// FUSE_DIRECT_IO_ALLOW_MMAP (Sources/CFuse/cfuse.c); before that, fio's mmap engine failed
/// with ENODEV.
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

    /// An in-place file (a `*.db` name) mapped by two independent processes: what one writes
    /// through its mapping, the other sees through its own, and a third reads it with read(2).
    @Test func independentProcessesShareAMappedInPlaceFile() throws {
        try withMount { scratch in
            try SyscallParityTests.expectPythonParity(#"""
                import mmap
                write('shared.db', b'\0' * 8192)
                fd = os.open('shared.db', os.O_RDWR)
                m = mmap.mmap(fd, 8192, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
                other = subprocess.run([sys.executable, '-c', '''
                import mmap, os
                fd = os.open('shared.db', os.O_RDWR)
                m = mmap.mmap(fd, 8192, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
                m[4096:4102] = b'from B'
                print('B sees', m[0:6])
                m.close(); os.close(fd)
                '''.replace('\n                ', '\n')], capture_output=True, text=True)
                print(other.stdout.strip() + other.stderr.strip())
                print('A sees', m[4096:4102])
                m[0:6] = b'from A'
                reader = subprocess.run(['dd', 'if=shared.db', 'bs=6', 'count=1', 'status=none'], capture_output=True)
                print('C reads', reader.stdout)
                m.close(); os.close(fd)
                print('after', content('shared.db')[0:6], content('shared.db')[4096:4102])
                """#, in: scratch, expected: [
                    "B sees b'\\x00\\x00\\x00\\x00\\x00\\x00'",
                    "A sees b'from B'",
                    "C reads b'from A'",
                    "after b'from A' b'from B'",
                ])
        }
    }
}
