import Glibc
import Synchronization
import SystemPackage
import Testing
@testable import CoordFSCore

/// The registry of open files' activity, on nodes of a scratch directory: a save is installed,
/// joined and ended; names of created files wait for their first commit; readers through the
/// page cache are counted, and a commit keeps new readers off a cache that may be stale until
/// the kernel dropped it and the older readers closed.
@Suite struct ActivityRegistryTests {
    let fixture: SaveFixture
    let registry = ActivityRegistry()

    init() throws {
        fixture = try SaveFixture(unnamed: true)
        try fixture.scratch.write("doc", Array("committed".utf8))
        try fixture.scratch.write("other", Array("x".utf8))
    }

    func version(of node: Node) throws -> SharedDescriptor {
        SharedDescriptor(try node.withDescriptor { (descriptor) throws(Errno) in try SaveFixture.reopen(descriptor, O_RDONLY) })
    }

    @Test func saveIsInstalledJoinedAndEndedWithItsLastWriter() throws {
        let (node, first) = try fixture.save(of: "doc")
        let other = try fixture.lookUp("other")
        #expect(!registry.hasSaves)
        #expect(registry.joinSave(of: node, by: fixture.owner) == nil)
        #expect(!registry.needsFreshAttributes(node))

        #expect(registry.installSave(first) === first)
        #expect(registry.hasSaves)
        #expect(registry.save(of: node) === first)
        #expect(registry.save(of: other) == nil)
        #expect(registry.needsFreshAttributes(node), "owner and others see different sizes")
        #expect(!registry.needsFreshAttributes(other))

        // A second candidate for the same file joins the save in force.
        let (_, second) = try fixture.save(of: "doc")
        #expect(registry.installSave(second) === first)
        #expect(second.hasNoWriters)
        #expect(registry.joinSave(of: node, by: fixture.owner) === first)

        registry.endSave(first)
        #expect(registry.save(of: node) === first, "a save with writers stays")
        #expect(!first.removeWriter())
        #expect(!first.removeWriter())
        #expect(first.removeWriter())
        registry.endSave(first)
        #expect(registry.save(of: node) == nil)
        #expect(!registry.hasSaves)
        #expect(!registry.needsFreshAttributes(node))
        #expect(registry.joinSave(of: node, by: fixture.owner) == nil)

        // Another owner meets a staged save only after its owner's claim was broken: the save
        // is set aside (its handles go on with it) and the other starts its own.
        let (_, broken) = try fixture.save(of: "doc")
        #expect(registry.installSave(broken) === broken)
        #expect(registry.joinSave(of: node, by: .process(1)) == nil)
        #expect(registry.save(of: node) == nil && !registry.hasSaves)
        #expect(broken.removeWriter())
        registry.endSave(broken)

        // Ending a save that is no longer in force leaves the one that is.
        let (_, third) = try fixture.save(of: "doc")
        #expect(registry.installSave(third) === third)
        #expect(third.removeWriter())
        registry.endSave(first)
        #expect(registry.save(of: node) === third)
    }

    @Test func pendingNamesFollowTheirSave() throws {
        #expect(fixture.scratch.shell("mkdir d"))
        let directory = try fixture.lookUp("d")
        let root = fixture.table.root
        let (_, save) = try fixture.creatingSave(named: "new")
        let name = PendingName(directory: root.id, name: "new")
        #expect(!registry.hasPendingNames)
        #expect(registry.installSave(save, pendingName: name) === save)
        #expect(registry.hasPendingNames)
        #expect(registry.pendingSave(name) === save)
        #expect(registry.pendingSave(PendingName(directory: root.id, name: "newer")) == nil)
        #expect(registry.hasPendingNames(in: root.id))
        #expect(!registry.hasPendingNames(in: directory.id))

        let moved = PendingName(directory: directory.id, name: "moved")
        registry.movePendingName(of: save, to: moved)
        #expect(registry.pendingSave(name) == nil)
        #expect(registry.pendingSave(moved) === save)
        #expect(!registry.hasPendingNames(in: root.id))
        #expect(registry.hasPendingNames(in: directory.id))

        registry.clearPendingName(of: save)
        #expect(!registry.hasPendingNames)
        #expect(registry.pendingSave(moved) == nil)
        #expect(registry.save(of: save.node) === save, "the save outlives its pending name")

        // A save that ends takes its pending name along.
        let (_, another) = try fixture.creatingSave(named: "late")
        let late = PendingName(directory: root.id, name: "late")
        #expect(registry.installSave(another, pendingName: late) === another)
        #expect(another.removeWriter())
        registry.endSave(another)
        #expect(registry.pendingSave(late) == nil)
        #expect(!registry.hasPendingNames)
    }

