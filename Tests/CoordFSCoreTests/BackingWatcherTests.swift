import Foundation
import Glibc
import Synchronization
import SystemPackage
import Testing
@testable import CoordFSCore

/// The watch of a scratch backing directory, with fanotify and with inotify: each kind of
/// change made by a child process (the shell) is reported, in order, once; the watcher's own
/// process and the mount's staging names are not. Serialized: the overflow test makes tens of
/// thousands of files, and the descriptor counts of /proc/self/fdinfo want one watch at a time.
@Suite(.serialized) struct BackingWatcherTests {
    /// What a watcher reported, for the test to wait on.
    final class Recorder: Sendable {
        let changes = Mutex<[ObservedChange]>([])

        var all: [ObservedChange] { changes.withLock { $0 } }
        var count: Int { changes.withLock { $0.count } }

        func record(_ batch: [ObservedChange]) {
            changes.withLock { $0 += batch }
        }

        /// Waits (up to 10 s) until a change after `start` satisfies `condition`; returns its index.
        @discardableResult
        func wait(from start: Int = 0, _ description: String = "",
                  until condition: (ObservedChange) -> Bool) -> Int? {
            let deadline = ContinuousClock.now + .seconds(10)
            while ContinuousClock.now < deadline {
                let found = changes.withLock { list in
                    list.indices.dropFirst(start).first { condition(list[$0]) }
                }
                if let found { return found }
                usleep(2_000)
            }
            Issue.record("no change \(description) after \(start) within 10 s; got \(all.map(\.change))")
            return nil
        }

        @discardableResult
        func wait(from start: Int = 0, for change: BackingChange) -> Int? {
            wait(from: start, "\(change)") { $0.change == change }
        }
    }

    /// A watcher of a fresh scratch directory, and what it reports.
    struct Watched {
        let scratch: ScratchDirectory
        let recorder = Recorder()
        let watcher: BackingWatcher
        let ownChanges: OwnChanges

        init(_ method: WatchMethod, label: String = "watch", prepare: (ScratchDirectory) -> Void = { _ in }) throws {
            scratch = try ScratchDirectory(label)
            prepare(scratch)
            ownChanges = OwnChanges(enabled: method == .inotify)
            let recorder = self.recorder
            watcher = try BackingWatcher.start(root: scratch.path, method: method, ownChanges: ownChanges) { recorder.record($0) }
            #expect(watcher.method == method)
        }

        /// Runs `command` in the directory (a child process), then waits for `expected`
        /// among the changes reported since.
        @discardableResult
        func step(_ command: String, expect expected: BackingChange...) -> Bool {
            var start = recorder.count
            #expect(scratch.shell(command), "\(command)")
            for change in expected {
                guard let index = recorder.wait(from: start, for: change) else { return false }
                start = index + 1
            }
            return true
        }

        /// Makes a marker file from a child and waits for it: every change made before has
        /// been read by then, the kernel keeping its order.
        func settle(_ marker: String = "marker") {
            step(": > \(marker)", expect: .created(path(marker), isDirectory: false))
        }

        func stop() { watcher.stop() }
    }

    static func path(_ text: String) -> MountPath { MountPath(text)! }
    func path(_ text: String) -> MountPath { MountPath(text)! }

    @Test(arguments: WatchMethod.allCases)
    func fileChangesAreReported(method: WatchMethod) throws {
        guard isRoot || method == .inotify else { return }
        let watched = try Watched(method)
        defer { watched.stop() }
        let f = path("f")
        watched.step("echo one > f", expect: .created(f, isDirectory: false), .contentsChanged(f))
        watched.step("echo two >> f", expect: .contentsChanged(f))
        watched.step("truncate -s 1 f", expect: .contentsChanged(f))
        watched.step("chmod 600 f", expect: .attributesChanged(f, isDirectory: false))
        watched.step("setfattr -n user.x -v 1 f", expect: .attributesChanged(f, isDirectory: false))
        watched.step("ln f g", expect: .created(path("g"), isDirectory: false))
        watched.step("rm g", expect: .deleted(path("g"), isDirectory: false))
        watched.step("touch -d 2001-01-01 f", expect: .attributesChanged(f, isDirectory: false))
        watched.step("chown 1:1 f", expect: .attributesChanged(f, isDirectory: false))
        watched.step("chmod 700 .", expect: .attributesChanged(.root, isDirectory: true))
    }

