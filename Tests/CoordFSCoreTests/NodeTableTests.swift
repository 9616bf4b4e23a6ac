import Glibc
import Testing
@testable import CoordFSCore

/// The node table against a real scratch directory (no mount): ids, lookup counts, hard
/// links sharing a node, paths after moves and unlinks, and eviction on forget.
@Suite struct NodeTableTests {
    let scratch: String
    /// Removes the folder when the test's instance goes (one was left in /tmp per test before).
    let removal: FolderRemoval

    /// Sendable (one constant), so the suite's tasks may capture the suite.
    final class FolderRemoval: Sendable {
        let path: String
        init(_ path: String) { self.path = path }
        deinit { _ = system("rm -rf '\(path)'") }
    }

    init() throws {
        var template = Array("/tmp/coordfs-nodes-XXXXXX".utf8CString)
        let path = try #require(template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) })
        scratch = String(cString: path)
        removal = FolderRemoval(scratch)
    }

    func makeTable() throws -> NodeTable {
        try NodeTable(root: try Syscall.openAt(AT_FDCWD, scratch, Linux.O_PATH | O_DIRECTORY))
    }

    /// What the FUSE layer does on lookup: open O_PATH, stat, register.
    func lookUp(_ table: NodeTable, _ parent: Node, _ name: FileName) throws -> Node {
        let descriptor = try Syscall.openAt(parent.directory, name, Linux.O_PATH | O_NOFOLLOW)
        let status = try Syscall.statOfPathDescriptor(descriptor.raw)
        return table.lookUp(status, descriptor: descriptor, parent: parent, name: name)
    }

    func run(_ command: String) {
        #expect(system("cd \(scratch) && \(command)") == 0)
    }

    @Test func rootIsIdOneAndLivesForever() throws {
        let table = try makeTable()
        #expect(table.root.id == NodeTable.rootID)
        table.forget(NodeTable.rootID, count: 100)
        #expect(table.node(NodeTable.rootID) != nil)
        #expect(table.path(of: table.root) == .root)
    }

    @Test func nodesAreFoundByPathIdentityAndName() throws {
        run("mkdir -p d/e && echo x > d/e/f && ln d/e/f d/g")
        let table = try makeTable()
        let directory = try lookUp(table, table.root, "d")
        let inner = try lookUp(table, directory, "e")
        let file = try lookUp(table, inner, "f")
        #expect(table.node(at: .root) === table.root)
        #expect(table.node(at: try #require(MountPath("/d/e/f"))) === file)
        #expect(table.node(at: try #require(MountPath("/d/g"))) == nil) // never looked up by that name
        #expect(table.node(identity: file.identity) === file)
        let named = table.namedNodes()
        #expect(named.count == 3)
        #expect(named.contains { $0.node === file && $0.directory === inner && $0.name == "f" })
        // Moved behind the tree's back and told: found at its new path only.
        run("mv d/e d/moved")
        table.moved(inner, to: directory, name: "moved")
        #expect(table.node(at: try #require(MountPath("/d/moved/f"))) === file)
        #expect(table.node(at: try #require(MountPath("/d/e/f"))) == nil)
    }

    @Test func lookupsCountAndForgetEvicts() throws {
        run("mkdir d && echo x > d/f")
        let table = try makeTable()
        let directory = try lookUp(table, table.root, "d")
        let file = try lookUp(table, directory, "f")
        let again = try lookUp(table, directory, "f")
        #expect(file === again)
        #expect(table.lookupCount(of: file.id) == 2)
        #expect(table.count == 3)
        #expect(table.path(of: file)?.description == "/d/f")
        table.forget(file.id, count: 1)
        #expect(table.node(file.id) != nil)
        table.forget(file.id, count: 1)
        #expect(table.node(file.id) == nil)
        table.forget(directory.id, count: 1)
        #expect(table.count == 1)
    }

    @Test func hardLinksShareANode() throws {
        run("echo x > a && ln a b")
        let table = try makeTable()
        let a = try lookUp(table, table.root, "a")
        let b = try lookUp(table, table.root, "b")
        #expect(a === b)
        #expect(table.lookupCount(of: a.id) == 2)
        #expect(table.path(of: a)?.description == "/b", "the last name it was reached by")
    }

