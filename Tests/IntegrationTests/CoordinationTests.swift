import CoordFSCore
import Foundation
import Glibc
import Testing

/// Claims and atomic saves on real mounts, with unmodified programs: no lost update, no torn
/// read, nothing half-written after a crash, and the owner's view of its own pending save.
@Suite(.serialized) struct CoordinationTests {
    /// Runs a Python script in `directory` and returns its output, failing on a non-zero exit.
    @discardableResult
    static func python(_ script: String, in directory: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let result = try run(["python3", "-c", script], in: directory)
        #expect(result.status == 0, "\(result)", sourceLocation: sourceLocation)
        return result.output
    }

    /// Runs a Python script in `directory` that prints a line and then waits for one on its
    /// standard input: `probe` runs in between (while the script holds what it opened).
    /// Returns everything the script printed.
    static func python(_ script: String, in directory: String, pausingFor probe: () throws -> Void,
                       sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", script]
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try withChildSignalUnblocked { try process.run() }
        var printed = Data()
        while !printed.contains(0x0A) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            printed.append(chunk)
        }
        try probe()
        input.fileHandleForWriting.write(Data("\n".utf8))
        try input.fileHandleForWriting.close()
        printed.append(output.fileHandleForReading.readDataToEndOfFile())
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, sourceLocation: sourceLocation)
        return String(decoding: printed, as: UTF8.self)
    }

    /// "open O_RDWR, read the number, write number+1, close", 1,250 times in each of 8 processes.
    static let incrementer = #"""
        import os, sys
        from multiprocessing import Process
        def work():
            for _ in range(1250):
                fd = os.open('counter', os.O_RDWR)
                n = int(os.read(fd, 64) or b'0')
                os.lseek(fd, 0, os.SEEK_SET)
                os.write(fd, str(n + 1).encode())
                os.close(fd)
        with open('counter', 'w') as f: f.write('0')
        workers = [Process(target=work) for _ in range(8)]
        for w in workers: w.start()
        for w in workers: w.join()
        print(open('counter').read())
        """#

    @Test func noLostUpdates() throws {
        try withMount { scratch in
            let throughMount = try Self.python(Self.incrementer, in: scratch.mountpoint)
            #expect(throughMount.trimmingCharacters(in: .whitespacesAndNewlines) == "10000")
            // The control: the same work on the bare directory loses updates when the processes race.
            try FileManager.default.createDirectory(atPath: scratch.plain, withIntermediateDirectories: true)
            let onPlain = Int(try Self.python(Self.incrementer, in: scratch.plain).trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
            withKnownIssue("the bare directory may not race on a quiet machine", isIntermittent: true) {
                #expect(onPlain < 10000, "the bare directory lost no update this time")
            }
        }
    }

    @Test func noTornReads() throws {
        try withMount { scratch in
            let output = try Self.python(#"""
                import os
                from multiprocessing import Process, Queue
                SIZE = 16 << 20
                def writer():
                    for version in range(200):
                        with open('big', 'wb') as f:
                            chunk = bytes([version % 251 + 1]) * (1 << 20)
                            for _ in range(16): f.write(chunk)
                def reader(results):
                    reads = torn = 0
                    while not os.path.exists('done'):
                        with open('big', 'rb') as f: data = f.read()
                        reads += 1
                        if len(data) != SIZE or data.count(data[:1]) != SIZE: torn += 1
                    results.put((reads, torn))
                with open('big', 'wb') as f: f.write(b'\x01' * SIZE)
                results = Queue()
                readers = [Process(target=reader, args=(results,)) for _ in range(4)]
                for r in readers: r.start()
                w = Process(target=writer); w.start(); w.join()
                open('done', 'w').close()
                totals = [results.get() for _ in readers]
                for r in readers: r.join()
                print(sum(t[0] for t in totals), sum(t[1] for t in totals))
                """#, in: scratch.mountpoint)
            let numbers = output.split(separator: " ").compactMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            #expect(numbers.count == 2 && numbers[0] > 0, "reads: \(output)")
            #expect(numbers.count == 2 && numbers[1] == 0, "torn reads (reads, torn): \(output)")
        }
    }

    @Test func sqliteWithTwoProcesses() throws {
        try withMount { scratch in
            let result = try shell("""
                set -e
                sqlite3 app.db 'create table t(x integer)'
                insert() { for i in $(seq $1 $2); do echo "insert into t values($i);"; done | sqlite3 -cmd '.timeout 20000' app.db; }
                insert 1 1000 & insert 1001 2000 & wait
                sqlite3 app.db 'pragma integrity_check; select count(*), sum(x) from t;'
                """, in: scratch.mountpoint)
            #expect(result.output == "ok\n2000|2001000\n", "\(result)")
        }
    }

    /// kill -9 of the daemon while 8 processes save: every file is wholly one version, and what
    /// temps the crash left are moved aside at the next mount. Unnamed temps leave none (but for
    /// one caught between the link and the rename of its commit); named ones (`--named-temps`,
    /// as on a backing without unnamed files) leave the saves that were in flight.
    @Test(arguments: [[], ["--named-temps"]])
    func crashLeavesWholeVersions(options: [String]) throws {
        let scratch = try Scratch()
        try scratch.mount(options)
        let savers = Process()
        savers.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        savers.currentDirectoryURL = URL(fileURLWithPath: scratch.mountpoint)
        savers.arguments = ["-c", #"""
            import os, sys
            from multiprocessing import Process
            def save(i):
                version = 0
                while True:
                    version += 1
                    try:
                        with open('f%d' % i, 'wb') as f:
                            for _ in range(16): f.write(('%d:%d\n' % (i, version)).encode() * 4096)
                    except OSError:
                        return
            for i in range(8):
                with open('f%d' % i, 'wb') as f: f.write(('%d:0\n' % i).encode() * 4096 * 16)
            for i in range(8): Process(target=save, args=(i,)).start()
            """#]
        try savers.run()
        // Saves in flight in every file: each was saved a few times already (its first line, read
        // in the backing, says which version), so each saver is well into its loop.
        func version(of file: Int) -> Int {
            guard let handle = FileHandle(forReadingAtPath: scratch.backing + "/f\(file)"),
                  let start = try? handle.read(upToCount: 32) else { return 0 }
            try? handle.close()
            return Int(String(decoding: start, as: UTF8.self).split(separator: "\n").first?.split(separator: ":").last ?? "") ?? 0
        }
        try #require(eventually { (0..<8).allSatisfy { version(of: $0) >= 3 } }, "the savers did not get going")
        if let daemon = scratch.daemonID { kill(daemon, SIGKILL) }
        scratch.expectDaemonExit(status: SIGKILL)
        savers.waitUntilExit()
        _ = try run(["umount", "-l", scratch.mountpoint])
        // Empty ones (saves that had written nothing yet) are deleted, not recovered.
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: scratch.backing).filter {
            $0.hasPrefix(".coordfs-tmp-") && ((try? FileManager.default.attributesOfItem(atPath: scratch.backing + "/" + $0)[.size] as? Int) ?? 0) > 0
        }
        if options.contains("--named-temps") {
            #expect(!leftovers.isEmpty, "8 saves in flight leave named temps")
        } else {
            #expect(leftovers.count <= 8, "unnamed temps leave nothing but a save caught between link and rename: \(leftovers)")
        }
        try scratch.mount(options)
        defer { scratch.unmount() }
        let output = try Self.python(#"""
            import os
            for i in range(8):
                data = open('f%d' % i, 'rb').read()
                lines = set(data.splitlines())
                print(i, len(lines), len(data) % 16 == 0)
            print(sorted(n for n in os.listdir('.') if n.startswith('.coordfs')))
            """#, in: scratch.mountpoint)
        for i in 0..<8 {
            #expect(output.contains("\(i) 1 True"), "f\(i) must be wholly one version: \(output)")
        }
        #expect(output.hasSuffix("[]\n"), "no temp is visible through the mount: \(output)")
        let stillInBacking = try FileManager.default.contentsOfDirectory(atPath: scratch.backing).filter { $0.hasPrefix(".coordfs-tmp-") }
        #expect(stillInBacking.isEmpty, "leftover temps were moved aside: \(stillInBacking)")
        let recovered = (try? FileManager.default.subpathsOfDirectory(atPath: scratch.backing + "/.coordfs-recovery")) ?? []
        #expect(recovered.filter { $0.contains(".coordfs-tmp-") }.count == leftovers.count,
                "every leftover is in the recovery folder: \(leftovers) → \(recovered)")
    }

    /// A save that runs out of space fails the program's write (or close) with ENOSPC, and
    /// the committed file stays as it was; the temp is gone.
    @Test func fullDiskFailsTheSaveAndKeepsTheFile() throws {
        let scratch = try Scratch()
        let small = try run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", scratch.backing])
        try #require(small.status == 0, "\(small)")
        defer { _ = try? run(["umount", "-l", scratch.backing]) }
        try scratch.mount()
        defer { scratch.unmount() }
        let output = try Self.python(#"""
            import os, errno
            with open('f', 'wb') as f: f.write(b'committed' * 1000)
            try:
                with open('f', 'wb') as f:
                    for _ in range(64): f.write(b'x' * 65536)
                print('no error')
            except OSError as e:
                print('save failed', errno.errorcode[e.errno])
            print(open('f', 'rb').read() == b'committed' * 1000, sorted(os.listdir('.')))
            """#, in: scratch.mountpoint)
        #expect(output == "save failed ENOSPC\nTrue ['f']\n", "\(output)")
        let backing = try FileManager.default.contentsOfDirectory(atPath: scratch.backing)
        #expect(backing == ["f"], "no temp is left in the backing: \(backing)")
    }

    // MARK: Views of a pending save

    /// Saves leave nothing of coordfs's in the backing and nothing of one version in another:
    /// a reader of an old version keeps reading it across later saves, a hard link in the
    /// backing keeps the old contents, no attribute, mode or byte moves from one file to
    /// another, emptied directories can be removed and replaced, and the backing holds exactly
    /// what the mount shows, while mounted and after.
    @Test(arguments: [[], ["--named-temps"]])
    func savesLeaveNoTrace(options: [String]) throws {
        let scratch = try Scratch()
        try scratch.mount(options)
        let output: String
        do {
            defer { scratch.unmount() }
            #expect(try shell("mkdir d && echo linked > d/linked", in: scratch.mountpoint).status == 0)
            #expect(try shell("ln backing/d/linked backing/linked-in-backing", in: scratch.root).status == 0)
            output = try Self.python(#"""
                import os, stat
                os.chdir('d')
                def save(name, data):
                    with open(name, 'wb') as f: f.write(data)
                save('a', b'A' * 5000); os.setxattr('a', 'user.only-a', b'secret'); os.chmod('a', 0o640)
                save('b', b'B' * 3); os.chmod('b', 0o755)
                reader = open('a', 'rb')                      # holds the first version of a
                for i in range(20):
                    save('a', b'a%d' % i * 100)
                    save('b', b'b%d' % i)
                save('linked', b'new')
                print('reader', reader.read() == b'A' * 5000)
                print('a', open('a', 'rb').read() == b'a19' * 100, oct(os.stat('a').st_mode & 0o777), os.listxattr('a'))
                print('b', open('b', 'rb').read(), oct(os.stat('b').st_mode & 0o777), os.listxattr('b'))
                print('linked', open('linked', 'rb').read())
                print('backing', sorted(os.listdir('../../backing/d')))
                for name in ('a', 'b', 'linked'): os.unlink(name)
                os.chdir('..')
                os.rmdir('d')
                os.mkdir('e'); os.mkdir('f')
                save('e/x', b'1'); save('e/x', b'2'); os.unlink('e/x')
                os.rename('f', 'e')
                print('dirs', sorted(os.listdir('.')))
                """#, in: scratch.mountpoint)
            try expectBackingMatchesMount(scratch)
        }
        #expect(output == """
            reader True
            a True 0o640 ['user.only-a']
            b b'b19' 0o755 []
            linked b'new'
            backing ['a', 'b', 'linked']
            dirs ['e', 'linked-in-backing']

            """)
        #expect(try String(contentsOfFile: scratch.backing + "/linked-in-backing", encoding: .utf8) == "linked\n",
                "a hard link in the backing keeps the old contents")
        let left = try shell("find . -name '.coordfs-*'", in: scratch.backing)
        #expect(left.status == 0 && left.output.isEmpty, "nothing of coordfs's outlives the mount: \(left.output)")
    }

    /// Hundreds of saves of several files in several directories, mixed with creates (plain, and
    /// the "write a temp, rename it into place" pattern before and after its close), renames
    /// across directories, truncates, appends, in-place rewrites and unlinks, from two processes
    /// side by side (each with files of its own, some in a directory they share): afterwards
    /// the backing holds exactly what the mount shows, at every depth, with the named fallback too.
    @Test(arguments: [[], ["--named-temps"]])
    func aSaveHeavyLoopLeavesTheBackingAsTheMountShowsIt(options: [String]) throws {
        try withMount(options) { scratch in
            let output = try Self.python(#"""
                import os, random
                from multiprocessing import Process
                def work(seed):
                    rng = random.Random(seed)
                    dirs = ['d%d/s%d' % (seed, i) for i in range(3)] + ['shared']
                    for d in dirs: os.makedirs(d, exist_ok=True)
                    names = ['f%d-%d' % (seed, i) for i in range(4)]
                    for step in range(300):
                        d = rng.choice(dirs); path = os.path.join(d, rng.choice(names))
                        op = rng.randrange(8)
                        if op == 0:
                            with open(path, 'wb') as f: f.write(os.urandom(rng.randrange(1, 9000)))
                        elif op == 1 and os.path.exists(path):
                            with open(path, 'r+b') as f: f.seek(rng.randrange(100)); f.write(b'patched')
                        elif op == 2:
                            with open(path, 'ab') as f: f.write(b'line %d\n' % step)
                        elif op == 3:
                            tmp = path + '.tmp%d' % seed
                            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                            os.write(fd, b'atomic %d' % step)
                            if rng.random() < 0.5: os.rename(tmp, path); os.close(fd)
                            else: os.close(fd); os.replace(tmp, path)
                        elif op == 4 and os.path.exists(path):
                            os.rename(path, os.path.join(rng.choice(dirs), rng.choice(names)))
                        elif op == 5 and os.path.exists(path):
                            os.unlink(path)
                        elif op == 6 and os.path.exists(path):
                            os.truncate(path, rng.randrange(50))
                        else:
                            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                            os.write(fd, b'x' * rng.randrange(5000)); os.close(fd)
                workers = [Process(target=work, args=(seed,)) for seed in (1, 2)]
                for w in workers: w.start()
                for w in workers: w.join()
                print('exit', [w.exitcode for w in workers])
                """#, in: scratch.mountpoint)
            #expect(output == "exit [0, 0]\n", "\(output)")
            try expectBackingMatchesMount(scratch)
            let files = try rawNames(under: scratch.backing).count
            #expect(files > 10, "the loop left files to compare: \(files)")
        }
    }

    /// While a save is in flight (a handle open with uncommitted writes, of a file that exists
    /// and of one being created), the backing holds no name more than before: the temps are
    /// unnamed. The scratch backing lives in /tmp; the test checks that its filesystem has
    /// unnamed files (ext4 or tmpfs here), and shows the named fallback adding its temps.
    @Test(arguments: [[], ["--named-temps"]])
    func aSaveInFlightAddsNoNameToTheBacking(options: [String]) throws {
        try withMount(options) { scratch in
            try #require(hasUnnamedFiles(scratch.backing), "the scratch backing (\(scratch.backing)) has no unnamed files (O_TMPFILE)")
            #expect(try shell("mkdir d && echo committed > d/existing", in: scratch.mountpoint).status == 0)
            let before = try rawNames(under: scratch.backing)
            let output = try Self.python(#"""
                import os, sys
                saving = os.open('d/existing', os.O_WRONLY | os.O_TRUNC)
                os.write(saving, b'uncommitted')
                creating = os.open('d/new', os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                os.write(creating, b'not there yet')
                print('in flight', flush=True)
                sys.stdin.readline()
                os.close(saving); os.close(creating)
                print('closed')
                """#, in: scratch.mountpoint, pausingFor: {
                    let during = try rawNames(under: scratch.backing)
                    let added = during.filter { !before.contains($0) }.map { String(decoding: $0, as: UTF8.self) }
                    if options.isEmpty {
                        #expect(added.isEmpty, "names added while the saves were in flight: \(added)")
                    } else {
                        #expect(added.count == 2 && added.allSatisfy { $0.hasPrefix("d/.coordfs-tmp-") }, "\(added)")
                    }
                })
            #expect(output == "in flight\nclosed\n", "\(output)")
            #expect(try rawNames(under: scratch.backing) == (before + [Array("d/new".utf8)]).sorted { $0.lexicographicallyPrecedes($1) })
            try expectBackingMatchesMount(scratch)
        }
    }

    /// libfuse's passthrough_ll example, compiled into `directory`: a FUSE filesystem without
    /// unnamed files (libfuse 3.14 answers the kernel's O_TMPFILE with ENOSYS: EOPNOTSUPP).
    static func buildPassthrough(in directory: String) throws -> String {
        let examples = "/usr/share/doc/libfuse3-dev/examples"
        let result = try shell("""
            set -e
            for f in passthrough_ll.c passthrough_helpers.h; do
                if [ -e \(examples)/$f ]; then cp \(examples)/$f .; else zcat \(examples)/$f.gz > $f; fi
            done
            gcc -O2 -o passthrough_ll passthrough_ll.c $(pkg-config fuse3 --cflags --libs) \
                -DHAVE_UTIMENSAT -DHAVE_FALLOCATE -DHAVE_POSIX_FALLOCATE -DHAVE_SETXATTR -DHAVE_COPY_FILE_RANGE
            """, in: directory)
        try #require(result.status == 0, "\(result)")
        return directory + "/passthrough_ll"
    }

    static let canBuildPassthrough = FileManager.default.fileExists(atPath: "/usr/share/doc/libfuse3-dev/examples/passthrough_ll.c")
        || FileManager.default.fileExists(atPath: "/usr/share/doc/libfuse3-dev/examples/passthrough_ll.c.gz")

    /// A backing whose filesystem has no unnamed files (here libfuse's passthrough_ll over a
    /// folder): saves fall back to named temps by themselves, hidden from the mount while they
    /// are in flight and gone from the backing once they are committed.
    @Test(.enabled(if: canBuildPassthrough && system("command -v gcc pkg-config >/dev/null") == 0, "needs libfuse3-dev's examples and gcc"))
    func aBackingWithoutUnnamedFilesGetsNamedTemps() throws {
        let scratch = try Scratch()
        let peer = scratch.root + "/peer", lower = scratch.root + "/lower"
        for directory in [peer, lower] { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false) }
        let passthrough = Process()
        passthrough.executableURL = URL(fileURLWithPath: try Self.buildPassthrough(in: peer))
        passthrough.arguments = ["-f", "-o", "source=" + lower, scratch.backing]
        passthrough.standardOutput = FileHandle.nullDevice
        passthrough.standardError = FileHandle.nullDevice
        try passthrough.run()
        defer {
            _ = try? run(["fusermount3", "-u", scratch.backing])
            passthrough.waitUntilExit()
        }
        let deadline = Date().addingTimeInterval(15)
        while !isMounted(scratch.backing) && passthrough.isRunning && Date() < deadline { usleep(10_000) }
        try #require(isMounted(scratch.backing), "passthrough_ll did not mount")
        try #require(!hasUnnamedFiles(scratch.backing), "passthrough_ll now has unnamed files: this test shows nothing")
        try scratch.mount()
        defer { scratch.unmount() }
        #expect(try shell("mkdir d && echo committed > d/existing", in: scratch.mountpoint).status == 0)
        let output = try Self.python(#"""
            import os, sys
            saving = os.open('d/existing', os.O_WRONLY | os.O_TRUNC)
            os.write(saving, b'uncommitted')
            creating = os.open('d/new', os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(creating, b'not there yet')
            print('in flight', sorted(os.listdir('d')), os.path.exists('d/new'), flush=True)
            sys.stdin.readline()
            os.close(saving); os.close(creating)
            print('closed', sorted(os.listdir('d')), open('d/existing').read(), open('d/new').read())
            """#, in: scratch.mountpoint, pausingFor: {
                let during = try FileManager.default.contentsOfDirectory(atPath: lower + "/d")
                #expect(during.filter { $0.hasPrefix(".coordfs-tmp-") }.count == 2, "named temps while in flight: \(during)")
            })
        #expect(output == "in flight ['existing'] True\nclosed ['existing', 'new'] uncommitted not there yet\n", "\(output)")
        try expectBackingMatchesMount(scratch)
        #expect(try FileManager.default.contentsOfDirectory(atPath: lower + "/d").sorted() == ["existing", "new"])
    }

    @Test func othersSeeTheCommittedVersionUntilClose() throws {
        try withMount { scratch in
            let output = try Self.python(#"""
                import os, subprocess
                def other(*args): return subprocess.run(args, capture_output=True, text=True).stdout.strip() or 'missing'
                with open('f', 'w') as f: f.write('old')
                fd = os.open('f', os.O_WRONLY | os.O_TRUNC)
                os.write(fd, b'new and longer')
                print('owner', os.fstat(fd).st_size, open('f').read(), os.stat('f').st_size)
                print('other', other('cat', 'f'), other('stat', '-c', '%s', 'f'))
                os.close(fd)
                print('after', other('cat', 'f'), other('stat', '-c', '%s', 'f'))
                fd = os.open('new', os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                os.write(fd, b'fresh')
                print('created', os.path.exists('new'), 'new' in os.listdir('.') or 'unlisted', other('cat', 'new'))
                os.rename('new', 'final')
                print('renamed', open('final').read(), other('cat', 'final'))
                os.close(fd)
                print('closed', other('cat', 'final'), sorted(os.listdir('.')))
                """#, in: scratch.mountpoint)
            #expect(output == """
                owner 14 new and longer 14
                other old 3
                after new and longer 14
                created True unlisted missing
                renamed fresh missing
                closed fresh ['f', 'final']

                """, "\(output)")
        }
    }

    /// A reader that mapped the file keeps reading the committed version while another
    /// process saves it with O_TRUNC. The kernel keeps one size per inode: were the truncation
    /// passed inside the open (FUSE's atomic O_TRUNC), it would drop that size to 0 for every
    /// reader and the mapped one would die of SIGBUS.
    @Test func mappedReadersSurviveATruncatingSave() throws {
        try withMount { scratch in
            let output = try Self.python(#"""
                import os, subprocess, sys
                with open('f', 'wb') as f: f.write(b'A' * 8192)
                reader = subprocess.Popen([sys.executable, '-c', '''
                import mmap, sys
                f = open('f', 'rb'); m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
                for line in sys.stdin:
                    print(line.strip(), m[0:1].decode(), m[5000:5001].decode(), flush=True)
                '''.replace('\n                ', '\n')], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                def ask(step):
                    reader.stdin.write(step + '\n'); reader.stdin.flush()
                    print(reader.stdout.readline().strip() or f'{step} reader died')
                ask('mapped')
                fd = os.open('f', os.O_WRONLY | os.O_TRUNC)
                ask('truncated')
                os.write(fd, b'B' * 10)
                os.fstat(fd)
                ask('written')
                os.close(fd)
                reader.stdin.close()
                print('reader', reader.wait(), open('f').read())
                """#, in: scratch.mountpoint)
            #expect(output == """
                mapped A A
                truncated A A
                written A A
                reader 0 BBBBBBBBBB

                """, "\(output)")
        }
    }

    /// Pages the kernel cached of one version never serve the next. A reader that maps the
    /// file while a save is pending reads the committed version into the kernel's page cache
    /// (a private mapping of a handle that bypasses the cache still fills it); once the save
    /// commits, a new mapping must show the new contents, and a mapping reads the page cache
    /// without asking for attributes first, so only the commit's invalidation stands between
    /// it and the old pages. A file nobody read needs no invalidation, and maps the new
    /// contents too.
    @Test func cachedPagesNeverOutliveACommit() throws {
        try withMount { scratch in
            let output = try Self.python(#"""
                import ctypes, mmap, os, subprocess, sys
                from coordtest import wait_until_released
                libc = ctypes.CDLL(None, use_errno=True)
                libc.mmap.restype = ctypes.c_void_p
                libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
                libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
                def mapped(name):
                    # The distinct 4-byte words a private mapping shows. Through libc, with no stat on
                    # the way (Python's open and mmap make one): a stat refreshes the attributes, and
                    # the kernel drops the pages by itself when it sees a new modification time.
                    fd = os.open(name, os.O_RDONLY)
                    address = libc.mmap(None, 4096, mmap.PROT_READ, mmap.MAP_PRIVATE, fd, 0)
                    data = ctypes.string_at(address, 4096)
                    libc.munmap(address, 4096)
                    os.close(fd)
                    return ' '.join(sorted({data[i:i + 4].decode() for i in range(0, 4096, 4)}))
                for name in ('read', 'unread'):
                    with open(name, 'wb') as f: f.write(b'old!' * 1024)
                for round in range(3):
                    for name in ('read', 'unread'):
                        writer = subprocess.Popen([sys.executable, '-c', f"import os, sys; fd = os.open({name!r}, os.O_WRONLY | os.O_TRUNC); os.write(fd, b'new{round}' * 1024); print(flush=True); sys.stdin.readline(); os.close(fd)"],
                                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                        writer.stdout.readline()
                        during = mapped(name) if name == 'read' else '-'
                        writer.stdin.write('\n'); writer.stdin.flush(); writer.wait()
                        wait_until_released('/' + name) # the kernel sends the writer's release after its exit, unwaited
                        print(round, name, during, mapped(name))
                """#, in: scratch.mountpoint)
            #expect(output == """
                0 read old! new0
                0 unread - new0
                1 read new0 new1
                1 unread - new1
                2 read new1 new2
                2 unread - new2

                """, "\(output)")
        }
    }

    @Test func locksHoldAcrossCommits() throws {
        try withMount { scratch in
            let result = try shell("""
                echo one > f
                exec 9<f; flock -x 9
                echo two > f
                flock -n f -c true && echo 'lock lost' || echo 'still locked'
                cat f
                exec 9<&-
                flock -n f -c true && echo 'free after unlock'
                """, in: scratch.mountpoint)
            #expect(result.output == "still locked\ntwo\nfree after unlock\n", "\(result)")
        }
    }

    // MARK: Waiting for claims

    @Test func conflictingWritersWaitTimeOutOrFailAtOnce() throws {
        try withMount(["--claim-timeout", "1"]) { scratch in
            let output = try Self.python(#"""
                import os, errno, subprocess, time, signal
                from coordtest import wait_until_released, wait_until_waiting
                with open('f', 'w') as f: f.write('x')
                holder = subprocess.Popen(['python3', '-c', "import os, sys; fd=os.open('f', os.O_WRONLY); print('held', flush=True); sys.stdin.readline()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
                holder.stdout.readline()
                try: os.open('f', os.O_WRONLY | os.O_NONBLOCK); print('nonblock opened')
                except OSError as e: print('nonblock', errno.errorcode[e.errno])
                start = time.monotonic()
                try: os.open('f', os.O_WRONLY); print('opened')
                except OSError as e: print('timeout', errno.errorcode[e.errno], round(time.monotonic() - start))
                print('reader', open('f').read())
                waiter = subprocess.Popen(['python3', '-c', "import os, signal; signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT]); signal.signal(signal.SIGINT, signal.default_int_handler); print('waiting', flush=True); os.open('f', os.O_WRONLY)"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                waiter.stdout.readline(); wait_until_waiting('/f', pid=waiter.pid)
                start = time.monotonic(); waiter.send_signal(signal.SIGINT); _, errors = waiter.communicate()
                print('interrupted', b'KeyboardInterrupt' in errors, time.monotonic() - start < 0.6)
                holder.communicate(b'\n'); wait_until_released('/f')
                fd = os.open('f', os.O_WRONLY); os.close(fd); print('free')
                """#, in: scratch.mountpoint)
            #expect(output == "nonblock EAGAIN\ntimeout EBUSY 1\nreader x\ninterrupted True True\nfree\n", "\(output)")
        }
    }

    /// Waiting requests hold no daemon thread: with 1,000 opens waiting for one writer, the
    /// mount still answers everyone else, and the writer's close lets them all through.
    @Test func aThousandWaitingOpensDoNotStallTheMount() throws {
        try withMount { scratch in
            let result = try shell("""
                echo 0 > f && echo free > other
                exec 3>>f
                for i in $(seq 1 1000); do (exec 3>&-; exec 4>>f; echo x >&4) & done
                python3 -m coordtest waiting /f 1000 3>&-
                cat other && stat -c %s f && ls | wc -l && echo more > another && cat another
                exec 3>&-
                wait
                wc -l < f
                """, in: scratch.mountpoint)
            #expect(result.output == "free\n2\n2\nmore\n1001\n", "\(result)")
        }
    }

    @Test func strictReadsMakeWritersWait() throws {
        try withMount(["--strict-reads", "--claim-timeout", "1"]) { scratch in
            let output = try Self.python(#"""
                import os, errno, subprocess
                from coordtest import wait_until_released
                with open('f', 'w') as f: f.write('x')
                reader = subprocess.Popen(['python3', '-c', "import sys; f=open('f'); print('reading', flush=True); sys.stdin.readline()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
                reader.stdout.readline()
                try: os.open('f', os.O_WRONLY | os.O_NONBLOCK); print('writer opened')
                except OSError as e: print('writer', errno.errorcode[e.errno])
                print('second reader', open('f').read())
                reader.communicate(b'\n'); wait_until_released('/f')
                os.close(os.open('f', os.O_WRONLY)); print('writer after reader')
                """#, in: scratch.mountpoint)
            #expect(output == "writer EAGAIN\nsecond reader x\nwriter after reader\n", "\(output)")
        }
    }
}