    @Test(arguments: WatchMethod.allCases)
    func movesArePaired(method: WatchMethod) throws {
        guard isRoot || method == .inotify else { return }
        let watched = try Watched(method) { $0.shell("mkdir d && : > f && : > h") }
        defer { watched.stop() }
        watched.step("mv f g", expect: .moved(from: path("f"), to: path("g"), isDirectory: false))
        watched.step("mv g d/g", expect: .moved(from: path("g"), to: path("d/g"), isDirectory: false))
        watched.step("mv d/g h", expect: .moved(from: path("d/g"), to: path("h"), isDirectory: false))
        watched.settle()
        let moves = watched.recorder.all.filter { if case .moved = $0.change { true } else { false } }
        #expect(moves.count == 3, "each move once, as a pair: \(moves)")
        #expect(!watched.recorder.all.contains { $0.change == .deleted(path("h"), isDirectory: false) },
                "a rename over a file is one move, not a deletion too")
    }

    @Test(arguments: WatchMethod.allCases)
    func directoriesAreFollowed(method: WatchMethod) throws {
        guard isRoot || method == .inotify else { return }
        let watched = try Watched(method) { $0.shell("mkdir -p old/inner") }
        defer { watched.stop() }
        #expect(watched.watcher.watchedDirectories == 3)
        watched.step("mkdir d", expect: .created(path("d"), isDirectory: true))
        watched.step("chmod 700 d", expect: .attributesChanged(path("d"), isDirectory: true))
        watched.step(": > d/x", expect: .created(path("d/x"), isDirectory: false))
        watched.step("rm d/x && rmdir d", expect: .deleted(path("d/x"), isDirectory: false), .deleted(path("d"), isDirectory: true))
        watched.step("mv old new", expect: .moved(from: path("old"), to: path("new"), isDirectory: true))
        watched.step(": > new/inner/y", expect: .created(path("new/inner/y"), isDirectory: false))
        watched.step("mv new/inner new/renamed && : > new/renamed/z",
                     expect: .moved(from: path("new/inner"), to: path("new/renamed"), isDirectory: true),
                     .created(path("new/renamed/z"), isDirectory: false))
        watched.settle()
        #expect(watched.watcher.watchedDirectories == 3, "old and inner under their new names, d gone")
        #expect(Self.kernelWatches(method) == 3)
        let attributes = watched.recorder.all.filter { $0.change == .attributesChanged(path("d"), isDirectory: true) }
        #expect(attributes.count == 1, "a directory's own change once, though it and its parent are both watched")
    }

    /// Two directories trade places (renameat2 RENAME_EXCHANGE): two moves, and each keeps its
    /// watch under its new name. fanotify names the moved directory; inotify's names alone
    /// cannot tell the two apart (a known limit of that path).
    @Test func exchangedDirectoriesAreFollowed() throws {
        guard isRoot else { return }
        let watched = try Watched(.fanotify) { $0.shell("mkdir -p x/inner y") }
        defer { watched.stop() }
        let exchange = "import ctypes; libc = ctypes.CDLL(None, use_errno=True); exit(libc.renameat2(-100, b'x', -100, b'y', 2))"
        watched.step("python3 -c \"\(exchange)\"", expect: .moved(from: path("x"), to: path("y"), isDirectory: true),
                     .moved(from: path("y"), to: path("x"), isDirectory: true))
        watched.step(": > y/inner/a && : > x/b", expect: .created(path("y/inner/a"), isDirectory: false),
                     .created(path("x/b"), isDirectory: false))
        #expect(watched.watcher.watchedDirectories == 4)
        #expect(Self.kernelWatches(.fanotify) == 4)
    }

    @Test(arguments: WatchMethod.allCases)
    func aNewTreeLosesNothing(method: WatchMethod) throws {
        guard isRoot || method == .inotify else { return }
        let watched = try Watched(method)
        defer { watched.stop() }
        let expected: [BackingChange] = [
            .created(path("a"), isDirectory: true), .created(path("a/b"), isDirectory: true),
            .created(path("a/b/c"), isDirectory: true), .created(path("a/b/c/f"), isDirectory: false),
        ]
        #expect(watched.scratch.shell("mkdir -p a/b/c && echo data > a/b/c/f"))
        for change in expected { watched.recorder.wait(for: change) }
        watched.settle()
        let all = watched.recorder.all.map(\.change)
        for change in expected {
            #expect(all.filter { $0 == change }.count == 1, "\(change) once: \(all)")
        }
        #expect(all.firstIndex(of: expected[0])! < all.firstIndex(of: expected[3])!, "a parent before what it holds")
        watched.step(": > a/b/c/g", expect: .created(path("a/b/c/g"), isDirectory: false))
        #expect(watched.watcher.watchedDirectories == 4)
        watched.step("rm a/b/c/f && : > a/b/c/f", expect: .deleted(path("a/b/c/f"), isDirectory: false), expected[3])
    }

    @Test func fanotifyWherePermitted() throws {
        let scratch = try ScratchDirectory("watch-auto")
        let watcher = try BackingWatcher.start(root: scratch.path, method: nil, ownChanges: OwnChanges(enabled: false)) { _ in }
        defer { watcher.stop() }
        #expect(watcher.method == (isRoot ? .fanotify : .inotify))
        #expect(watcher.watchedDirectories == 1)
    }

    @Test(arguments: WatchMethod.allCases)
    func aMissingRootIsAFailure(method: WatchMethod) throws {
        guard isRoot || method == .inotify else { return }
        #expect(throws: WatchFailure.self) {
            try BackingWatcher.start(root: "/nonexistent/coordfs-watch", method: method, ownChanges: OwnChanges(enabled: false)) { _ in }
        }
    }

    @Test(arguments: WatchMethod.allCases)
    func movesAcrossTheRootAreCreationsAndDeletions(method: WatchMethod) throws {
        guard isRoot || method == .inotify else { return }
        let outside = try ScratchDirectory("watch-outside")
        #expect(outside.shell(": > f && mkdir d"))
        let watched = try Watched(method)
        defer { watched.stop() }
        watched.step("mv '\(outside.path)/f' f", expect: .created(path("f"), isDirectory: false))
        watched.step("mv f '\(outside.path)/g'", expect: .deleted(path("f"), isDirectory: false))
        watched.step("mv '\(outside.path)/d' d", expect: .created(path("d"), isDirectory: true))
        watched.step(": > d/x", expect: .created(path("d/x"), isDirectory: false))
        #expect(Self.kernelWatches(method) == 2)
        watched.step("mv d '\(outside.path)/e'", expect: .deleted(path("d"), isDirectory: true))
        #expect(outside.shell(": > e/later"))
        watched.settle()
        #expect(!watched.recorder.all.contains { $0.change.paths.contains(path("d/later")) || $0.change.paths.contains(path("later")) },
                "a directory moved out is no longer followed")
        #expect(watched.watcher.watchedDirectories == 1)
        #expect(Self.kernelWatches(method) == 1, "the kernel watches the root alone again")
    }

    /// How many directories this process has the kernel watch with `method`, from the
    /// descriptors' /proc/self/fdinfo ("inotify wd:" and "fanotify ino:" lines, one per watch).
    static func kernelWatches(_ method: WatchMethod) -> Int {
        let prefix = method == .inotify ? "inotify wd:" : "fanotify ino:"
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fdinfo")) ?? []
        return entries.reduce(0) { count, entry in
            let text = (try? String(contentsOfFile: "/proc/self/fdinfo/\(entry)", encoding: .utf8)) ?? ""
            return count + text.split(separator: "\n").filter { $0.hasPrefix(prefix) }.count
        }
    }

    @Test(arguments: WatchMethod.allCases)
    func reservedNamesAreNeverReported(method: WatchMethod) throws {
        guard isRoot || method == .inotify else { return }
        let watched = try Watched(method)
        defer { watched.stop() }
        let temp = "\(StagingName.make())"
        #expect(watched.scratch.shell("mkdir sub && echo x > \(temp) && mv \(temp) saved && echo y > sub/\(temp) && mv sub/\(temp) sub/saved"))
        #expect(watched.scratch.shell("mkdir .coordfs-recovery && : > .coordfs-recovery/left && mv saved \(temp)"))
        watched.settle()
        let reported = watched.recorder.all.flatMap(\.change.paths)
        #expect(reported.allSatisfy { !$0.description.contains(".coordfs") }, "\(reported)")
        #expect(!reported.contains(path("saved")) && !reported.contains(path("sub/saved")), "a commit of a staged file is the mount's own: \(reported)")
        #expect(reported.contains(path("sub")), "the rest is reported")
    }

    @Test(arguments: WatchMethod.allCases)
    func theMountsOwnChangesAreIgnored(method: WatchMethod) throws {
        guard isRoot || method == .inotify else { return }
        let watched = try Watched(method)
        defer { watched.stop() }
        switch method {
        case .fanotify:
            // This process is the mount: what it does itself is its own.
            try watched.scratch.write("own", [1, 2, 3])
            #expect(rename("\(watched.scratch.path)/own", "\(watched.scratch.path)/own2") == 0)
            #expect(mkdir("\(watched.scratch.path)/ownDirectory", 0o755) == 0)
            watched.settle()
            // A directory the mount made is followed all the same.
            watched.step(": > ownDirectory/outside", expect: .created(path("ownDirectory/outside"), isDirectory: false))
        case .inotify:
            watched.ownChanges.note(path("own"))
            watched.ownChanges.note(path("own2"))
            watched.ownChanges.note(path("ownDirectory"))
            #expect(watched.scratch.shell("echo x > own && mv own own2 && mkdir ownDirectory"))
            watched.settle()
            watched.step(": > ownDirectory/outside", expect: .created(path("ownDirectory/outside"), isDirectory: false))
        }
        let reported = watched.recorder.all.flatMap(\.change.paths)
        #expect(!reported.contains(path("own")) && !reported.contains(path("own2")) && !reported.contains(path("ownDirectory")),
                "\(reported)")
    }

    @Test func fanotifyNamesTheProcess() throws {
        guard isRoot else { return }
        let watched = try Watched(.fanotify)
        defer { watched.stop() }
        // The shell writes and then stops itself, so that /proc still knows it when the event is read.
        var pid: pid_t = 0
        let arguments = ["sh", "-c", "cd '\(watched.scratch.path)' && echo x > by-child && kill -STOP $$"]
        var argv = arguments.map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        #expect(posix_spawn(&pid, "/bin/sh", nil, nil, &argv, environ) == 0)
        defer {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
        let index = watched.recorder.wait(for: .created(path("by-child"), isDirectory: false))
        let process = try #require(index.map { watched.recorder.all[$0].process } ?? nil)
        #expect(process.pid == pid)
        #expect(process.name == "sh")
        #expect(process.uid == getuid())
    }

    @Test func inotifyNamesNoProcess() throws {
        let watched = try Watched(.inotify)
        defer { watched.stop() }
        watched.step(": > x", expect: .created(path("x"), isDirectory: false))
        #expect(watched.recorder.all.allSatisfy { $0.process == nil })
    }

    /// The queue is filled past the machine's limit while the first batch is held in the
    /// callback. The limit is left as it is (lowering it would give any watch started
    /// meanwhile on the machine, other tests' mounts among them, a tiny queue).
    @Test(arguments: WatchMethod.allCases)
    func aFullQueueIsAnOverflow(method: WatchMethod) throws {
        guard isRoot || method == .inotify else { return }
        let limit = try #require(Syscall.readNumber("/proc/sys/fs/\(method.rawValue)/max_queued_events"))
        guard limit <= 100_000 else { return } // too many files to make in a unit test
        let scratch = try ScratchDirectory("watch-overflow")
        let gate = Mutex<(entered: Bool, open: Bool)>((false, false))
        let recorder = Recorder()
        let watcher = try BackingWatcher.start(root: scratch.path, method: method, ownChanges: OwnChanges(enabled: false)) { batch in
            gate.withLock { $0.entered = true }
            while !gate.withLock({ $0.open }) { usleep(1_000) }
            recorder.record(batch)
        }
        defer { watcher.stop() }
        #expect(scratch.shell(": > first"))
        let deadline = ContinuousClock.now + .seconds(10)
        while !gate.withLock({ $0.entered }) && ContinuousClock.now < deadline { usleep(1_000) }
        #expect(scratch.shell("mkdir late && i=0; while [ $i -lt \(limit + 1000) ]; do : > f$i; i=$((i+1)); done"))
        gate.withLock { $0.open = true }
        recorder.wait(for: .overflow)
        // After the overflow the whole tree is watched afresh: the directory made during it too.
        #expect(scratch.shell(": > late/after"))
        recorder.wait(for: .created(MountPath("late/after")!, isDirectory: false))
    }

    @Test(arguments: WatchMethod.allCases)
    func stopReturnsPromptly(method: WatchMethod) throws {
        guard isRoot || method == .inotify else { return }
        let watched = try Watched(method)
        let started = ContinuousClock.now
        watched.stop()
        watched.stop()
        #expect(ContinuousClock.now - started < .seconds(1))
        #expect(watched.scratch.shell(": > after"))
        usleep(50_000)
        #expect(watched.recorder.count == 0, "nothing is reported after stop")
    }

    @Test func stopFromTheCallbackEndsTheThread() throws {
        let scratch = try ScratchDirectory("watch-stop")
        let holder = Mutex<BackingWatcher?>(nil)
        let batches = Atomic<Int>(0)
        let watcher = try BackingWatcher.start(root: scratch.path, method: .inotify, ownChanges: OwnChanges(enabled: false)) { _ in
            batches.add(1, ordering: .relaxed)
            holder.withLock { $0 }?.stop()
        }
        holder.withLock { $0 = watcher }
        #expect(scratch.shell(": > a"))
        let deadline = ContinuousClock.now + .seconds(10)
        while batches.load(ordering: .relaxed) == 0 && ContinuousClock.now < deadline { usleep(1_000) }
        #expect(scratch.shell(": > b && : > c"))
        usleep(50_000)
        #expect(batches.load(ordering: .relaxed) == 1)
        holder.withLock { $0 = nil }
        watcher.stop()
    }

    /// inotify, but with a limit of watches of its own, so that a test reaches it without
    /// touching the machine's (fs.inotify.max_user_watches is every process's of the user).
    final class LimitedInotify: KernelWatch {
        static let method = WatchMethod.inotify
        static let selfEventsRepeatParent = InotifyWatch.selfEventsRepeatParent
        final class Budget: Sendable { let remaining: Atomic<Int>; init(_ count: Int) { remaining = Atomic(count) } }
        let inner: InotifyWatch
        let budget: Budget
        var descriptor: Int32 { inner.descriptor }

        init(_ budget: Budget) throws(Errno) {
            inner = try InotifyWatch()
            self.budget = budget
        }

        func watch(directory: Int32) throws(Errno) -> Int32 {
            guard budget.remaining.subtract(1, ordering: .relaxed).newValue >= 0 else { throw .noSpace }
            return try inner.watch(directory: directory)
        }

        func unwatch(_ key: Int32, root: Int32) { inner.unwatch(key, root: root) }

        func decode(_ bytes: UnsafeRawBufferPointer, into events: inout [(event: KernelEvent<Int32>, pid: Int32?)]) {
            inner.decode(bytes, into: &events)
        }
    }

    @Test func theWatchLimitAtStartIsAFailureThatNamesIt() throws {
        let scratch = try ScratchDirectory("watch-limit")
        #expect(scratch.shell("mkdir -p a/b"))
        let budget = LimitedInotify.Budget(2)
        #expect {
            try BackingWatcher.start(root: scratch.path, kernel: { () throws(Errno) in try LimitedInotify(budget) },
                                     ownChanges: OwnChanges(enabled: false)) { _ in }
        } throws: { error in
            "\(error)".contains("inotify: the limit of ") && "\(error)".contains(" watches (fs.inotify.max_user_watches) is reached")
        }
    }

    @Test func theWatchLimitLaterIsAnOverflow() throws {
        let scratch = try ScratchDirectory("watch-limit")
        let budget = LimitedInotify.Budget(1)
        let recorder = Recorder()
        let watcher = try BackingWatcher.start(root: scratch.path, kernel: { () throws(Errno) in try LimitedInotify(budget) },
                                               ownChanges: OwnChanges(enabled: false)) { recorder.record($0) }
        defer { watcher.stop() }
        #expect(scratch.shell("mkdir d"))
        let created = recorder.wait(for: .created(MountPath("d")!, isDirectory: true))
        recorder.wait(from: (created ?? 0) + 1, for: .overflow)
        #expect(watcher.watchedDirectories == 1)
        #expect(scratch.shell("mkdir -p e/f && : > marker"))
        recorder.wait(for: .created(MountPath("marker")!, isDirectory: false))
        let all = recorder.all
        let overflows = all.filter { $0.change == .overflow }.count
        #expect(overflows >= 2, "every directory that could not be followed says so")
        #expect(overflows <= all.filter { if case .created(_, true) = $0.change { true } else { false } }.count,
                "no more than once per directory lost: \(all.map(\.change))")
    }

}