    @Test func existingLookupSkipsTheOpen() throws {
        run("echo x > a")
        let table = try makeTable()
        let a = try lookUp(table, table.root, "a")
        let status = try Syscall.stat(at: table.root.directory, "a")
        #expect(table.lookUpExisting(FileIdentity(status), parent: table.root, name: "a") === a)
        #expect(table.lookupCount(of: a.id) == 2)
    }

    @Test func movesAndUnlinksUpdatePaths() throws {
        run("mkdir d e && echo x > d/f")
        let table = try makeTable()
        let d = try lookUp(table, table.root, "d")
        let e = try lookUp(table, table.root, "e")
        let f = try lookUp(table, d, "f")
        run("mv d/f e/g")
        table.moved(f.identity, to: e, name: "g")
        #expect(table.path(of: f)?.description == "/e/g")
        run("mv e renamed")
        table.moved(e.identity, to: table.root, name: "renamed")
        #expect(table.path(of: f)?.description == "/renamed/g", "children follow a moved directory")
        run("rm renamed/g")
        #expect(table.removedName("g", in: e) === f)
        #expect(table.path(of: f) == nil)
        #expect(table.isUnlinked(f))
        #expect(table.node(f.id) != nil, "an unlinked node lives while the kernel holds it")
        #expect(table.removedName("g", in: e) == nil, "a name is removed once")
    }

    @Test func namesFindTheNodesTheKernelKnows() throws {
        run("mkdir d && echo x > d/f && echo y > d/g")
        let table = try makeTable()
        let d = try lookUp(table, table.root, "d")
        let f = try lookUp(table, d, "f")
        let g = try lookUp(table, d, "g")
        #expect(table.node(named: "d", in: table.root) === d)
        #expect(table.node(named: "f", in: d) === f)
        #expect(table.node(named: "h", in: d) == nil)
        // An exchange: each node takes the other's name.
        table.moved(g, to: d, name: "f")
        table.moved(f, to: d, name: "g")
        #expect(table.node(named: "f", in: d) === g)
        #expect(table.node(named: "g", in: d) === f)
        #expect(table.path(of: f)?.description == "/d/g")
        // A forgotten node leaves its name.
        table.forget(f.id, count: 1)
        #expect(table.node(named: "g", in: d) == nil)
        #expect(table.node(named: "f", in: d) === g)
    }

    @Test func aRemovedNameOfAHardLinkedFileKeepsItsPath() throws {
        run("echo x > a && ln a b")
        let table = try makeTable()
        let a = try lookUp(table, table.root, "a")
        run("rm a")
        #expect(table.removedName("a", in: table.root) === a)
        #expect(!table.isUnlinked(a), "b is still a name of it")
        #expect(table.path(of: a)?.description == "/a", "it keeps its last name until the kernel looks b up")
        #expect(try lookUp(table, table.root, "b") === a)
        #expect(table.path(of: a)?.description == "/b")
        run("rm b")
        #expect(table.removedName("b", in: table.root) === a)
        #expect(table.location(of: a) == nil)
    }

    /// A file reached by two names keeps both: when the one it is known by goes (an unlink, a
    /// rename over it, a new file put there), the other stands in, so that a save through a
    /// kernel entry that still names the file commits there and not to the name that went
    /// (found by SyscallParityTests' random walk: a save of `b` committed to `x/d`).
    @Test func aHardLinkedFileKeepsItsOtherNames() throws {
        run("echo x > a && mkdir x && ln a x/d && echo y > e")
        let table = try makeTable()
        let a = try lookUp(table, table.root, "a")
        let x = try lookUp(table, table.root, "x")
        #expect(try lookUp(table, x, "d") === a)
        #expect(table.path(of: a)?.description == "/x/d")
        // Another file renamed over x/d: a is known by /a again, at once.
        run("mv e x/d")
        #expect(table.removedName("d", in: x) === a)
        #expect(table.path(of: a)?.description == "/a")
        #expect(!table.isUnlinked(a))

        // A new node given the name a file was known by: the file falls back to its other name.
        run("ln a x/d2")
        #expect(try lookUp(table, x, "d2") === a)
        #expect(table.path(of: a)?.description == "/x/d2")
        run("mv x/d x/d2")  // the file from e takes x/d2 from a
        let fromE = try lookUp(table, x, "d2")
        #expect(fromE !== a)
        #expect(table.path(of: a)?.description == "/a")
        #expect(table.node(named: "d2", in: x) === fromE)

        // A rename of the other name moves that one; the name it is known by stays.
        run("ln a x/d3")
        #expect(try lookUp(table, x, "d3") === a)
        run("mv a x/moved")
        table.moved(a, from: (table.root, "a"), to: x, name: "moved")
        #expect(table.path(of: a)?.description == "/x/moved")
        #expect(table.removedName("d3", in: x) === a)
        #expect(table.path(of: a)?.description == "/x/moved", "the moved name stands in")
        // Forgotten: none of its names lead to it any more.
        table.forget(a.id, count: table.lookupCount(of: a.id) ?? 0)
        #expect(table.node(named: "moved", in: x) == nil && table.node(named: "d3", in: x) == nil && table.node(named: "a", in: table.root) == nil)
    }

