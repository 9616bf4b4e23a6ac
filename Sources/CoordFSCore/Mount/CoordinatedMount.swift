import Glibc
import Logging
import Synchronization
import SystemPackage

/// The mount itself, without the kernel's protocol: what it knows (the node table, claims and
/// their authority across hosts, presenters, the event hub, saves in flight, the watch of the
/// backing, what it changed itself) and what it decides (commits and who hears of them,
/// changes behind the mount or from other hosts, following a replaced file). The FUSE glue
/// turns kernel requests into calls on it; the control server and the metrics endpoint read
/// it; tests drive it with a stand-in for the kernel (`KernelCache`).
///
/// Sendable: every property is a constant set in `init`; the services guard their own state.
public final class CoordinatedMount: Sendable {
    public let nodes: NodeTable
    public let options: MountOptions
    public let logger: Logger
    /// `options.durability` as the backing filesystem needs it (see `Durability.needed(on:)`).
    public let commitDurability: Durability
    /// Makes the temps of saves: unnamed where the backing allows, else named.
    public let staging: TempStaging
    /// Records appends in flight, for the next mount's recovery after a crash.
    public let appendJournal: AppendJournal
    /// Claims every operation takes (Docs/LOCKING.md).
    public let claims: ClaimTable
    /// The claim table and, with other hosts, their coverage: what takes and releases claims.
    public let authority: ClaimAuthority
    /// Thread-group ids, process trees and names of callers.
    public let processes: ProcessFacts
    /// Pending saves and page-cache readers of open files.
    public let activity = ActivityRegistry()
    /// The mount as /proc names it (its id and device), known once mounted.
    public let kernelMount = KernelMountIdentity()
    /// Change events for the control socket's subscribers.
    public let events: EventHub
    /// Presenters registered through the control socket, asked before accesses.
    public let presenters: PresenterRegistry
    /// What the mount changes, for a watch of the backing that cannot tell its own changes apart.
    public let ownChanges: OwnChanges
    /// The watch of the backing, nil when there is none.
    public let watcher: BackingWatcher?
    /// The cluster's events (`--cluster`), nil without one.
    public let cluster: ClusterEventLink?
    /// What the kernel may have cached, and how to make it drop it.
    public let kernel: any KernelCache
    /// The version store (`--versions`), nil without one: what saves replace and deletes remove is kept there.
    public let versions: (any VersionStoring)?
    /// With `--cluster`: held while one of this host's events gets its sequence in the hub and
    /// its place in the cluster's queue, so other hosts hear them in this host's order even
    /// when two workers publish at once (an in-place file's `changed` at its release and an
    /// unlink, say). Takes the event hub's lock, then the cluster queue's, one after the other
    /// (Docs/LOCKING.md); guards nothing of its own.
    let clusterPublishing = Mutex(())

    /// Opens the backing directory. `watcher`: the watch of the backing, started already (the
    /// options' cache timeouts depend on whether it could start), delivering to this mount
    /// through a `ChangeInbox`; `cluster`: the link to the cluster's events, if any.
    public init(backing: String, options: MountOptions, kernel: any KernelCache, ownChanges: OwnChanges = OwnChanges(enabled: false),
                watcher: BackingWatcher? = nil, cluster: ClusterEventLink? = nil, versions: (any VersionStoring)? = nil,
                logger: Logger) throws(Errno) {
        let root = try Syscall.openAt(AT_FDCWD, backing, Linux.O_PATH | O_DIRECTORY)
        let device = try Syscall.statOfPathDescriptor(root.raw).st_dev
        self.nodes = try NodeTable(root: root)
        let filesystem = MountTable.current().mount(ofDevice: UInt64(device))
        self.commitDurability = options.durability.needed(on: filesystem, journaled: filesystem.map(MountTable.ext4HasJournal) ?? true)
        if commitDurability != options.durability {
            logger.info("the backing filesystem orders a replacing rename after the new file's data; commits need no fsync for that",
                        metadata: ["filesystem": "\(filesystem?.filesystemType ?? "?") \(filesystem?.superOptions ?? "")", "durability": "\(options.durability)"])
        }
        self.options = options
        self.staging = TempStaging(unnamed: !options.namedTemps)
        self.appendJournal = AppendJournal(root: nodes.root.directory, nodes: nodes,
                                           synchronizes: commitDurability.forCommit(replacingExistingFile: false).syncsFile)
        self.logger = logger
        let processes = ProcessFacts()
        self.processes = processes
        self.events = EventHub(historyCapacity: options.eventHistory, historyBytes: options.eventHistoryBytes)
        self.presenters = PresenterRegistry(isInTree: { pid, root in processes.isInTree(pid, rootedAt: root) },
                                            maxAsksPerUser: options.presenterAsksPerUser)
        self.claims = ClaimTable(breakAfter: options.effectiveBreakTime)
        claims.onBreak { breaks in
            for broken in breaks {
                logger.warning("a claim kept another user waiting for the break time and was broken", metadata: [
                    "holder": "\(broken.owner)", "holder-uid": "\(broken.user)",
                    "paths": "\(broken.holds.map { "\($0.mode) \($0.path)" })",
                    "held-for": "\(broken.holds.map { broken.at - $0.since }.max() ?? .zero)",
                    "broken-by": "\(broken.brokenBy)", "broken-by-uid": "\(broken.brokenByUser)", "waited": "\(broken.waited)",
                ])
            }
        }
        self.authority = ClaimAuthority(table: claims, hosts: options.hostCoverage)
        self.ownChanges = ownChanges
        self.watcher = watcher
        self.cluster = cluster
        self.kernel = kernel
        self.versions = versions
        versions?.observe { [weak self] notice in self?.publishVersion(notice) }
    }

    /// Who made a change, as the version store records it.
    public func versionOrigin(_ origin: ChangeOrigin) -> VersionOrigin {
        VersionOrigin(pid: origin.pid, uid: origin.uid, process: processes.name(of: origin.pid))
    }

    /// Whether the watch of the backing needs to be told of the mount's own changes
    /// (`noteOwnChange`): it cannot tell who made a change (inotify).
    public var notesOwnChanges: Bool { ownChanges.isEnabled }

    /// Tells a watch of the backing that names no process that the mount is about to change
    /// `path`, so that it takes the change for the mount's own, not one behind it.
    public func noteOwnChange(_ path: MountPath?) {
        if ownChanges.isEnabled { ownChanges.note(path) }
    }

    /// How the backing is watched; nil when it is not.
    public var watchMethod: WatchMethod? { watcher?.method }

    // MARK: Reopening

    /// Opens the node's backing object afresh with `flags` (works for unlinked files too).
    public func reopen(_ node: Node, flags: Int32) throws(Errno) -> OwnedDescriptor {
        try node.withDescriptor { (descriptor) throws(Errno) -> OwnedDescriptor in try Syscall.reopen(descriptor, flags) }
    }


    /// The backing's attributes of `path` now (nil when it is gone again).
    public func backingStatus(of path: MountPath) -> stat? {
        if path.isRoot { return try? Syscall.statOfPathDescriptor(nodes.root.directory) }
        return path.withRelativeCString { try? Syscall.stat(at: nodes.root.directory, $0) }
    }
}
