import CoordFSCore
import Foundation
import Glibc
import Logging
import Synchronization
import SystemPackage
import Testing
@testable import CoordFSVersions
import CoordFSCluster
import CoordFSTestSupport

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

    /// The live paths the store keeps in memory follow each rename exactly as the index does
    /// (files and directories moved, over files with and without versions, deleted behind the
    /// mount, exchanged), over 2,000 pseudo-random steps: the store applies both and reads neither
    /// back. The cluster's index in PostgreSQL takes the same steps and must agree with both,
    /// down to each live file's versions.
    @Test func livePathsFollowRenamesAsBothIndexesDo() throws {
        let backing = try Backing()
        let server = try PostgresServer()
        defer { try? server.stop() }
        // Seeded, so that a failing walk can be replayed step by step; more seeds with
        // COORDFS_VERSION_WALK_SEEDS=FIRST-LAST (a random walk once found the two indexes giving
        // one path two live files: see Docs/VERSIONS.md).
        let seeds = ProcessInfo.processInfo.environment["COORDFS_VERSION_WALK_SEEDS"].flatMap { range -> ClosedRange<UInt64>? in
            let bounds = range.split(separator: "-").compactMap { UInt64($0) }
            return bounds.count == 2 && bounds[0] <= bounds[1] ? bounds[0]...bounds[1] : nil
        } ?? 41...41
        for seed in seeds {
            let indexes: [any VersionIndexing] = [
                try VersionIndex(path: backing.path + "/index-\(seed).sqlite"),
                try ClusterVersionIndex(configuration: ClusterConfiguration(conninfo: server.conninfo(), name: "walk \(seed)"), hostname: "here"),
            ]
            try Self.walk(seed: seed, steps: 2_000, indexes: indexes)
        }
    }

    /// One walk of `steps` pseudo-random changes applied to `indexes` and to `LivePaths`,
    /// compared after each step, and each live file's versions compared at the end.
    static func walk(seed: UInt64, steps: Int, indexes: [any VersionIndexing]) throws {
        var live = LivePaths()
        // Names that sort around the slash and its successor, so that prefix bounds are tried.
        let names = ["a", "a0", "a.b", "b", "ab", "c\u{00FF}"]
        var generator = SeededGenerator(state: seed)
        func randomPath() -> MountPath {
            let depth = Int.random(in: 1...3, using: &generator)
            return MountPath(components: (0..<depth).map { _ in FileName(names.randomElement(using: &generator)!.utf8)! })
        }
        let origin = VersionOrigin(pid: 1, uid: 0, process: "test")
        for step in 0..<steps {
            let (first, second) = (randomPath(), randomPath())
            switch Int.random(in: 0..<10, using: &generator) {
            case 0..<4:
                // A version of a file (one that is not above a live path: a file has nothing beneath).
                guard !live.all.contains(where: { $0 != first && $0.isWithin(first) }),
                      !live.all.contains(where: { first != $0 && first.isWithin($0) }) else { continue }
                let version = NewVersionRecord(path: first, size: Int64(step), modified: 0, kept: Int64(step), kind: .save, origin: origin,
                                               mode: 0o100644)
                for index in indexes { _ = try index.record(version, deletingFile: false) }
                live.insert(first)
            case 4..<7:
                // No move into its own subtree, as rename(2) refuses.
                guard !second.isWithin(first), !first.isWithin(second) else { continue }
                for index in indexes { try index.moved(from: first, to: second) }
                live.moved(from: first, to: second)
            case 7:
                for index in indexes { try index.deleted(first) }
                live.removeAll(within: first)
            default:
                guard !second.isWithin(first), !first.isWithin(second) else { continue }
                for index in indexes { try index.exchanged(first, second) }
                live.exchanged(first, second)
            }
            for index in indexes {
                let listed = try index.livePaths()
                let indexed = Set(listed)
                try #require(live.all == indexed, "seed \(seed) step \(step), \(type(of: index)): memory \(live.all.sorted()) index \(indexed.sorted())")
                // One live file per path: with two, the indexes could pick different ones to record into.
                try #require(listed.count == indexed.count, "seed \(seed) step \(step), \(type(of: index)): a path with two live files in \(listed.sorted())")
            }
        }
        // Each live file has the same versions in both (told apart by their sizes, the step that kept each).
        for path in live.all {
            let sizes = try indexes.map { index in try index.file(at: path).map { try index.versions(of: $0.id).map(\.size) } }
            try #require(sizes[0] == sizes[1], "seed \(seed), \(path): \(sizes)")
        }
    }

    /// An index written before renames cleared stale records beneath their destination may
    /// hold two live files at one path. Opened now, the newer stays live (the one PostgreSQL
    /// recorded into), the older keeps its versions as a deleted file, and no change can give
    /// a path two live files again (the database refuses it).
    @Test func anIndexWithTwoLiveFilesAtOnePathKeepsTheNewer() throws {
        let backing = try Backing()
        let server = try PostgresServer()
        defer { try? server.stop() }
        let configuration = ClusterConfiguration(conninfo: server.conninfo(), name: "old")
        let path = MountPath("/d/f")!
        let version = NewVersionRecord(path: path, size: 1, modified: 0, kept: 0, kind: .save, origin: Self.origin, mode: 0o100644)
        let sqlitePath = backing.path + "/index.sqlite"
        let older = try VersionIndex(path: sqlitePath).record(version, deletingFile: false)
        // Back to the first schema, with a second live file at the same path.
        let database = try SQLiteDatabase(path: sqlitePath)
        try database.execute("DROP INDEX files_live_by_path; PRAGMA user_version = 1")
        try database.rows("INSERT INTO files (path) VALUES (?)", [.blob(path.bytes)])
        let newerSQLite = database.lastInsertedRowID
        let upgraded = try VersionIndex(path: sqlitePath)
        let cluster = try ClusterVersionIndex(configuration: configuration, hostname: "here")
        let clusterOlder = try cluster.record(version, deletingFile: false)
        let session = try DatabaseConnection(conninfo: configuration.conninfo)
        _ = try session.execute("DROP INDEX coordfs_version_files_live_by_path")
        let newerCluster = try #require(try session.execute(
            "INSERT INTO coordfs_version_files (cluster, path) VALUES ($1, $2) RETURNING id", [.text("old"), .bytes(path.bytes)]).integer(0, 0))
        let reopened = try ClusterVersionIndex(configuration: configuration, hostname: "here")
        #expect(throws: SQLiteError.self) { try database.rows("INSERT INTO files (path) VALUES (?)", [.blob(path.bytes)]) }
        #expect(throws: DatabaseError.self) {
            try session.execute("INSERT INTO coordfs_version_files (cluster, path) VALUES ($1, $2)", [.text("old"), .bytes(path.bytes)])
        }

        for (index, (stale, newer)) in [(upgraded as any VersionIndexing, (older.file, newerSQLite)),
                                        (reopened, (clusterOlder.file, newerCluster))] {
            #expect(try index.livePaths() == [path])
            let live = try #require(try index.file(at: path))
            #expect(live.id == newer && !live.deleted)
            #expect(try index.versions(of: stale).count == 1, "the older file's version stays")
            // A rename over the directory that holds it clears it; nothing moves in beside it.
            try index.moved(from: MountPath("/e")!, to: MountPath("/d")!)
            #expect(try index.livePaths() == [])
        }
    }

    /// Two stores on one backing with one index in PostgreSQL, as two hosts of a cluster have
    /// them: what one keeps the other lists and reads, under the name the other gave it;
    /// removed through one, it is gone for the other (told of once); a record without its version is a crash's leftover only once it is
    /// a minute old (another host may be about to link it).
    @Test func twoStoresShareOneClusterIndex() throws {
        let backing = try Backing()
        let server = try PostgresServer()
        defer { try? server.stop() }
        let configuration = ClusterConfiguration(conninfo: server.conninfo(), name: "shared")
        let clock = TestClock()
        func store(_ host: String) throws -> VersionStore {
            try VersionStore(backing: backing.path, sharedIndex: try ClusterVersionIndex(configuration: configuration, hostname: host),
                             retention: VersionRetention(thinning: .all, minimumFreeBytes: 0), clock: clock.reading, sweepEvery: nil,
                             logger: Logger(label: host))
        }
        let (first, second) = (try store("first"), try store("second"))
        let removals = Mutex([Int64]())
        for one in [first, second] {
            one.observe { notice in if notice.kind == .versionRemoved { removals.withLock { $0.append(notice.version) } } }
        }
        let kept = try #require(first.keepReplaced(backing.file, in: backing.descriptor.raw, path: Self.path, kind: .save, origin: Self.origin))
        let listed = try #require(try second.versions(of: Self.path))
        #expect(listed.versions.map(\.id) == [kept.id])
        #expect(try second.read(version: kept.id, of: Self.path, offset: 0, count: 10) == [UInt8](repeating: 7, count: 10))
        // Renamed through the second: the first finds the versions under the new name.
        second.moved(from: Self.path, to: MountPath("/g")!)
        #expect(try first.versions(of: MountPath("/g")!)?.versions.map(\.id) == [kept.id])
        #expect(try first.remove(versions: nil, of: MountPath("/g")!, by: Self.origin) == 1)
        #expect(throws: Errno.noSuchFileOrDirectory) { try second.remove(versions: [kept.id], of: MountPath("/g")!, by: Self.origin) }
        #expect(removals.withLock { $0 } == [kept.id])

        // A record whose version is not linked (yet): kept by a store opening now, dropped by one opening a minute later.
        let index = try ClusterVersionIndex(configuration: configuration, hostname: "third")
        let pending = try index.record(NewVersionRecord(path: Self.path, size: 1, modified: 0, kept: clock.reading(), kind: .save,
                                                        origin: Self.origin, mode: 0o100644), deletingFile: false)
        _ = try store("third")
        #expect(try index.allVersionIDs()[pending.id] != nil)
        clock.advance(seconds: 61)
        _ = try store("fourth")
        #expect(try index.allVersionIDs()[pending.id] == nil)
    }

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

    /// The observer (the mount, which tells subscribers and presenters) is called the same way
    /// for the 4,000th notice as for the first: the depth of the stack it is called at stays
    /// put. (A closure read out of a Mutex came back wrapped once more at each read: a chain of
    /// thunks one deeper per notice, slower each time, and at last a stack overflow.)
    @Test func theThousandthNoticeCostsWhatTheFirstDid() throws {
        let backing = try Backing()
        let store = try VersionStore(backing: backing.path, retention: VersionRetention(thinning: .all, minimumFreeBytes: 0),
                                     sweepEvery: nil, logger: Logger(label: "test"))
        let depths = Mutex<[Int]>([])
        store.observe { _ in
            var marker = 0
            let address = withUnsafeMutablePointer(to: &marker) { Int(bitPattern: $0) }
            depths.withLock { $0.append(address) }
        }
        for _ in 0..<2_000 {
            // A version kept and taken back: a version-added and a version-removed notice.
            let kept = try #require(store.keepReplaced(backing.file, in: backing.descriptor.raw, path: Self.path, kind: .save, origin: Self.origin))
            store.takeBack(kept)
        }
        let seen = depths.withLock { $0 }
        try #require(seen.count == 4_000)
        // Each pair of notices comes from the same two call sites on this thread.
        #expect(abs(seen[0] - seen[3_998]) < 1_024 && abs(seen[1] - seen[3_999]) < 1_024,
                "the stack grew by \(seen[0] - seen[3_998]) bytes between the first notice and the 3,999th")
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