    /// A file replaced behind the table (a rename over its name) leaves its node unlinked, yet
    /// the kernel may still reach the node by the name: the node remembers it, until the name
    /// is known again (by another node or by this one).
    @Test func aNameLostBehindIsRemembered() throws {
        run("echo old > f && echo gone > g")
        let table = try makeTable()
        let f = try lookUp(table, table.root, "f")
        let g = try lookUp(table, table.root, "g")
        run("echo new > f.new && mv f.new f && rm g")
        #expect(table.removedNameBehind("f", in: table.root) === f)
        #expect(table.removedName("g", in: table.root) === g)
        #expect(table.path(of: f) == nil, "unlinked: the old file has no name")
        #expect(table.lostNameBehind(f) && !table.lostNameBehind(g))
        #expect(table.formerName(of: f) == .free(MountPath("/f")!))
        #expect(table.formerName(of: g) == nil, "a name removed through the mount is not remembered")
        let new = try lookUp(table, table.root, "f")
        #expect(new !== f)
        #expect(table.formerName(of: f) == .taken(directory: table.root, name: "f"), "another node is known by the name now")
        table.moved(f, to: table.root, name: "h")
        #expect(!table.lostNameBehind(f), "named again")
    }

    @Test func aRemovedDirectoryLosesItsPath() throws {
        run("mkdir d")
        let table = try makeTable()
        let d = try lookUp(table, table.root, "d")
        run("rmdir d")
        #expect(table.removedName("d", in: table.root) === d)
        #expect(table.path(of: d) == nil)
        #expect(table.evictionCandidates(limit: 10).isEmpty)
    }

    @Test func aRemovedNameOfALiveDirectoryKeepsItsPath() throws {
        // The backing changed behind the table: the name now stands for another directory.
        run("mkdir d && mkdir d/sub")
        let table = try makeTable()
        let d = try lookUp(table, table.root, "d")
        let sub = try lookUp(table, d, "sub")
        run("mv d moved && mkdir d && rmdir d")
        #expect(table.removedName("d", in: table.root) === d)
        #expect(!table.isUnlinked(d), "d lives on as moved")
        #expect(table.path(of: sub)?.description == "/d/sub")
    }

    @Test func replacedBackingKeepsTheNodeAndMovesTheIdentity() throws {
        run("echo old > f && echo new > staged")
        let table = try makeTable()
        let f = try lookUp(table, table.root, "f")
        let oldIdentity = f.identity
        run("mv staged f")
        let descriptor = try Syscall.openAt(table.root.directory, "f", Linux.O_PATH | O_NOFOLLOW)
        let newIdentity = FileIdentity(try Syscall.statOfPathDescriptor(descriptor.raw))
        let held = f.backing // a use in flight keeps the old object open
        table.replaceBacking(of: f, with: descriptor, identity: newIdentity)
        #expect(f.identity == newIdentity)
        #expect(table.lookUpExisting(newIdentity, parent: table.root, name: "f") === f)
        #expect(table.lookUpExisting(oldIdentity, parent: table.root, name: "f") == nil)
        #expect(fcntl(held.descriptor.raw, F_GETFD) >= 0, "the old descriptor lives while it is in use")
    }

