import Glibc
import Logging
import Synchronization
import SystemPackage
import Testing
@testable import CoordFSCore

/// The kernel as the mount tells it, recorded: what a FUSE session would be asked to drop.
final class RecordingKernel: KernelCache {
    enum Note: Hashable {
        case contents(UInt64)
        case contentsFrom(UInt64, Int64)
        case attributes(UInt64)
        case entry(UInt64, FileName)
        case deleted(UInt64, UInt64, FileName)
        case drained
    }
    private let recorded = Mutex<[Note]>([])
    /// Whether the kernel is taken to hold pages of every node (a reader has read them).
    let holdsPages: Bool

    init(holdsPages: Bool = true) { self.holdsPages = holdsPages }

    var notes: [Note] { recorded.withLock { $0 } }
    private func note(_ note: Note) { recorded.withLock { $0.append(note) } }

    func mayHoldPages(of id: UInt64) -> Bool { holdsPages }
    func invalidateContents(of id: UInt64, then: (@Sendable () -> Void)?) {
        note(.contents(id))
        then?()
    }
    func invalidateContents(of id: UInt64, from offset: Int64) { note(.contentsFrom(id, offset)) }
    func invalidateAttributes(of id: UInt64) { note(.attributes(id)) }
    func invalidateEntry(directory id: UInt64, name: FileName) { note(.entry(id, name)) }
    func notifyDeleted(directory id: UInt64, child: UInt64, name: FileName) { note(.deleted(id, child, name)) }
    func drain() { note(.drained) }
}

/// A mount without FUSE: a scratch backing, the recording kernel, and a subscriber to everything.
private final class MountFixture {
    let scratch: ScratchDirectory
    let kernel = RecordingKernel()
    let mount: CoordinatedMount
    let subscription: EventSubscription

    init() throws {
        scratch = try ScratchDirectory("mount-core")
        mount = try CoordinatedMount(backing: scratch.path, options: MountOptions(), kernel: kernel, logger: Logger(label: "test"))
        subscription = mount.events.subscribe(to: MountPath("/")!, recursive: true) {}
    }

    deinit { subscription.cancel() }

    /// The node for a name in the top directory, as a lookup through the mount makes it.
    func node(_ name: FileName) throws -> Node {
        let root = mount.nodes.root
        let descriptor = try name.withCString { (cName) throws(Errno) in try Syscall.openAt(root.directory, cName, Linux.O_PATH | O_NOFOLLOW) }
        let status = try Syscall.statOfPathDescriptor(descriptor.raw)
        return mount.nodes.lookUp(status, descriptor: descriptor, parent: root, name: name)
    }

    /// The events published since the last look.
    func events() -> [ChangeEvent] {
        Array(subscription.next().events)
    }

    /// Replaces the file at `name` in the backing the way a commit elsewhere does: a new file renamed over it.
    func replaceBehind(_ name: String, with bytes: [UInt8]) throws {
        try scratch.write(name + ".other", bytes)
        #expect(rename("\(scratch.path)/\(name).other", "\(scratch.path)/\(name)") == 0)
    }
}

/// What the mount decides, driven without a kernel: commits and who hears of them, changes
/// behind the mount, changes other hosts committed, and a node following its name.
@Suite struct CoordinatedMountTests {
    private let writer = ChangeOrigin(pid: getpid(), uid: getuid())

    @Test func aCommitReplacesTheFileDropsTheKernelsPagesAndTellsSubscribers() throws {
        let fixture = try MountFixture()
        try fixture.scratch.write("doc", Array("one".utf8))
        let mount = fixture.mount
        let node = try fixture.node("doc")
        let save = Save(node: node, owner: .process(writer.pid), committed: try mount.reopen(node, flags: O_RDONLY),
                        directory: mount.nodes.root, name: "doc", staging: mount.staging)
        try save.change() { (descriptor) throws(Errno) in
            guard pwrite(descriptor, "two!", 4, 0) == 4 else { throw Errno.ioError }
        }
        #expect(fixture.events().isEmpty, "nothing is told before the commit")

        let report = try #require(try mount.commit(save, origin: writer, under: nil))
        #expect(!report.created && report.size == 4)
        #expect(try fixture.scratch.read("doc") == Array("two!".utf8))
        #expect(fixture.kernel.notes == [.contents(node.id)], "a reader's pages of the old version go")
        let events = fixture.events()
        #expect(events.map(\.kind) == [.changed])
        #expect(events.first?.path == MountPath("/doc")! && events.first?.size == 4)
        #expect(events.first?.origin.pid == writer.pid && events.first?.origin.isOutside == false)
        #expect(try mount.commit(save, origin: writer, under: nil) == nil, "nothing left to commit")
        #expect(fixture.events().isEmpty)
    }

