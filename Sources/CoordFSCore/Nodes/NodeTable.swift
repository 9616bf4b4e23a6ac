import Glibc
import Synchronization
import SystemPackage

/// The backing object a node stands for right now, with its identity.
///
/// A commit renames a staged temp file over a file, so the object behind a file's node can
/// change while the node (and the inode the kernel shows) stays. Each use holds a reference
/// to the backing for its duration: the old descriptor closes only after its last use.
/// Sendable: immutable.
public final class NodeBacking: Sendable {
    /// `O_PATH | O_NOFOLLOW` descriptor of the backing object.
    public let descriptor: OwnedDescriptor
    public let identity: FileIdentity

    init(descriptor: consuming OwnedDescriptor, identity: FileIdentity) {
        self.descriptor = descriptor
        self.identity = identity
    }
}

/// One object the kernel knows by a node id: a file, directory, symlink or special file.
///
/// The node holds an `O_PATH` descriptor of the backing object, so it stays reachable when it
/// is renamed or unlinked while open, and operations on it never rebuild a path string.
/// Sendable: `id` and `fileType` never change; the backing is swapped under its own lock;
/// the rest is guarded by the owning `NodeTable`'s lock and only read or written inside it.
public final class Node: @unchecked Sendable {
    public let id: UInt64
    /// The inode number programs see for the node, for its whole life: the backing's when the
    /// node was made. A commit gives the node another backing file, but on a plain disk the
    /// file saved is the same file (stat, the kernel's lock lists, hard-link checks), so the number stays.
    public let shownInode: UInt64
    /// `st_mode & S_IFMT` of the backing object; a node never changes type.
    public let fileType: mode_t
    /// The descriptor of a directory node: directories are never replaced by commits, so it
    /// stays valid for as long as the node lives. Only meaningful when `isDirectory`.
    public let directory: Int32
    /// Guards which backing object the node stands for (replaced only by commits of files).
    /// Lock order 4 (Docs/LOCKING.md): the last; nothing is taken while it is held.
    private let current: Mutex<NodeBacking>

    // Guarded by NodeTable.state.
    fileprivate var lookupCount: UInt64
    fileprivate var parent: Node?
    fileprivate var name: FileName
    /// Names a file was reached by before `parent`/`name` that may still name it (hard links):
    /// when its current name goes, the newest of them that no other node took becomes its
    /// name, so that a save through a link the kernel still has an entry for commits there,
    /// not to the name that went. Empty for directories and for nearly every file.
    fileprivate var otherNames: [(parent: Node, name: FileName)] = []
    fileprivate var isUnlinked = false
    /// The name went away behind the mount (a change made in the backing, or another host's
    /// commit), not through it: the kernel may still reach the node by that name until it
    /// has dropped its entry, so an open that comes through it is about the name
    /// (`formerPath(of:)`), not about an unlinked file.
    fileprivate var lostNameBehind = false
    /// Counts changes of the node's name (moves, lookups, removals), so that a link count read
    /// outside the lock is applied only if no change came in between.
    fileprivate var nameChanges: UInt64 = 0
    /// Set (under NodeTable.state) when the name the node was known by went away and whether it
    /// has others is not known yet; an atomic so that asking for a path costs no extra lock
    /// when it is clear, as it almost always is (see `NodeTable.settleLinks`).
    fileprivate let linksUnknown = Atomic<Bool>(false)
    /// Set when the version store took the file's last name (`removedLastName`): the store's
    /// link is not one of the file's names, and its link count is shown without it.
    public let keptAfterLastName = Atomic<Bool>(false)
    /// Whether the file had a set-id bit when its attributes last went to the kernel (every
    /// reply about a node passes `noteMode`, and a program meets a file's attributes before it
    /// can write it): a change of its data then applies the set-id rule (`SetIDRule`), and the
    /// changes of every other file skip the stat that would take.
    private let setIDSeen = Atomic<Bool>(false)

