import CFuse
import Dispatch
import Glibc
import Logging
import Synchronization
import CoordFSCore
import SystemPackage

/// The FUSE glue's state: the mount it serves (`CoordinatedMount`, which decides), the
/// kernel's side of the conversation (notifications, node eviction), and what only the
/// translation of requests needs. One instance per mount, reached from a request through
/// libfuse's userdata.
///
/// Sendable: every property is a constant set in `init`; the mount, the notifier and the
/// evictor guard their own state, and the flag the kernel's init sets is atomic.
public final class FileSystem: Sendable {
    /// The mount this glue serves.
    public let mount: CoordinatedMount
    /// The kernel's caches, as the mount tells them (its `kernel`), and the pages the kernel may hold.
    let notifier: KernelNotifier
    /// Keeps the node table within its budget of descriptors.
    let evictor: NodeEvictor
    /// Whether the daemon may give created objects to their callers (it runs as root).
    let canChangeOwners: Bool
    /// Set in FUSE's init when the kernel agreed to leave callers' umasks to us
    /// (FUSE_CAP_DONT_MASK). Relaxed loads suffice: the kernel sends no request before it has
    /// the init's reply, which libfuse sends after the store.
    let masksCreatedModes = Atomic<Bool>(false)
    /// Files whose programs coordinate themselves (locked files, databases): written in place.
    let selfCoordinating: SelfCoordinatingFiles
    /// The claims of the handles writing through each save, for turning a save in place.
    let saveHandles = SaveHandles()
    /// Runs operations whose claims were granted, or whose presenters answered, after a wait,
    /// off the thread that let them go on (a releasing worker, the control socket's loop).
    let claimWork = DispatchQueue(label: "coordfs.claim-work", attributes: .concurrent)
    /// Requests counted and timed per operation; nil unless `options.measuresRequests`.
    let requestMetrics: RequestMetrics?

    /// `notifier` must be the mount's `kernel`; it reaches the kernel once the session is made.
    public init(mount: CoordinatedMount, notifier: KernelNotifier, maxNodes: Int) {
        precondition(mount.kernel as? KernelNotifier === notifier, "the glue notifies the kernel the mount tells")
        self.mount = mount
        self.notifier = notifier
        self.evictor = NodeEvictor(nodes: mount.nodes, notifier: notifier, maxNodes: maxNodes)
        self.canChangeOwners = geteuid() == 0
        self.selfCoordinating = SelfCoordinatingFiles(mount: mount.kernelMount)
        self.requestMetrics = mount.options.measuresRequests ? RequestMetrics() : nil
    }

    // Shorthands for the mount's services the operations use most.
    var nodes: NodeTable { mount.nodes }
    var options: MountOptions { mount.options }
    var logger: Logger { mount.logger }
    var claims: ClaimTable { mount.claims }
    var authority: ClaimAuthority { mount.authority }
    var processes: ProcessFacts { mount.processes }
    var activity: ActivityRegistry { mount.activity }
    var staging: TempStaging { mount.staging }
    var appendJournal: AppendJournal { mount.appendJournal }
    var presenters: PresenterRegistry { mount.presenters }
    var kernelMount: KernelMountIdentity { mount.kernelMount }

    static func from(_ request: fuse_req_t) -> FileSystem {
        Unmanaged<FileSystem>.fromOpaque(fuse_req_userdata(request)).takeUnretainedValue()
    }

    /// Runs the callback of a request of `operation`, counted and timed when the mount measures requests.
    @inline(__always)
    static func serve(_ request: fuse_req_t?, _ operation: FuseOperation, _ callback: (FileSystem, fuse_req_t) -> Void) {
        let request = request!
        let fileSystem = from(request)
        guard let metrics = fileSystem.requestMetrics else { return callback(fileSystem, request) }
        metrics.begin(operation)
        callback(fileSystem, request)
        metrics.end()
    }

    // MARK: Nodes

    /// Node for a kernel id; a stale id (never expected from a correct kernel) is ESTALE.
    @inline(__always)
    func node(_ id: fuse_ino_t) throws(Errno) -> Node {
        guard let node = nodes.node(UInt64(id)) else { throw Errno.staleNFSFileHandle }
        return node
    }

    func lookUp(_ parent: Node, _ name: FileName) throws(Errno) -> fuse_entry_param {
        try name.withCString { (cName) throws(Errno) in try lookUp(parent, cName, name) }
    }