    @Test func aFileMadeBehindTheMountDropsTheNegativeEntryAndIsToldAsOutside() throws {
        let fixture = try MountFixture()
        try fixture.scratch.write("new", Array("hello".utf8))
        let editor = OutsideProcess(pid: 77, uid: 1000, name: "editor")
        fixture.mount.applyOutsideChanges([ObservedChange(.created(MountPath("/new")!, isDirectory: false), process: editor)])
        let root = NodeTable.rootID
        #expect(fixture.kernel.notes == [.entry(root, "new"), .contents(root)])
        let event = try #require(fixture.events().first)
        #expect(event.kind == .created && event.path == MountPath("/new")! && event.size == 5)
        #expect(event.origin.isOutside && event.origin.pid == 77 && event.origin.processName == "editor")
    }

    @Test func aRenameBehindTheMountMovesTheNodeAndTheReplacedOneLosesItsName() throws {
        let fixture = try MountFixture()
        try fixture.scratch.write("a", Array("A".utf8))
        try fixture.scratch.write("b", Array("B".utf8))
        let a = try fixture.node("a")
        let b = try fixture.node("b")
        #expect(rename("\(fixture.scratch.path)/b", "\(fixture.scratch.path)/a") == 0)
        fixture.mount.applyOutsideChanges([ObservedChange(.moved(from: MountPath("/b")!, to: MountPath("/a")!, isDirectory: false))])
        #expect(fixture.mount.nodes.node(at: MountPath("/a")!) === b, "the moved node keeps its file under the new name")
        #expect(fixture.mount.nodes.node(at: MountPath("/b")!) == nil)
        #expect(fixture.mount.nodes.path(of: a) == nil, "the replaced file has no name any more")
        #expect(fixture.kernel.notes.contains(.attributes(a.id)))
        #expect(fixture.kernel.notes.contains(.entry(NodeTable.rootID, "a")) && fixture.kernel.notes.contains(.entry(NodeTable.rootID, "b")))
        let event = try #require(fixture.events().first)
        #expect(event.kind == .moved && event.path == MountPath("/b")! && event.destination == MountPath("/a")!)
    }

    @Test func anotherHostsCommitMovesTheNodeToTheNewFileBeforeSubscribersHear() throws {
        let fixture = try MountFixture()
        try fixture.scratch.write("doc", Array("mine".utf8))
        let node = try fixture.node("doc")
        try fixture.replaceBehind("doc", with: Array("theirs".utf8))
        let other = EventOrigin(pid: 5, uid: 0, processName: "writer", host: EventHost(id: 2, name: "other"))
        let change = RemoteChange(cursor: 1, kind: .changed, path: MountPath("/doc")!, destination: nil, isDirectory: false,
                                  size: 6, origin: other)
        fixture.mount.applyRemoteChanges(RemoteBatch([.change(change)]))
        #expect(node.identity == FileIdentity(try fixture.scratch.status("doc")), "the node follows its name to the new file")
        #expect(fixture.mount.nodes.node(at: MountPath("/doc")!) === node, "one node for the name")
        #expect(fixture.kernel.notes == [.contents(node.id), .drained], "the kernel drops the old pages before anyone hears")
        let event = try #require(fixture.events().first)
        #expect(event.kind == .changed && event.origin.host?.name == "other" && !event.origin.isOutside)
        let readBack = try fixture.mount.reopen(node, flags: O_RDONLY)
        #expect(try ScratchDirectory.readAll(readBack.raw) == Array("theirs".utf8))
    }

    @Test func aNodeWithASaveInFlightDoesNotFollowItsName() throws {
        let fixture = try MountFixture()
        try fixture.scratch.write("doc", Array("mine".utf8))
        let mount = fixture.mount
        let node = try fixture.node("doc")
        let before = node.identity
        let save = Save(node: node, owner: .process(writer.pid), committed: try mount.reopen(node, flags: O_RDONLY),
                        directory: mount.nodes.root, name: "doc", staging: mount.staging)
        #expect(mount.activity.joinSave(of: node, by: .process(writer.pid)) == nil)
        #expect(mount.activity.installSave(save) === save)
        try fixture.replaceBehind("doc", with: Array("theirs".utf8))
        #expect(!mount.followReplacement(of: node, in: mount.nodes.root, named: "doc"), "this host's save decides what the file becomes")
        #expect(node.identity == before)
        #expect(save.removeWriter())
        mount.activity.endSave(save)
        #expect(mount.followReplacement(of: node, in: mount.nodes.root, named: "doc"))
        #expect(node.identity != before)
    }
}