    /// See `setIDSeen`.
    public var mayCarrySetIDBits: Bool { setIDSeen.load(ordering: .relaxed) }

    /// Notes the mode the kernel is told, for `mayCarrySetIDBits`.
    @inline(__always)
    public func noteMode(_ mode: mode_t) {
        let carries = mode & (S_ISUID | S_ISGID) != 0
        if carries != setIDSeen.load(ordering: .relaxed) { setIDSeen.store(carries, ordering: .relaxed) }
    }

    fileprivate init(id: UInt64, identity: FileIdentity, shownInode: UInt64, fileType: mode_t, descriptor: consuming OwnedDescriptor,
                     parent: Node?, name: FileName, lookupCount: UInt64) {
        self.id = id
        self.shownInode = shownInode
        self.fileType = fileType
        self.directory = fileType == S_IFDIR ? descriptor.raw : -1
        self.current = Mutex(NodeBacking(descriptor: descriptor, identity: identity))
        self.parent = parent
        self.name = name
        self.lookupCount = lookupCount
    }

    public var isDirectory: Bool { fileType == S_IFDIR }
    public var isSymlink: Bool { fileType == S_IFLNK }
    public var isRegularFile: Bool { fileType == S_IFREG }

    /// The backing object now; hold the reference for as long as its descriptor is used.
    public var backing: NodeBacking { current.withLock { $0 } }

    public var identity: FileIdentity { backing.identity }

    /// Runs `body` with the raw descriptor of the current backing object, kept open throughout.
    @inline(__always)
    public func withDescriptor<R: ~Copyable, E: Error>(_ body: (Int32) throws(E) -> R) throws(E) -> R {
        let backing = self.backing
        return try withExtendedLifetime(backing) { () throws(E) -> R in try body(backing.descriptor.raw) }
    }

    fileprivate func replaceBacking(with backing: NodeBacking) {
        current.withLock { $0 = backing }
    }
}

/// Maps the node ids the kernel holds to backing objects and their place in the tree.
///
/// Invariants, all kept under one lock:
/// - a node lives while the kernel holds a lookup on it (the root always lives);
/// - one node per backing identity, so hard links share a node as they share an inode;
/// - each node knows one parent and name (the one it was last reached by), from which its
///   mount path is derived for the claim table; a file also remembers the other names it was
///   reached by, which stand in when that one goes (`Node.otherNames`).
public final class NodeTable: Sendable {
    /// The kernel's id for the mount's root directory.
    public static let rootID: UInt64 = 1

    private struct State {
        var byID: [UInt64: Node] = [:]
        var byIdentity: [FileIdentity: Node] = [:]
        /// Each live, linked node under the name it was last reached by: what a removal or a
        /// rename of a name is about, without a stat of the backing.
        var byName: [NameKey: Node] = [:]
        var nextID: UInt64 = NodeTable.rootID + 1
        /// The live nodes whose shown inode number is not their backing's (a commit replaced
        /// their file, or their own number was taken), by that number: a new node whose backing
        /// has the number must show another, or two files would pass for one.
        var shownApart: [UInt64: Node] = [:]

        /// The number a new node for `identity` shows: the backing's, unless a node shows it
        /// already (`NodeTable.substitute`).
        func numberForNewNode(_ identity: FileIdentity) -> UInt64 {
            var number = identity.inode
            var attempt: UInt64 = 1
            while shownApart[number] != nil || (number != identity.inode && byIdentity[FileIdentity(device: identity.device, inode: number)] != nil) {
                number = NodeTable.substitute(for: identity.inode, attempt: attempt)
                attempt += 1
            }
            return number
        }

        /// Keeps `shownApart` in step with the node's backing.
        mutating func noteShownNumber(of node: Node, backing: FileIdentity) {
            if node.shownInode == backing.inode {
                if shownApart[node.shownInode] === node { shownApart[node.shownInode] = nil }
            } else {
                shownApart[node.shownInode] = node
            }
        }

