import Foundation
import Glibc
import Synchronization
import Testing
@testable import CoordFSCore

/// Process facts read from the live /proc: this test process, one of its threads, and a child.
@Suite struct ProcessFactsTests {
    let facts = ProcessFacts()

    @Test func aProcessIsItsOwnThreadGroup() {
        #expect(facts.threadGroup(of: getpid()) == getpid())
        #expect(facts.threadGroup(of: getpid()) == getpid(), "and again, from the cache")
    }

    @Test func anotherThreadBelongsToThisProcess() throws {
        let result = Mutex<(thread: Int32, group: Int32)?>(nil)
        let done = DispatchSemaphore(value: 0)
        let facts = self.facts
        let thread = Thread {
            let tid = Self.currentThreadID()
            result.withLock { $0 = (tid, facts.threadGroup(of: tid)) }
            done.signal()
        }
        thread.start()
        #expect(done.wait(timeout: .now() + 5) == .success)
        let (tid, group) = try #require(result.withLock { $0 })
        #expect(tid != getpid(), "a second thread has its own id")
        #expect(group == getpid())
    }

    @Test func aProcessIsOwnedByItsUser() {
        #expect(ProcessFacts.owner(of: getpid()) == geteuid())
        #expect(ProcessFacts.owner(of: 2_000_000_000) == nil, "gone")
    }

    @Test func anUnknownIdStandsForItself() {
        // Above the kernel's largest possible pid (4 194 304), so never a live thread.
        #expect(facts.threadGroup(of: 2_000_000_000) == 2_000_000_000)
        #expect(facts.name(of: 2_000_000_000) == nil)
        #expect(!facts.isInTree(2_000_000_000, rootedAt: getpid()))
    }

    @Test func thisProcessDescendsFromItsAncestors() {
        #expect(facts.isInTree(getpid(), rootedAt: getpid()))
        #expect(facts.isInTree(getpid(), rootedAt: getppid()))
        #expect(facts.isInTree(getpid(), rootedAt: 1))
        #expect(!facts.isInTree(getppid(), rootedAt: getpid()))
        let lineage = facts.lineage(of: getpid())
        #expect(lineage.pids.first == getpid())
        #expect(lineage.pids.dropFirst().first == getppid())
        #expect(lineage.passesThrough(.client(1, processTree: getppid())))
        #expect(!lineage.passesThrough(.client(1, processTree: 2_000_000_000)))
        #expect(!lineage.passesThrough(.process(getppid())), "only explicit claims are passed through")
    }

    @Test func aChildIsInTheTreeAndHasItsName() throws {
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/bin/sleep")
        child.arguments = ["30"]
        try child.run()
        defer {
            // SIGKILL: the test runner may have SIGTERM blocked, and children inherit the mask.
            kill(child.processIdentifier, SIGKILL)
            child.waitUntilExit()
        }
        let pid = child.processIdentifier
        #expect(facts.isInTree(pid, rootedAt: getpid()))
        #expect(facts.isInTree(pid, rootedAt: getppid()))
        #expect(!facts.isInTree(getpid(), rootedAt: pid))
        #expect(facts.lineage(of: pid).passesThrough(.client(7, processTree: getpid())))
        #expect(!facts.lineage(of: getpid()).passesThrough(.client(7, processTree: pid)))
        #expect(facts.threadGroup(of: pid) == pid)
        // The name changes to "sleep" at exec, which may come a moment after the spawn.
        var name = facts.name(of: pid)
        for _ in 0..<200 where name != "sleep" {
            usleep(10_000)
            name = facts.name(of: pid)
        }
        #expect(name == "sleep")
    }

    @Test func theCacheStaysBoundedAndCorrect() {
        let small = ProcessFacts(validity: .milliseconds(1), capacity: 2)
        for _ in 0..<3 {
            #expect(small.threadGroup(of: getpid()) == getpid())
            #expect(small.threadGroup(of: getppid()) == getppid())
            #expect(small.threadGroup(of: 1) == 1)
        }
    }

    @Test func procPathsAreBuiltOnTheStack() {
        var bytes = [CChar](repeating: 0, count: 32)
        let fits = bytes.withUnsafeMutableBufferPointer { ProcessFacts.writeProcPath(4_194_304, "status", into: $0) }
        #expect(fits)
        #expect(Self.text(bytes) == "/proc/4194304/status")
        var short = [CChar](repeating: 0, count: 12)
        #expect(!short.withUnsafeMutableBufferPointer { ProcessFacts.writeProcPath(4_194_304, "status", into: $0) })
        var zero = [CChar](repeating: 0, count: 32)
        #expect(zero.withUnsafeMutableBufferPointer { ProcessFacts.writeProcPath(0, "comm", into: $0) })
        #expect(Self.text(zero) == "/proc/0/comm")
    }

    /// The text before the first NUL.
    static func text(_ chars: [CChar]) -> String {
        String(decoding: chars.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The calling thread's id, from /proc/thread-self ("PID/task/TID").
    static func currentThreadID() -> Int32 {
        var target = [CChar](repeating: 0, count: 64)
        let count = readlink("/proc/thread-self", &target, target.count - 1)
        guard count > 0 else { return -1 }
        return Int32(text(target).split(separator: "/").last ?? "") ?? -1
    }
}

/// Linux's rule for set-id bits after a change of a file's data by a writer without CAP_FSETID.
@Suite struct SetIDRuleTests {
    @Test func setUserIDAlwaysFallsAndSetGroupIDFallsWhenGroupExecutableOrOutsideTheGroup() {
        #expect(SetIDRule.bitsAfterDataChange(S_IFREG | 0o6666, writerInGroup: { true }) == 0o2666)
        #expect(SetIDRule.bitsAfterDataChange(S_IFREG | 0o6666, writerInGroup: { false }) == 0o666)
        #expect(SetIDRule.bitsAfterDataChange(S_IFREG | 0o6676, writerInGroup: { true }) == 0o676)
        #expect(SetIDRule.bitsAfterDataChange(S_IFREG | 0o1777, writerInGroup: { false }) == 0o1777, "sticky stays")
        #expect(SetIDRule.mayDrop(S_IFREG | 0o4755) && SetIDRule.mayDrop(S_IFREG | 0o2644))
        #expect(!SetIDRule.mayDrop(S_IFREG | 0o755) && !SetIDRule.mayDrop(S_IFDIR | 0o2775), "directories keep set-group-id")
    }

    @Test func thisProcessCapabilitiesAreRead() {
        #expect(ProcessFacts.hasEffectiveCapability(getpid(), SetIDRule.fsetidCapability) == (geteuid() == 0))
        #expect(!ProcessFacts.hasEffectiveCapability(Int32.max, SetIDRule.fsetidCapability), "a process that is gone holds nothing")
    }
}
