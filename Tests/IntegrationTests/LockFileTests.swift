import Foundation
import Glibc
import Testing

/// Programs that coordinate themselves with locks (filelock, cargo, single-instance daemons,
/// OFD locks, lockf): a second process reaches its lock call at once, and the lock decides
/// who waits, with the errno a plain disk gives. The outcomes are compared with a plain
/// directory; the time each second process took to reach its lock call is printed and must be
/// far below the claim timeout (before: the claim timeout, 30 s, then EBUSY). Programs that do
/// not lock keep their saves: `CoordinationTests.noLostUpdates`.
@Suite(.serialized) struct LockFileTests {
    @Test func secondProcessesReachTheirLockCallsAtOnce() throws {
        try withMount { scratch in
            try SyscallParityTests.expectPythonParity("LockFileTests/lockScenarios", in: scratch, expected: [
                "new.lock second LOCK_NB EAGAIN", "new.lock after the holder closed locked",
                "existing.lock second LOCK_NB EAGAIN", "existing.lock after the holder closed locked",
                "second instance LOCK_NB EAGAIN", "second instance reads the running pid True",
                "cargo second build EAGAIN, then waited and locked",
                "turns [b'a', b'b', b'c', b'd']",
                "ofd getlk F_WRLCK 0 10 -1", "ofd setlk EAGAIN", "ofd setlkw locked",
                "lockf getlk names the holder True", "lockf second EAGAIN", "lockf after the holder closed locked",
                "late lock LOCK_NB EAGAIN",
            ])
            let timings = try String(contentsOfFile: scratch.root + "/lock-timings-mnt", encoding: .utf8)
            print("time to the lock call through the mount (s):\n" + timings)
            for line in timings.split(separator: "\n") {
                let fields = line.split(separator: " ")
                #expect(fields.count == 2 && (Double(fields[1]) ?? 99) < 5, "\(line): a second process waited for the first's open")
            }
        }
    }

    /// A user who may only read a file holds a lock on it: another user's save of the file
    /// stays a save (its half is never committed, a second writer waits for it), as before
    /// locks counted; the saver's own lock turns it in place. As root and nobody.
    @Test func aReadersLockDoesNotTurnAnotherUsersSave() throws {
        try withMount(["--allow-other"]) { scratch in
            let result = try run(["python3", pythonScript("LockFileTests/aReadersLockDoesNotTurnAnotherUsersSave")], in: scratch.mountpoint)
            #expect(result.status == 0 && result.errors.isEmpty, "\(result)")
            #expect(result.output == """
                only the reader locks second writer EAGAIN readers see b'original'
                after the close b'half and whole'
                saver locks second writer opened readers see b'half'
                after the close b'half and whole'

                """, "\(result)")
        }
    }
}