        /// Gives `node` a new place (nil parent: none), keeping `byName` in step. `keepingOldName`:
        /// the node was reached by another name (a lookup), and a file's old name may still be
        /// one of its links; otherwise the old name went (a rename, the node's end).
        mutating func place(_ node: Node, parent: Node?, name: FileName, keepingOldName: Bool = false) {
            if keepingOldName, !node.isDirectory, let oldParent = node.parent, !node.isUnlinked,
               oldParent !== parent || node.name != name {
                node.otherNames.removeAll { $0.parent === oldParent && $0.name == node.name }
                node.otherNames.append((oldParent, node.name))
                if node.otherNames.count > NodeTable.otherNamesKept { forgetOtherName(of: node, at: 0) }
            } else {
                unname(node)
            }
            if let parent, !node.otherNames.isEmpty {
                node.otherNames.removeAll { $0.parent === parent && $0.name == name }
            }
            if parent == nil { forgetOtherNames(of: node) }
            node.parent = parent
            node.name = name
            node.isUnlinked = false
            node.keptAfterLastName.store(false, ordering: .relaxed)
            node.lostNameBehind = false
            node.nameChanges &+= 1
            node.linksUnknown.store(false, ordering: .relaxed)
            if let parent { giveName(NameKey(parent: parent.id, name: name), to: node) }
        }

        /// Points `key` at `node`. A file known by that name until now lost it (a rename over
        /// it, or a lookup that found another file there): another of its names stands in.
        mutating func giveName(_ key: NameKey, to node: Node) {
            if let previous = byName[key], previous !== node { _ = removeName(key, of: previous) }
            byName[key] = node
        }

        /// Takes `node` out of `byName`; its parent and name stay as they were.
        mutating func unname(_ node: Node) {
            guard let parent = node.parent else { return }
            let key = NameKey(parent: parent.id, name: node.name)
            if byName[key] === node { byName[key] = nil }
        }

        /// The name `key` of `node` went. When it was the node's current name and another
        /// name the node was reached by still points at it, that one becomes current (true).
        /// Otherwise the node keeps its parent and name, out of `byName`.
        mutating func removeName(_ key: NameKey, of node: Node) -> Bool {
            if let index = node.otherNames.firstIndex(where: { $0.parent.id == key.parent && $0.name == key.name }) {
                forgetOtherName(of: node, at: index)
                return true
            }
            unname(node)
            while let (parent, name) = node.otherNames.popLast() {
                guard byName[NameKey(parent: parent.id, name: name)] === node else { continue }
                node.parent = parent
                node.name = name
                return true
            }
            return false
        }

        /// A rename of `source` (or of the node's current name, when nil) to `parent`/`name`.
        mutating func move(_ node: Node, from source: (directory: Node, name: FileName)?, to parent: Node, name: FileName) {
            if let source, let index = node.otherNames.firstIndex(where: { $0.parent === source.directory && $0.name == source.name }) {
                forgetOtherName(of: node, at: index)
                place(node, parent: parent, name: name, keepingOldName: true)
            } else {
                place(node, parent: parent, name: name)
            }
        }

        mutating func forgetOtherName(of node: Node, at index: Int) {
            let (parent, name) = node.otherNames.remove(at: index)
            let key = NameKey(parent: parent.id, name: name)
            if byName[key] === node { byName[key] = nil }
        }

        mutating func forgetOtherNames(of node: Node) {
            while !node.otherNames.isEmpty { forgetOtherName(of: node, at: node.otherNames.count - 1) }
        }
    }

    private struct NameKey: Hashable {
        let parent: UInt64
        let name: FileName
    }

    /// At most this many earlier names per file (`Node.otherNames`): a file with more links
    /// than that falls back to the rule for one name (the next lookup names it afresh).
    static let otherNamesKept = 8

