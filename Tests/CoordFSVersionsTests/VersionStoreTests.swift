import CoordFSCore
import Glibc
import Logging
import Synchronization
import Testing
@testable import CoordFSVersions

/// The store on a scratch backing, with its clock injected: a day of saves lived in seconds,
/// the space share and the free-space floor.
@Suite struct VersionStoreTests {
    /// A backing directory under /tmp holding one file, `f`, removed with the test's instance.
    final class Backing {
        let path: String
        let descriptor: OwnedDescriptor
        let file = FileName("f".utf8)!

        init() throws {
            var template = Array("/tmp/coordfs-versions-XXXXXX".utf8CString)
            let created = try #require(template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) })
            path = String(cString: created)
            descriptor = try Syscall.openAt(AT_FDCWD, path, O_RDONLY | O_DIRECTORY)
            let written = try Syscall.openAt(descriptor.raw, file, O_WRONLY | O_CREAT, 0o644)
            _ = try [UInt8](repeating: 7, count: 4096).withUnsafeBytes { try Syscall.write(written.raw, from: $0, at: 0) }
        }

        deinit { _ = system("rm -rf '\(path)'") }
    }

    /// A clock the test moves.
    final class TestClock: Sendable {
        let nanoseconds = Atomic<Int64>(1_800_000_000 * 1_000_000_000)
        func advance(seconds: Int64) { nanoseconds.add(seconds * 1_000_000_000, ordering: .relaxed) }
        var reading: @Sendable () -> Int64 { { [self] in nanoseconds.load(ordering: .relaxed) } }
    }

    static let origin = VersionOrigin(pid: getpid(), uid: getuid(), process: "test")
    static let path = MountPath("/f")!

    @Test func aDayOfSavesEveryTenSecondsKeepsAboutOnePerStep() throws {
        let backing = try Backing()
        let clock = TestClock()
        let store = try VersionStore(backing: backing.path, retention: VersionRetention(spaceShare: 1, minimumFreeBytes: 0),
                                     clock: clock.reading, sweepEvery: nil, logger: Logger(label: "test"))
        let saves = 8_640
        for _ in 0..<saves {
            // What a commit does before its rename: the replaced file goes into the store.
            _ = try #require(store.keepReplaced(backing.file, in: backing.descriptor.raw, path: Self.path, kind: .save, origin: Self.origin))
            clock.advance(seconds: 10)
        }
        store.sweep()
        let summary = store.summary()
        // 120 in the last hour, one per hour for the 23 before it, and the newest.
        #expect((140...146).contains(summary.versions), "\(summary.versions) versions kept")
        print("VersionStoreTests: a simulated day of \(saves) saves of a 4 KiB file every 10 s leaves \(summary.versions) versions, \(summary.bytes) bytes")
        let listed = try #require(try store.versions(of: Self.path))
        #expect(listed.versions.count == summary.versions)
        // What the index lists is what the store holds.
        let folder = try Syscall.openAt(backing.descriptor.raw, ".coordfs-versions/objects", O_RDONLY | O_DIRECTORY)
        let objects = try Syscall.directoryNames(folder.raw)
        #expect(Set(objects.compactMap { $0.string.flatMap { Int64($0) } }) == Set(listed.versions.map(\.id)))
    }

    @Test func theStoreKeepsToItsShareOfTheDisk() throws {
        let backing = try Backing()
        let store = try VersionStore(backing: backing.path, retention: VersionRetention(thinning: .all, spaceShare: 1e-12, minimumFreeBytes: 0),
                                     sweepEvery: nil, logger: Logger(label: "test"))
        for _ in 0..<5 { _ = store.keepReplaced(backing.file, in: backing.descriptor.raw, path: Self.path, kind: .save, origin: Self.origin) }
        #expect(store.summary().versions == 5)
        #expect(store.sweep() == 4)
        #expect(store.summary().versions == 1, "the newest version of a file that exists stays")
    }

    @Test func belowTheFloorNoVersionIsKeptAndSavesGoOn() throws {
        let backing = try Backing()
        let store = try VersionStore(backing: backing.path, retention: VersionRetention(minimumFreeBytes: .max),
                                     sweepEvery: nil, logger: Logger(label: "test"))
        #expect(store.keepReplaced(backing.file, in: backing.descriptor.raw, path: Self.path, kind: .save, origin: Self.origin) == nil)
        #expect(try !store.removeKeeping(backing.file, in: backing.descriptor.raw, path: Self.path, origin: Self.origin),
                "the caller unlinks as usual")
        #expect(store.summary().paused)
        #expect(store.summary().versions == 0)
    }

    @Test func excludedFilesKeepNoVersions() throws {
        let backing = try Backing()
        let store = try VersionStore(backing: backing.path, retention: VersionRetention(minimumFreeBytes: 0, exclusions: ["f"]),
                                     sweepEvery: nil, logger: Logger(label: "test"))
        #expect(store.keepReplaced(backing.file, in: backing.descriptor.raw, path: Self.path, kind: .save, origin: Self.origin) == nil)
        #expect(!store.summary().paused)
    }
}