    /// A follower that found the next version only goes on from the version it saw: once
    /// the node moved on (a commit of this host replaced it again), the follower's find is
    /// stale and the node keeps what it stands for.
    @Test func aFollowerOvertakenByACommitLeavesTheNodeAsItIs() throws {
        run("echo v1 > f && echo v2 > second && echo v3 > third")
        let table = try makeTable()
        let f = try lookUp(table, table.root, "f")
        let first = f.identity
        func pathDescriptor() throws -> OwnedDescriptor {
            try Syscall.openAt(table.root.directory, "f", Linux.O_PATH | O_NOFOLLOW)
        }
        func identity(_ descriptor: borrowing OwnedDescriptor) throws -> FileIdentity {
            FileIdentity(try Syscall.statOfPathDescriptor(descriptor.raw))
        }
        // Another host's commit: v2 under the name, found by a follower that then stalls.
        run("mv second f")
        let found = try pathDescriptor()
        let foundIdentity = try identity(found)
        // Meanwhile this host follows too, and commits v3 through the node.
        let followed = table.follow(f, from: first, to: try pathDescriptor(), identity: foundIdentity)
        #expect(followed)
        run("mv third f")
        let committed = try pathDescriptor()
        let committedIdentity = try identity(committed)
        table.replaceBacking(of: f, with: committed, identity: committedIdentity)
        // The stalled follower goes on from v1: the node has moved on, and stays at v3.
        let stale = table.follow(f, from: first, to: found, identity: foundIdentity)
        #expect(!stale)
        #expect(f.identity == committedIdentity)
        #expect(table.node(identity: committedIdentity) === f)
        #expect(table.node(identity: foundIdentity) == nil)
    }

    @Test func evictionPrefersFilesAndNeverTheRoot() throws {
        run("mkdir d && echo x > d/f && echo y > g")
        let table = try makeTable()
        let d = try lookUp(table, table.root, "d")
        _ = try lookUp(table, d, "f")
        _ = try lookUp(table, table.root, "g")
        let two = table.evictionCandidates(limit: 2)
        #expect(Set(two.map(\.name)) == ["f", "g"])
        let all = table.evictionCandidates(limit: 10)
        #expect(all.map(\.name).last == "d")
        #expect(all.count == 3)
        #expect(!all.contains { $0.parent == 0 })
    }

    @Test func concurrentLookupsOfOneFileMakeOneNode() async throws {
        run("echo x > shared")
        let table = try makeTable()
        let root = table.root
        let ids = await withTaskGroup(of: UInt64.self) { group in
            for _ in 0..<64 {
                group.addTask { (try? lookUp(table, root, "shared").id) ?? 0 }
            }
            return await group.reduce(into: Set<UInt64>()) { $0.insert($1) }
        }
        #expect(ids.count == 1)
        #expect(table.lookupCount(of: try #require(ids.first)) == 64)
        #expect(table.count == 2)
    }
}

/// A node shows one inode number for its life, whatever file backs it after commits, and no
/// two live nodes show the same number (a replaced file's number is free for the backing to
/// hand out again).
extension NodeTableTests {
    @Test func aNodeKeepsItsNumberAndNoTwoNodesShareOne() throws {
        run("echo one > f && echo two > g")
        let table = try makeTable()
        let file = try lookUp(table, table.root, "f")
        let original = file.shownInode
        #expect(original == file.identity.inode)
        #expect(table.shownInode(of: file.identity) == original)
        // A commit puts g's file behind f's node: the node still shows f's number, and g's
        // file (its real number) is listed as the node's.
        let replacement = try Syscall.openAt(table.root.directory, "g", Linux.O_PATH | O_NOFOLLOW)
        let replacementIdentity = FileIdentity(try Syscall.statOfPathDescriptor(replacement.raw))
        table.replaceBacking(of: file, with: replacement, identity: replacementIdentity)
        #expect(file.shownInode == original)
        #expect(table.shownInode(of: replacementIdentity) == original)
        // The backing hands f's old number to a new file (simulated: an identity with that
        // number): its node, and a listing before the node exists, show another number.
        let reused = FileIdentity(device: file.identity.device, inode: original)
        let listed = table.shownInode(of: reused)
        #expect(listed != original)
        run("echo three > h")
        let other = try lookUp(table, table.root, "h")
        #expect(other.shownInode != original)
        // Forgotten, the node's number is free again.
        table.forget(file.id, count: 1)
        #expect(table.shownInode(of: reused) == original)
    }
}