    /// Another number for inode `number` when a live node shows it already: the high byte
    /// changed, far above what filesystems hand out, so it meets no real inode in practice.
    static func substitute(for number: UInt64, attempt: UInt64) -> UInt64 {
        number ^ ((attempt & 0xFF) << 56)
    }

    public let root: Node
    /// Live nodes shown under a number other than their backing's (see `State.shownApart`);
    /// lets listings skip the lock while there are none.
    private let shownApartCount = Atomic<Int>(0)
    /// Guards every node's lookup count, parent, name and unlinked flag, and the maps. Lock
    /// order 3 (Docs/LOCKING.md): while held, only nodes' backing locks may be taken; never
    /// held across a system call (link counts are read outside it, see `settleLinks`).
    private let state: Mutex<State>

    /// Creates the table around the backing root, given as an `O_PATH` descriptor.
    public init(root descriptor: consuming OwnedDescriptor) throws(Errno) {
        let status = try Syscall.statOfPathDescriptor(descriptor.raw)
        let root = Node(id: NodeTable.rootID, identity: FileIdentity(status), shownInode: UInt64(status.st_ino), fileType: status.st_mode & S_IFMT,
                        descriptor: descriptor, parent: nil, name: .empty, lookupCount: 1)
        self.root = root
        var initial = State()
        initial.byID[root.id] = root
        initial.byIdentity[root.identity] = root
        self.state = Mutex(initial)
    }

    public func node(_ id: UInt64) -> Node? {
        state.withLock { $0.byID[id] }
    }

    public var count: Int {
        state.withLock { $0.byID.count }
    }

    /// Returns the live node for `identity` after counting one more kernel lookup of it by
    /// `parent`/`name`, or nil when no node has that identity yet.
    public func lookUpExisting(_ identity: FileIdentity, parent: Node, name: FileName) -> Node? {
        state.withLock { state in
            guard let node = state.byIdentity[identity] else { return nil }
            Self.countLookup(node, parent: parent, name: name, in: &state)
            return node
        }
    }

    /// The inode number a listing shows for the entry whose backing object is `identity`: its
    /// node's when it has one, so that a listing and a stat agree (`Node.shownInode`); a number
    /// no node shows otherwise.
    public func shownInode(of identity: FileIdentity) -> UInt64 {
        guard shownApartCount.load(ordering: .relaxed) > 0 else { return identity.inode }
        return state.withLock { state in
            if let node = state.byIdentity[identity] { return node.shownInode }
            return state.numberForNewNode(identity)
        }
    }

    /// The live node standing for `identity`, if any (counting no lookup).
    public func node(identity: FileIdentity) -> Node? {
        state.withLock { $0.byIdentity[identity] }
    }

    /// The node last reached as `parent`/`name`, if it is still known by that name. The kernel
    /// looks a name up before it removes or renames it, so this is what such a request is about.
    public func node(named name: FileName, in parent: Node) -> Node? {
        state.withLock { $0.byName[NameKey(parent: parent.id, name: name)] }
    }

    /// The node known by `path`, found name by name from the root; nil when the kernel has not
    /// looked some component up (then it caches nothing under it either).
    public func node(at path: MountPath) -> Node? {
        state.withLock { state in
            var current = root
            for component in path.components {
                guard let next = state.byName[NameKey(parent: current.id, name: component)] else { return nil }
                current = next
            }
            return current
        }
    }

    /// Every node the kernel knows under a name: what to check after the watch of the backing
    /// lost track of changes.
    public func namedNodes() -> [(node: Node, directory: Node, name: FileName)] {
        state.withLock { state in
            state.byName.compactMap { key, node in state.byID[key.parent].map { (node, $0, key.name) } }
        }
    }

