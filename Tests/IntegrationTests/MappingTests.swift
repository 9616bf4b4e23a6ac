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
            try SyscallParityTests.expectPythonParity(#"""
                import mmap
                write('f', b'.' * 8192)
                fd = os.open('f', os.O_RDWR)
                m = mmap.mmap(fd, 8192, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
                ready, go = os.pipe()
                done, finished = os.pipe()
                pid = os.fork()
                if pid == 0:
                    m[0:5] = b'child'; m[5000:5005] = b'CHILD'
                    os.write(go, b'x')
                    os.read(done, 1)
                    print('child sees', m[100:106])
                    os._exit(0)
                os.read(ready, 1)
                print('parent sees', m[0:5], m[5000:5005])
                m[100:106] = b'parent'
                os.write(finished, b'x')
                os.waitpid(pid, 0)
                m.flush(); m.close(); os.close(fd)
                data = content('f')
                print('committed', len(data), data[0:5], data[100:106], data[5000:5005], data.count(b'.'))
                fd = os.open('appended', os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
                os.write(fd, b'a' * 8192)
                m = mmap.mmap(fd, 8192, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
                m[10:14] = b'MAPD'; m.flush(); m.close()
                os.write(fd, b'end'); os.close(fd)
                data = content('appended')
                print('appended', len(data), data[8:16], data[-5:])
                """#, in: scratch, expected: [
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

    /// A process that helps the scripts below: it opens a file for reading and maps it shared
    /// whole when told `map...`; for each line it prints the line, the distinct bytes its
    /// mapping shows (a torn view shows two letters; SIGBUS ends it), or of its first page only
    /// for `...peek`, and the mapping's length. For `...stat` it stats its handle first: the
    /// kernel keeps one size per file, which every stat sets (mmap itself stats the file).
    static let mappedReader = #"""
        import mmap, os, subprocess, sys
        from coordtest import wait_until, wait_until_released
        def start_reader(name):
            code = '\n'.join([
                'import mmap, os, sys',
                'fd = os.open(sys.argv[1], os.O_RDONLY); m = None',
                'for line in sys.stdin:',
                '    if "stat" in line: os.fstat(fd)',
                '    if line.startswith("map"): m = mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ)',
                '    data = bytes(m[:4096] if line.strip().endswith("peek") else m)',
                '    print(line.strip(), bytes(sorted(set(data))).decode(), len(m), flush=True)',
            ])
            return subprocess.Popen([sys.executable, '-c', code, name], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        def ask(reader, step):
            reader.stdin.write(step + '\n'); reader.stdin.flush()
            return reader.stdout.readline().strip() or f'{step}: the reader died ({reader.wait()})'
        def save(name, data):
            # Another process saves the file; its close commits before run() returns.
            subprocess.run([sys.executable, '-c', f'f = open({name!r}, "wb"); f.write({data!r}); f.close()'], check=True)
            wait_until_released('/' + name) # its release comes after its exit: the commit and its invalidation of the kernel's pages are done by then
        def shows(line, letters):
            return line if line.split()[-2] == letters else None
        def cat(name):
            return subprocess.run(['cat', name], capture_output=True).stdout

        """#

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
            let output = try CoordinationTests.python(Self.mappedReader + #"""
                with open('f', 'wb') as f: f.write(b'A' * 8192)
                reader = start_reader('f')
                print(ask(reader, 'map'))
                save('f', b'B' * 4096)
                print(ask(reader, 'shorter'))
                save('f', b'C' * 16384)
                print(ask(reader, 'longer'))
                print('others read', set(cat('f')), len(cat('f')))
                late = start_reader('f')
                print('late', ask(late, 'map peek'))
                reader.stdin.close(); reader.wait()
                # The last older reader's release (the kernel sends it after its exit) drops the kernel's pages.
                print('late', wait_until("the older reader's release", lambda: shows(ask(late, 'alone stat'), 'C')))
                late.stdin.close(); late.wait()
                # A reader opened while a save is pending maps the file.
                writer = subprocess.Popen([sys.executable, '-c', "import os, sys; fd = os.open('f', os.O_WRONLY | os.O_TRUNC); os.write(fd, b'D' * 8192); print(flush=True); sys.stdin.readline(); os.close(fd)"],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                writer.stdout.readline()
                during = start_reader('f')
                print('during', ask(during, 'map'))
                writer.stdin.write('\n'); writer.stdin.flush(); writer.wait()
                wait_until_released('/f')
                print('during', ask(during, 'committed'))
                during.stdin.close(); during.wait()
                print('others read', set(cat('f')), len(cat('f')))
                # The kernel keeps one size per file, which a stat sets: after a save that made the
                # file shorter, a stat cuts an older reader's mapping there.
                reader = start_reader('f')
                print(ask(reader, 'map'))
                save('f', b'E' * 4096)
                print(ask(reader, 'shorter'))
                subprocess.run(['stat', 'f'], capture_output=True)
                print(ask(reader, 'stat'))
                """#, in: scratch.mountpoint)
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
            let output = try CoordinationTests.python(Self.mappedReader + #"""
                import ctypes
                libc = ctypes.CDLL(None, use_errno=True)
                libc.mmap.restype = ctypes.c_void_p
                libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
                libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
                libc.msync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
                SIZE = 3 * 4096
                with open('f', 'wb') as f: f.write(b'old!' * 1024)
                fd = os.open('f', os.O_RDWR)
                os.ftruncate(fd, SIZE)
                address = libc.mmap(None, SIZE, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
                print('mapped', address not in (None, ctypes.c_void_p(-1).value))
                ctypes.memmove(address, b'new!' * (SIZE // 4), SIZE)
                print('msync', libc.msync(address, SIZE, 4)) # MS_SYNC
                print('others read', cat('f') == b'old!' * 1024)
                print('others stat', subprocess.run(['stat', '-c', '%s', 'f'], capture_output=True, text=True).stdout.strip())
                other = start_reader('f')
                print('others map', ask(other, 'map'))
                other.stdin.close(); other.wait()
                print('owner sees', ctypes.string_at(address + SIZE - 4, 4))
                libc.munmap(address, SIZE)
                os.close(fd)
                print('after close', cat('f') == b'new!' * (SIZE // 4), len(cat('f')))
                # Closed before unmapped: the writes after the close commit at the munmap.
                fd = os.open('f', os.O_RDWR)
                m = mmap.mmap(fd, SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
                os.close(fd)
                m[0:4] = b'last'
                print('before munmap', cat('f')[0:4])
                m.close()
                wait_until_released('/f') # the release comes after the munmap returned
                print('after munmap', cat('f')[0:8], len(cat('f')))
                print(sorted(name for name in os.listdir('.')))
                """#, in: scratch.mountpoint)
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