    /// Readers through the page cache, then a commit: new readers go around the cache until
    /// the last older reader closed (which asks for the drop) and the kernel dropped it.
    @Test func commitMakesTheCacheStaleUntilDroppedAndItsReadersGone() throws {
        let node = try fixture.lookUp("doc")
        let older = try version(of: node)
        let alice = ClaimOwner.process(100), bob = ClaimOwner.process(200)
        #expect(!registry.hasCachedReaders(node))
        #expect(registry.openReader(of: node, owner: alice, version: older, identity: node.identity))
        #expect(registry.hasCachedReaders(node))
        #expect(!registry.hasCachedReaders(node, besides: alice))
        #expect(registry.hasCachedReaders(node, besides: bob))
        #expect(registry.cachedVersion(of: node) === older)
        #expect(!registry.needsFreshAttributes(node))

        registry.noteCommit(of: node)
        #expect(registry.needsFreshAttributes(node))
        #expect(!registry.openReader(of: node, owner: bob, version: try version(of: node), identity: node.identity),
                "a reader of the new version goes around the stale cache")
        registry.cacheDropped(of: node)
        #expect(!registry.openReader(of: node, owner: bob, version: try version(of: node), identity: node.identity),
                "an older reader still reads through the cache")

        #expect(registry.closeReader(of: node, owner: alice), "the last older reader gone: drop the cache")
        #expect(!registry.hasCachedReaders(node))
        #expect(registry.cachedVersion(of: node) == nil)
        #expect(!registry.openReader(of: node, owner: bob, version: try version(of: node), identity: node.identity),
                "stale until the kernel dropped it")
        registry.cacheDropped(of: node)
        #expect(!registry.needsFreshAttributes(node))
        #expect(registry.openReader(of: node, owner: bob, version: try version(of: node), identity: node.identity))
        #expect(!registry.closeReader(of: node, owner: bob), "a fresh cache needs no drop")
    }

    /// A reader registered after the node moved on to another file (a commit, or another
    /// host's commit followed, between the reader's open of its version and its registration,
    /// its whole drop already done) goes around the cache: it would fill it with the replaced
    /// version while readers of the new one fill it too (ClusterTests.readersNeverSeeATornVersionFromAnotherMount).
    @Test func aReaderOfAReplacedVersionGoesAroundTheCache() throws {
        let node = try fixture.lookUp("doc")
        let replaced = FileIdentity(try fixture.scratch.status("other"))
        #expect(!registry.openReader(of: node, owner: .process(100), version: try version(of: node), identity: replaced))
        #expect(!registry.hasCachedReaders(node))
        #expect(registry.openReader(of: node, owner: .process(100), version: try version(of: node), identity: node.identity))
    }

    /// The cache is good again only once the last drop asked for is done: the kernel's drop
    /// for an earlier commit (or an older reader's close) does not clear the mark of a later
    /// commit, nor of a reader that read the older version again after it and then closed.
    @Test func theCacheIsGoodAgainOnlyAfterTheLastDropAskedFor() throws {
        let node = try fixture.lookUp("doc")
        let newer = ClaimOwner.process(200)
        registry.noteCommit(of: node)
        registry.noteCommit(of: node)
        registry.cacheDropped(of: node)
        #expect(!registry.openReader(of: node, owner: newer, version: try version(of: node), identity: node.identity),
                "the second commit's drop is still to come")
        registry.cacheDropped(of: node)
        #expect(registry.openReader(of: node, owner: newer, version: try version(of: node), identity: node.identity))

        // A commit while that reader reads; the kernel drops the cache, the reader reads on
        // (filling it again) and closes before the first drop is confirmed.
        registry.noteCommit(of: node)
        #expect(registry.closeReader(of: node, owner: newer), "the last older reader gone: drop the cache")
        registry.cacheDropped(of: node)
        #expect(!registry.openReader(of: node, owner: .process(300), version: try version(of: node), identity: node.identity),
                "the close's drop is still to come")
        registry.cacheDropped(of: node)
        #expect(!registry.needsFreshAttributes(node))
        #expect(registry.openReader(of: node, owner: .process(300), version: try version(of: node), identity: node.identity))
    }

    @Test func readersGoAroundTheCacheDuringASave() throws {
        let (node, save) = try fixture.save(of: "doc")
        _ = registry.installSave(save)
        #expect(!registry.openReader(of: node, owner: .process(300), version: try version(of: node), identity: node.identity))
        #expect(!registry.hasCachedReaders(node))
        #expect(save.removeWriter())
        registry.endSave(save)
        #expect(registry.openReader(of: node, owner: .process(300), version: try version(of: node), identity: node.identity))
    }

    /// A reader around the cache that mapped the file joins the cached readers when it reads
    /// the version the cache stands for, once; a save whose owner mapped the file holds the
    /// cache, and nobody joins then.
    @Test func mappedReadersJoinAndMappedSavesHoldTheCache() throws {
        let node = try fixture.lookUp("doc")
        let current = node.identity
        let elsewhere = FileIdentity(try fixture.scratch.status("other"))
        let owner = ClaimOwner.process(400)
        let joined = Atomic<Bool>(false)
        // (Values first: #expect cannot take the atomic, which is not copyable.)
        let other = registry.joinCachedReaders(node, owner: owner, version: try version(of: node), identity: elsewhere,
                                               joined: joined)
        let joinedByOther = joined.load(ordering: .relaxed)
        #expect(!other, "another version than the cache's")
        #expect(!joinedByOther)
        let same = registry.joinCachedReaders(node, owner: owner, version: try version(of: node), identity: current,
                                              joined: joined)
        let joinedBySame = joined.load(ordering: .relaxed)
        #expect(same)
        #expect(joinedBySame)
        let again = registry.joinCachedReaders(node, owner: owner, version: try version(of: node), identity: current,
                                               joined: joined)
        #expect(again)
        #expect(registry.hasCachedReaders(node))
        #expect(!registry.closeReader(of: node, owner: owner))
        #expect(!registry.hasCachedReaders(node), "joining twice counted once")

        let (_, save) = try fixture.save(of: "doc")
        #expect(!registry.noteMapped(save), "not the save in force")
        _ = registry.installSave(save)
        #expect(registry.mappedSave(of: node) == nil)
        #expect(registry.noteMapped(save))
        #expect(!registry.noteMapped(save), "once")
        #expect(registry.mappedSave(of: node) === save)
        let late = Atomic<Bool>(false)
        let duringMappedSave = registry.joinCachedReaders(node, owner: .process(500), version: try version(of: node),
                                                          identity: current, joined: late)
        #expect(!duringMappedSave, "the owner's mapping holds the cache")
        #expect(save.removeWriter())
        registry.endSave(save)
        #expect(registry.mappedSave(of: node) == nil)
    }
}