    /// Looks `name` up in `parent` and counts one kernel lookup of the result.
    func lookUp(_ parent: Node, _ name: UnsafePointer<CChar>) throws(Errno) -> fuse_entry_param {
        try lookUp(parent, name, FileName(cString: name))
    }

    /// `lookUp` with the name both as the kernel's C string and as the node table keeps it.
    private func lookUp(_ parent: Node, _ name: UnsafePointer<CChar>, _ fileName: FileName) throws(Errno) -> fuse_entry_param {
        let status = try Syscall.stat(at: parent.directory, name)
        // With other hosts, the node known by the name follows it to the file another host
        // committed there (CoordinatedMount+FollowingNames.swift), rather than a second node standing for it.
        if authority.hosts != nil, let known = nodes.node(named: fileName, in: parent), known.identity != FileIdentity(status) {
            _ = mount.followReplacement(of: known, in: parent, named: fileName)
        }
        if let existing = nodes.lookUpExisting(FileIdentity(status), parent: parent, name: fileName) {
            return entry(existing, status)
        }
        return try adopt(parent, name, fileName)
    }

    /// Looks up what this request has just made at `parent`/`name` (a new file, directory,
    /// node or symlink): no node can stand for it yet, so the probe `lookUp` starts with
    /// would only cost a stat.
    func lookUpMade(_ parent: Node, _ name: FileName) throws(Errno) -> fuse_entry_param {
        try name.withCString { (cName) throws(Errno) in try adopt(parent, cName, name) }
    }

    /// Opens the object at `parent`/`name` and counts a kernel lookup of it: a new node, or the
    /// one another thread registered for the same object first. The stat comes from the opened
    /// descriptor, so the entry describes the object the node holds even if the name changed.
    private func adopt(_ parent: Node, _ name: UnsafePointer<CChar>, _ fileName: FileName) throws(Errno) -> fuse_entry_param {
        try adopt(try Syscall.openAt(parent.directory, name, Linux.O_PATH | O_NOFOLLOW), parent, fileName)
    }

    /// Counts a kernel lookup of the object behind `descriptor` (`O_PATH`), known as
    /// `parent`/`name`: also a file whose name is still to come (a save's unnamed temp).
    func adopt(_ descriptor: consuming OwnedDescriptor, _ parent: Node, _ name: FileName) throws(Errno) -> fuse_entry_param {
        let status = try Syscall.statOfPathDescriptor(descriptor.raw)
        let node = nodes.lookUp(status, descriptor: descriptor, parent: parent, name: name)
        evictor.noteGrowth(count: nodes.count)
        return entry(node, status)
    }

    func entry(_ node: Node, _ status: stat) -> fuse_entry_param {
        var entry = fuse_entry_param()
        entry.ino = fuse_ino_t(node.id)
        entry.generation = 0
        entry.attr = attributesForKernel(node, committedView(node, status))
        entry.attr_timeout = activity.needsFreshAttributes(node) ? 0 : options.attributeTimeout
        entry.entry_timeout = options.entryTimeout
        return entry
    }

    /// A reply that tells the kernel the name does not exist, cached for the entry timeout.
    func negativeEntry() -> fuse_entry_param {
        var entry = fuse_entry_param()
        entry.entry_timeout = options.entryTimeout
        return entry
    }

    /// The node's attributes as everyone but an appending owner sees them (see `committedView`).
    func attributes(of node: Node) throws(Errno) -> stat {
        var status = try node.withDescriptor { (descriptor) throws(Errno) -> stat in try Syscall.statOfPathDescriptor(descriptor) }
        // A deleted file the version store keeps: its link there is not a name of the file.
        if node.keptAfterLastName.load(ordering: .relaxed), status.st_nlink > 0 { status.st_nlink -= 1 }
        return committedView(node, status)
    }

    /// `status`, taken of the node's file just now, as everyone but the appending save's own
    /// handles (`viewer`) sees it: while its owner appends to the file, no larger than the
    /// committed size. (The boundary is asked after the stat: it is set before an append's
    /// first byte lands, so bytes the stat counted are either committed or behind a boundary
    /// seen here.) A handle of an earlier save of the same owner, ended since, is everyone.
    func committedView(_ node: Node, _ status: stat, viewer: Save? = nil) -> stat {
        guard activity.hasSaves, status.st_mode & S_IFMT == S_IFREG, let save = activity.save(of: node), save !== viewer,
              let boundary = save.appendBoundary,
              boundary.file == FileIdentity(status), Int64(status.st_size) > boundary.committedSize else { return status }
        var shown = status
        shown.st_size = off_t(boundary.committedSize)
        return shown
    }

