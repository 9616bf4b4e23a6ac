/// Who holds a claim. Claims of one owner never conflict with each other (they are re-entrant).
public enum ClaimOwner: Hashable, Sendable, CustomStringConvertible {
    /// A process, by its thread-group id: all of its threads count as one owner.
    case process(Int32)
    /// An explicit claim of a control-socket client, taken for the process tree rooted at a pid:
    /// the processes of that tree pass through it (see `ProcessLineage`).
    case client(UInt64, processTree: Int32)

    public var description: String {
        switch self {
        case .process(let pid): return "pid \(pid)"
        case .client(let id, let root): return "client \(id) (for the tree of pid \(root))"
        }
    }
}

extension ProcessLineage {
    /// Whether a process of this lineage passes through a claim `holder` holds: a process in
    /// the tree of an explicit claim's owner does.
    @inline(__always)
    public func passesThrough(_ holder: ClaimOwner) -> Bool {
        guard !pids.isEmpty, case .client(_, let root) = holder else { return false }
        return pids.contains(root)
    }
}

/// One path of a request and the mode wanted on it.
public struct ClaimRequest: Hashable, Sendable, CustomStringConvertible {
    public var path: MountPath
    public var mode: ClaimMode

    public init(_ path: MountPath, _ mode: ClaimMode) {
        self.path = path
        self.mode = mode
    }

    public var description: String { "\(mode) \(path)" }
}

/// A granted claim on one path, as status and error messages show it.
public struct ClaimHolder: Sendable, CustomStringConvertible {
    public let path: MountPath
    public let mode: ClaimMode
    public let owner: ClaimOwner
    public let since: ContinuousClock.Instant
    /// The owner's user, where the table was told it.
    public let user: UInt32?

    public init(path: MountPath, mode: ClaimMode, owner: ClaimOwner, since: ContinuousClock.Instant, user: UInt32? = nil) {
        self.path = path
        self.mode = mode
        self.owner = owner
        self.since = since
        self.user = user
    }

    public var description: String {
        "\(owner) holds \(mode) on \(path) (for \(ContinuousClock.now - since))"
    }
}

/// The token of a granted request: hand it back to `ClaimTable.release` to let go of every path in it.
///
/// Sendable: every property is a constant of Sendable type.
public final class ClaimGrant: Sendable {
    public let id: UInt64
    public let owner: ClaimOwner
    public let requests: [ClaimRequest]

    init(id: UInt64, owner: ClaimOwner, requests: [ClaimRequest]) {
        self.id = id
        self.owner = owner
        self.requests = requests
    }
}

/// A claim taken away from its holder because it kept another user waiting for the break
/// time (DESIGN, "Many users on one mount"; like Linux's lease-break-time). The whole grant
/// goes: every path of it. Its holder finds out through `ClaimTable.onBreak`; a later release
/// of the grant does nothing.
public struct ClaimBreak: Sendable, CustomStringConvertible {
    /// The grant broken, as `ClaimGrant.id`.
    public let grant: UInt64
    /// Every path it held, with the mode and since when.
    public let holds: [ClaimHolder]
    public let owner: ClaimOwner
    public let user: UInt32
    /// The waiter that broke it, and its user.
    public let brokenBy: ClaimOwner
    public let brokenByUser: UInt32
    /// How long the waiter had waited.
    public let waited: Duration
    public let at: ContinuousClock.Instant

    public var description: String {
        let paths = holds.map { "\($0.mode) \($0.path)" }.joined(separator: ", ")
        return "\(owner) (uid \(user)) lost its claim on \(paths): \(brokenBy) (uid \(brokenByUser)) had waited \(waited) for it"
    }
}

/// Names a queued request, so that its waiter can cancel it (an interrupted system call).
public struct ClaimWaitTicket: Hashable, Sendable {
    public let id: UInt64
}

/// What `ClaimTable.acquire` did at once.
public enum ClaimAttempt: Sendable {
    case granted(ClaimGrant)
    /// Queued: the outcome arrives later, through the callback.
    case waiting(ClaimWaitTicket)
}

/// How a queued request ended (unless it was cancelled, which has no outcome).
public enum ClaimWaitOutcome: Sendable {
    case granted(ClaimGrant)
    /// The deadline passed first; `blockers` are the granted claims that stood in the way then.
    case timedOut(blockers: [ClaimHolder])
}

/// `ClaimTable.tryAcquire` could not grant at once.
public struct ClaimConflict: Error, Sendable, CustomStringConvertible {
    /// The granted claims in the way. When the request only had to queue behind earlier
    /// waiters, these are the claims those waiters wait for.
    public let blockers: [ClaimHolder]

    public init(blockers: [ClaimHolder]) {
        self.blockers = blockers
    }

    public var description: String {
        blockers.isEmpty ? "claim conflict" : "claim conflict: " + blockers.map(\.description).joined(separator: "; ")
    }
}

/// A queued request, as status shows it.
public struct ClaimWaiter: Sendable, CustomStringConvertible {
    public let ticket: ClaimWaitTicket
    public let owner: ClaimOwner
    public let requests: [ClaimRequest]
    public let since: ContinuousClock.Instant
    public let deadline: ContinuousClock.Instant

    public var description: String {
        "\(owner) waits for \(requests.map(\.description).joined(separator: ", ")) (for \(ContinuousClock.now - since))"
    }
}

/// Everything the table holds at one moment: granted claims by path, waiters in arrival order.
public struct ClaimTableSnapshot: Sendable {
    public let holders: [ClaimHolder]
    public let waiters: [ClaimWaiter]
}