    /// Records a kernel lookup of the object behind `descriptor`, reached as `parent`/`name`.
    /// When another thread registered the same identity first, that node wins and `descriptor` is closed.
    public func lookUp(_ status: stat, descriptor: consuming OwnedDescriptor, parent: Node, name: FileName) -> Node {
        let identity = FileIdentity(status)
        // Taken inside the lock when a new node needs it; otherwise closed on return, outside the lock.
        var incoming: OwnedDescriptor? = consume descriptor
        return state.withLock { state in
            if let existing = state.byIdentity[identity] {
                Self.countLookup(existing, parent: parent, name: name, in: &state)
                return existing
            }
            let node = Node(id: state.nextID, identity: identity, shownInode: state.numberForNewNode(identity), fileType: status.st_mode & S_IFMT,
                            descriptor: incoming.take()!, parent: parent, name: name, lookupCount: 1)
            state.nextID += 1
            state.byID[node.id] = node
            state.byIdentity[identity] = node
            state.noteShownNumber(of: node, backing: identity)
            shownApartCount.store(state.shownApart.count, ordering: .relaxed)
            state.giveName(NameKey(parent: parent.id, name: name), to: node)
            return node
        }
    }

    private static func countLookup(_ node: Node, parent: Node, name: FileName, in state: inout State) {
        node.lookupCount += 1
        if node.id != NodeTable.rootID { state.place(node, parent: parent, name: name, keepingOldName: true) }
    }

    /// Drops `count` kernel lookups; the node goes once none are left (its descriptor closes).
    /// Returns true when the node left the table (the kernel no longer knows it).
    @discardableResult
    public func forget(_ id: UInt64, count: UInt64) -> Bool {
        let dropped: Node? = state.withLock { state in
            guard id != NodeTable.rootID, let node = state.byID[id] else { return nil }
            node.lookupCount = node.lookupCount > count ? node.lookupCount - count : 0
            guard node.lookupCount == 0 else { return nil }
            state.byID[id] = nil
            if state.byIdentity[node.identity] === node { state.byIdentity[node.identity] = nil }
            if state.shownApart[node.shownInode] === node {
                state.shownApart[node.shownInode] = nil
                shownApartCount.store(state.shownApart.count, ordering: .relaxed)
            }
            state.place(node, parent: nil, name: .empty)
            return node
        }
        return dropped != nil // released (and its descriptor closed) outside the lock
    }

    /// Points `node` at a new backing object (a commit renamed a staged file over it), so the
    /// kernel's inode, its cached pages' owner and the locks on it carry on across the commit.
    /// Returns the previous backing: its descriptor may be the last one on the replaced file,
    /// and closing that frees the file's blocks, which the caller may rather do later.
    @discardableResult
    public func replaceBacking(of node: Node, with descriptor: consuming OwnedDescriptor, identity: FileIdentity) -> NodeBacking {
        swapBacking(of: node, to: NodeBacking(descriptor: descriptor, identity: identity), ifStandingFor: nil)!
    }

    /// `replaceBacking` for a node that follows a file someone else put under its name (another
    /// host's commit, seen by a report or a check): only while the node still stands for
    /// `previous`, the file it stood for before the caller found the new one. A follower that
    /// found the new file and was then overtaken (this host committed again through the node,
    /// or another follower went first) must not set the node back to a version since replaced:
    /// a writer whose save opened that version would build on stale contents. False when the
    /// node had moved on (`descriptor` is closed on return, outside the lock).
    public func follow(_ node: Node, from previous: FileIdentity, to descriptor: consuming OwnedDescriptor,
                       identity: FileIdentity) -> Bool {
        // The replaced backing is let go of on return, outside the lock (its descriptor may be the file's last).
        swapBacking(of: node, to: NodeBacking(descriptor: descriptor, identity: identity), ifStandingFor: previous) != nil
    }

    /// Swaps the node's backing and its entry by identity, unless `expected` is given and the
    /// node stands for another file; returns the previous backing when it swapped.
    private func swapBacking(of node: Node, to backing: NodeBacking, ifStandingFor expected: FileIdentity?) -> NodeBacking? {
        state.withLock { state in
            let previous = node.backing
            if let expected, previous.identity != expected { return nil }
            if state.byIdentity[previous.identity] === node { state.byIdentity[previous.identity] = nil }
            if state.byID[node.id] === node {
                state.byIdentity[backing.identity] = node
                state.noteShownNumber(of: node, backing: backing.identity)
                shownApartCount.store(state.shownApart.count, ordering: .relaxed)
            }
            node.replaceBacking(with: backing)
            return previous
        }
    }

