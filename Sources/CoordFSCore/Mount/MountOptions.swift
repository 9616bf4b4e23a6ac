/// What a mount is asked to do; filled by the command line, read by the session and operations.
public struct MountOptions: Sendable {
    /// How long the kernel may trust an attribute reply, in seconds. The mount invalidates what
    /// it changes, and what others change in the backing as its watch reports it, so long
    /// timeouts stay correct and save a round trip per `stat`.
    public var attributeTimeout: Double = 86_400
    /// How long the kernel may trust a name lookup (positive or negative), in seconds.
    public var entryTimeout: Double = 86_400
    /// Let the kernel keep file pages across opens of an unchanged file.
    public var keepPageCache = true
    /// Kernel writeback cache: small writes gather in the page cache before they reach us.
    public var writebackCache = false
    /// Read replies move file data from the backing into the kernel with splice(2) instead
    /// of a copy through the daemon's memory (replies under two pages are copied anyway).
    public var spliceReads = true
    /// Written data comes from the kernel by splice(2) too. Off by default: the backing then
    /// receives writes page by page, which allocates blocks differently for some patterns.
    public var spliceWrites = false
    /// Let users other than the one who mounted use the mount.
    public var allowOther = false
    /// Mount read-only: the kernel refuses every change with EROFS (a remount can turn it
    /// read-write and back); events and claims are served as ever, and the mount leaves the
    /// backing as it finds it (no recovery of an earlier run's leftovers).
    public var readOnly = false
    /// Threads serving requests at most, and idle ones kept ready.
    public var maxThreads: UInt32 = 16
    public var maxIdleThreads: UInt32 = 8
    /// One `/dev/fuse` descriptor per worker thread.
    public var cloneDevice = true

    /// Nodes the kernel may keep at once before it is asked to forget some; each holds a
    /// descriptor. Nil: three quarters of the descriptor limit.
    public var maxNodes: Int?

    /// How long an operation waits for a conflicting claim before it fails with EBUSY. Long
    /// enough for a program to finish an ordinary save of a large file; short enough that a
    /// stuck holder shows up as an error rather than a hang.
    public var claimTimeout: Duration = .seconds(30)
    /// How long a claim of one user may keep another user waiting before it is broken (its
    /// holder loses it and is told); nil: never. Like Linux's lease-break-time (45 s). A wait
    /// that would end at the claim timeout breaks first, so the bound is the shorter of the two.
    public var breakTime: Duration? = .seconds(45)

    /// The break time the claim table applies: no later than the claim timeout, so that a
    /// file operation held back by another user's claim goes on rather than fails.
    public var effectiveBreakTime: Duration? { breakTime.map { min($0, claimTimeout) } }
    /// Opens for reading hold a read claim until their last release (writers wait for readers).
    public var strictReads = false
    /// What a commit syncs before and after its rename.
    public var durability: Durability = .recommended
    /// Stage every save in a named hidden temp, even where the backing has unnamed files
    /// (O_TMPFILE): the fallback for filesystems without them, on demand.
    public var namedTemps = false
    /// With a version store, whether a save that meets a change behind the mount also keeps
    /// that version beside the file (`NAME.conflict-…`), for programs that know nothing of
    /// versions. Without a store the copy is always made: it is the only record.
    public var conflictCopies = true
    /// Files written in place instead of through a staged temp.
    public var inPlace = InPlacePolicy(patterns: InPlacePolicy.defaultPatterns, largerThan: InPlacePolicy.defaultLargerThan)

    /// How long an access waits for presenters to answer before it goes on without them.
    /// Presenters answer in milliseconds when they work; a stuck one costs each access this much.
    public var presenterTimeout: Duration = .seconds(5)
    /// Unanswered asks the presenters of one user (not root, nor the mount's owner) may have;
    /// past it they are skipped until they answer some.
    public var presenterAsksPerUser = 256
    /// Events kept for replay (`subscribe` with `since`), at most this many and this many
    /// bytes: the oldest go first.
    public var eventHistory = EventHub.defaultHistoryCapacity
    public var eventHistoryBytes = EventHub.defaultHistoryBytes
    /// The control socket's path, told to clients through the `user.coordfs.control` attribute
    /// of every item; nil when the mount serves no socket (the attribute is then absent).
    public var controlSocket: String?

    /// Watch the backing for changes made directly in it and drop what the kernel caches of
    /// them. Off: everything is taken to change through the mount (a closed setup).
    public var watchBacking = true
    /// How to watch; nil: fanotify where the daemon may (it names the process), else inotify.
    public var watchMethod: WatchMethod?
    /// The cache timeouts, in seconds, of a mount that should watch its backing and cannot:
    /// short, so an outside change shows within this long instead of a day later.
    public static let unwatchedTimeout: Double = 1

    /// Count and time every request per operation (`RequestMetrics`): with --metrics only,
    /// so a mount that serves no metrics reads no clock for them.
    public var measuresRequests = false

    /// The other hosts that must also allow every claim (`--cluster`: a `ClusterSession`'s
    /// coverage); nil: this host decides alone.
    public var hostCoverage: (any HostCoverage)?

    public init() {}
}