    // MARK: Reopening nodes

    /// Runs `body` with "N", the name of the node's descriptor inside `/proc/self/fd`.
    @inline(__always)
    func withProcessName<R: ~Copyable>(of node: Node, _ body: (UnsafePointer<CChar>) throws(Errno) -> R) throws(Errno) -> R {
        try node.withDescriptor { (descriptor) throws(Errno) -> R in try Syscall.withDescriptorPath(descriptor, prefix: "", body) }
    }

    /// Opens the node's backing object afresh with `flags` (works for unlinked files too).
    func reopen(_ node: Node, flags: Int32) throws(Errno) -> OwnedDescriptor {
        try mount.reopen(node, flags: flags)
    }

    /// Runs `body` with the `/proc/self/fd/N` path of the node (for calls that take only paths).
    func withProcessPath<R>(of node: Node, _ body: (UnsafePointer<CChar>) throws(Errno) -> R) throws(Errno) -> R {
        try node.withDescriptor { (descriptor) throws(Errno) -> R in try Syscall.withDescriptorPath(descriptor, prefix: "/proc/self/fd/", body) }
    }

    /// Names the mount keeps for itself (staged temps, the recovery folder) cannot be created.
    func refuseReservedName(_ parent: Node, _ name: UnsafePointer<CChar>) throws(Errno) {
        if StagingName.isReserved(name: name, inRoot: parent.id == NodeTable.rootID) { throw .notPermitted }
    }

    // MARK: Ownership and mode of new objects

    /// Runs `body`, which creates an object for the caller of `request`, under the caller's
    /// umask (see `Syscall.withCreationMask`); `body` gets the mode to create with. The kernel
    /// could mask the mode only by the umask, which on a plain disk a default ACL on the
    /// directory replaces; so it hands modes over unmasked, and the backing's own creation
    /// masks them, whichever way applies. Where the kernel masked them already, the mask is 0.
    func creatingForCaller<R: ~Copyable>(_ request: fuse_req_t, mode: mode_t,
                                         _ body: (_ creationMode: mode_t) throws(Errno) -> R) throws(Errno) -> R {
        let mask = masksCreatedModes.load(ordering: .relaxed) ? fuse_req_ctx(request)!.pointee.umask : 0
        return try Syscall.withCreationMask(mask, mode: mode, body)
    }

    /// Gives an object the daemon just created to the calling user, as a local filesystem
    /// would have: the caller's uid, and its gid unless the parent directory is setgid.
    func giveToCaller(_ request: fuse_req_t, parent: Node, name: FileName, descriptor: Int32? = nil, mode: mode_t) throws(Errno) {
        guard canChangeOwners else { return }
        let caller = fuse_req_ctx(request)!.pointee
        if caller.uid == 0 && caller.gid == 0 { return }
        let parentStatus = try Syscall.statOfPathDescriptor(parent.directory)
        let gid = (parentStatus.st_mode & S_ISGID) != 0 ? gid_t.max : caller.gid
        if let descriptor {
            try Syscall.changeOwner(descriptor, caller.uid, gid)
        } else {
            try Syscall.changeOwner(at: parent.directory, name, caller.uid, gid, flags: AT_SYMLINK_NOFOLLOW)
        }
        // chown clears set-id bits on regular files; put back the ones the caller asked for.
        let setID = mode & (S_ISUID | S_ISGID)
        if (mode & S_IFMT) == S_IFREG, setID != 0 {
            if let descriptor {
                try Syscall.changeMode(descriptor, (try Syscall.stat(descriptor).st_mode & 0o7777) | setID)
            } else {
                let current = try Syscall.stat(at: parent.directory, name).st_mode & 0o7777
                try Syscall.changeMode(at: parent.directory, name, current | setID)
            }
        }
    }
}

// MARK: Bytes the kernel lends

/// A copy of a NUL-terminated C string the kernel lent a callback (a symlink target, an
/// attribute name), byte for byte, for an operation that goes on after the callback returned.
/// Names in a directory become `FileName`s instead.
func copyCString(_ text: UnsafePointer<CChar>) -> [CChar] {
    Array(UnsafeBufferPointer(start: text, count: strlen(text) + 1))
}

// MARK: Replies

@inline(__always)
func reply(_ request: fuse_req_t, error: Errno) {
    fuse_reply_err(request, error.rawValue)
}

@inline(__always)
func replyOK(_ request: fuse_req_t) {
    fuse_reply_err(request, 0)
}