    /// Notes that `identity` now lives at `parent`/`name` (after a rename through the mount).
    /// `source`: the name that moved, when known; when it is one of a file's other names (a
    /// hard link), the name the node is known by stays one of its names.
    @discardableResult
    public func moved(_ identity: FileIdentity, from source: (directory: Node, name: FileName)? = nil, to parent: Node, name: FileName) -> Node? {
        state.withLock { state in
            guard let node = state.byIdentity[identity], node.id != NodeTable.rootID else { return nil }
            state.move(node, from: source, to: parent, name: name)
            return node
        }
    }

    /// Notes that `node` now lives at `parent`/`name` (after a rename through the mount).
    public func moved(_ node: Node, from source: (directory: Node, name: FileName)? = nil, to parent: Node, name: FileName) {
        guard node.id != NodeTable.rootID else { return }
        state.withLock { state in
            if state.byID[node.id] === node { state.move(node, from: source, to: parent, name: name) }
        }
    }

    /// Notes that the name `parent`/`name` is gone from the backing, and returns the node that
    /// was known by it. Whether it has other names (then it keeps its path) or none (then it is
    /// unlinked, and lives on while open) is left for `isUnlinked` or the next `path(of:)` to
    /// find out: most removed files are never asked about again, so a removal costs no stat.
    @discardableResult
    public func removedName(_ name: FileName, in parent: Node) -> Node? {
        removeName(name, in: parent, behindTheMount: false)
    }

    /// Like `removedName`, for a name known to be the object's last (the version store took
    /// it, keeping the file alive by a link of its own): the node is unlinked at once.
    @discardableResult
    public func removedLastName(_ name: FileName, in parent: Node) -> Node? {
        state.withLock { state in
            guard let node = state.byName[NameKey(parent: parent.id, name: name)] else { return nil }
            state.unname(node)
            state.forgetOtherNames(of: node)
            node.nameChanges &+= 1
            node.linksUnknown.store(false, ordering: .relaxed)
            node.isUnlinked = true
            node.keptAfterLastName.store(true, ordering: .relaxed)
            return node
        }
    }

    /// Like `removedName`, for a name that went away behind the mount: the node remembers it
    /// (`formerPath(of:)`).
    @discardableResult
    public func removedNameBehind(_ name: FileName, in parent: Node) -> Node? {
        removeName(name, in: parent, behindTheMount: true)
    }

    private func removeName(_ name: FileName, in parent: Node, behindTheMount: Bool) -> Node? {
        state.withLock { state in
            let key = NameKey(parent: parent.id, name: name)
            guard let node = state.byName[key] else { return nil }
            node.nameChanges &+= 1
            // Known by another of its names: it keeps a name (and whether that one is still
            // there is for the kernel's next lookup, as with any name).
            if state.removeName(key, of: node) { return node }
            if behindTheMount { node.lostNameBehind = true }
            node.linksUnknown.store(true, ordering: .relaxed)
            return node
        }
    }

    /// Whether the node's last name went away behind the mount (and it has not been named since).
    public func lostNameBehind(_ node: Node) -> Bool {
        state.withLock { _ in node.lostNameBehind }
    }

    /// The name a node had when it went away behind the mount (`removedNameBehind`), as the
    /// kernel may still reach the node by it until it drops its entry.
    public enum FormerName: Equatable {
        /// No other node is known by it: an open through the old entry is about the name.
        case free(MountPath)
        /// Another node is known by it now (a lookup found the file that replaced this one):
        /// an open through the old entry must look the name up again, never use this node.
        case taken(directory: Node, name: FileName)

