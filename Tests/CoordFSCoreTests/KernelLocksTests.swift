import Glibc
import Testing
@testable import CoordFSCore

/// Lock lines as the kernel writes them (/proc/locks, fdinfo), and a lock this process takes
/// found among its own descriptors, not another process's.
@Suite struct KernelLocksTests {
    @Test func linesOfEveryKindAreRead() {
        let text = """
        1: POSIX  ADVISORY  WRITE 1234 00:2f:123456 0 EOF
        2: FLOCK  ADVISORY  WRITE 1235 08:01:2345 0 EOF
        2: -> FLOCK  ADVISORY  WRITE 1236 08:01:2345 0 EOF
        3: OFDLCK ADVISORY  READ  -1 00:3a:77 0 9
        4: LEASE  ACTIVE    READ  99 fd:00:18446744073709551615 0 EOF

        """
        let files = KernelLocks.lockedFiles(in: Array(text.utf8))
        #expect(files == [
            .init(major: 0, minor: 0x2f, inode: 123456), .init(major: 8, minor: 1, inode: 2345), .init(major: 8, minor: 1, inode: 2345),
            .init(major: 0, minor: 0x3a, inode: 77), .init(major: 0xfd, minor: 0, inode: UInt64.max),
        ])
        #expect(KernelLocks.lockedFiles(in: Array("garbage\n1: POSIX x:y:z\n".utf8)).isEmpty)
    }

    @Test func aLockTakenHereIsFoundAmongThisProcesssDescriptors() throws {
        var template = Array("/tmp/coordfs-locks-XXXXXX".utf8CString)
        let path = String(cString: try #require(template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }))
        defer { _ = system("rm -rf \(path)") }
        let descriptor = open(path + "/f", O_RDWR | O_CREAT, 0o644)
        #expect(descriptor >= 0)
        defer { close(descriptor) }
        var status = stat()
        fstat(descriptor, &status)
        let major = UInt32((status.st_dev >> 8) & 0xfff), minor = UInt32((status.st_dev & 0xff) | ((status.st_dev >> 12) & 0xfff00))
        let mount = KernelMountIdentity()
        let files = SelfCoordinatingFiles(mount: mount)
        #expect(!files.isLocked(inode: UInt64(status.st_ino), byProcess: getpid()), "the device is not known yet")
        mount.set(id: 1, major: major, minor: minor)
        #expect(!files.isLocked(inode: UInt64(status.st_ino), byProcess: getpid()))
        #expect(flock(descriptor, LOCK_EX) == 0)
        #expect(files.isLocked(inode: UInt64(status.st_ino), byProcess: getpid()))
        #expect(!files.isLocked(inode: UInt64(status.st_ino), byProcess: getppid()), "another process holds no lock on it")
        flock(descriptor, LOCK_UN)
        #expect(!files.isLocked(inode: UInt64(status.st_ino), byProcess: getpid()))
    }
}