        public static func == (left: FormerName, right: FormerName) -> Bool {
            switch (left, right) {
            case (.free(let a), .free(let b)): a == b
            case (.taken(let a, let x), .taken(let b, let y)): a === b && x == y
            default: false
            }
        }
    }

    /// For a node whose name went away behind the mount and that has not been named since,
    /// that name; nil otherwise (or when its directory is gone from the mount).
    public func formerName(of node: Node) -> FormerName? {
        guard let (directory, name, taken) = state.withLock({ state -> (Node, FileName, Bool)? in
            guard node.lostNameBehind, let parent = node.parent else { return nil }
            let standing = state.byName[NameKey(parent: parent.id, name: node.name)]
            return (parent, node.name, standing != nil && standing !== node)
        }) else { return nil }
        if taken { return .taken(directory: directory, name: name) }
        return path(of: directory).map { .free($0.appending(name)) }
    }

    /// Whether the node has no name left in the backing (it may live on while open).
    public func isUnlinked(_ node: Node) -> Bool {
        settleLinks(of: node)
        return state.withLock { _ in node.isUnlinked }
    }

    /// Finds out whether a node whose name was removed has other names: unlinked when its link
    /// count is 0. Otherwise it keeps the name it had (the kernel looks the others up before
    /// it uses them, which names it afresh). The stat runs outside the lock.
    private func settleLinks(of node: Node) {
        while node.linksUnknown.load(ordering: .relaxed) {
            let (changes, backing) = state.withLock { _ in (node.nameChanges, node.backing) }
            let links = withExtendedLifetime(backing) { try? Syscall.statOfPathDescriptor(backing.descriptor.raw).st_nlink }
            let settled = state.withLock { _ in
                // Only if neither the name (a lookup, a move, another removal) nor the object
                // behind the node (a commit) changed meanwhile; otherwise look again.
                guard node.nameChanges == changes, node.backing === backing else { return false }
                node.linksUnknown.store(false, ordering: .relaxed)
                if links ?? 0 == 0 { node.isUnlinked = true }
                return true
            }
            if settled { return }
        }
    }

    /// The directory and name the node was last reached by, or nil for the root or once unlinked.
    public func location(of node: Node) -> (directory: Node, name: FileName)? {
        settleLinks(of: node)
        return state.withLock { _ in
            guard !node.isUnlinked, let parent = node.parent else { return nil }
            return (parent, node.name)
        }
    }

    /// The node's path from the mount root, or nil once it is unlinked.
    public func path(of node: Node) -> MountPath? {
        settleLinks(of: node)
        return state.withLock { _ in
            var components: [FileName] = []
            var current: Node? = node
            while let step = current, step.id != NodeTable.rootID {
                if step.isUnlinked { return nil }
                components.append(step.name)
                current = step.parent
                if current == nil { return nil }
            }
            components.reverse()
            return MountPath(components: components)
        }
    }

    /// Up to `limit` names whose nodes the kernel could be asked to drop, files and symlinks
    /// first (a directory's entry covers its whole cached subtree), never the root.
    public func evictionCandidates(limit: Int) -> [(parent: UInt64, name: FileName)] {
        state.withLock { state in
            var files: [(parent: UInt64, name: FileName)] = []
            var directories: [(parent: UInt64, name: FileName)] = []
            for node in state.byID.values where node.id != NodeTable.rootID && !node.isUnlinked && !node.linksUnknown.load(ordering: .relaxed) {
                guard let parent = node.parent else { continue }
                if node.isDirectory {
                    if directories.count < limit { directories.append((parent.id, node.name)) }
                } else {
                    files.append((parent.id, node.name))
                    if files.count == limit { break }
                }
            }
            return Array((files + directories).prefix(limit))
        }
    }

    /// The kernel's lookup count of a node (for tests and status).
    public func lookupCount(of id: UInt64) -> UInt64? {
        state.withLock { $0.byID[id]?.lookupCount }
    }
}
