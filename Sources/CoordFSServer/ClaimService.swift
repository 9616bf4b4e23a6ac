import CoordFSCore

// What the control socket needs from the claim table, in its own words. The claim table
// (CoordFSCore/Claims) conforms with a short extension that maps these types onto its own
// (explicit read → .read, explicit write → .exclusive, claimant → .client(session,
// processTree:)); the names here differ from the table's on purpose, so the conformance
// never overloads the table's own methods.

/// The mode a client asks for with `claim`.
public enum ExplicitClaimMode: String, Sendable, Hashable {
    /// Nobody else changes the path while it is held.
    case read
    /// Nobody else sees or changes the path while it is held (the table's exclusive mode).
    case write
}

public struct ExplicitClaim: Sendable, Hashable {
    public var path: MountPath
    public var mode: ExplicitClaimMode

    public init(path: MountPath, mode: ExplicitClaimMode) {
        self.path = path
        self.mode = mode
    }
}

/// On whose behalf an explicit claim is held: one control-socket session, for the process
/// tree of the process that connected (its descendants pass through the claim).
public struct ExplicitClaimant: Sendable, Hashable {
    public var session: UInt64
    public var processTree: Int32

    public init(session: UInt64, processTree: Int32) {
        self.session = session
        self.processTree = processTree
    }
}

/// A claim somebody holds, as status and conflict errors report it.
public struct ClaimHolding: Sendable, Hashable {
    public enum Mode: Sendable, Hashable {
        case snapshotRead, read, write, exclusive
    }

    public enum Owner: Sendable, Hashable {
        case process(Int32)
        case session(UInt64, processTree: Int32)
    }

    public var path: MountPath
    public var mode: Mode
    public var owner: Owner
    public var since: ContinuousClock.Instant

    public init(path: MountPath, mode: Mode, owner: Owner, since: ContinuousClock.Instant) {
        self.path = path
        self.mode = mode
        self.owner = owner
        self.since = since
    }
}

/// Somebody waiting for claims.
public struct ClaimWaiting: Sendable, Hashable {
    public var paths: [MountPath]
    public var mode: ClaimHolding.Mode
    public var owner: ClaimHolding.Owner
    public var since: ContinuousClock.Instant

    public init(paths: [MountPath], mode: ClaimHolding.Mode, owner: ClaimHolding.Owner, since: ContinuousClock.Instant) {
        self.paths = paths
        self.mode = mode
        self.owner = owner
        self.since = since
    }
}

public struct ClaimTableStatus: Sendable, Hashable {
    public var held: [ClaimHolding]
    public var waiting: [ClaimWaiting]

    public init(held: [ClaimHolding], waiting: [ClaimWaiting]) {
        self.held = held
        self.waiting = waiting
    }
}

public enum ExplicitClaimAttempt<Grant: Sendable, Wait: Hashable & Sendable>: Sendable {
    case granted(Grant)
    /// Queued; the outcome callback will be called exactly once (unless the wait is cancelled first).
    case waiting(Wait)
}

public enum ExplicitClaimOutcome<Grant: Sendable>: Sendable {
    case granted(Grant)
    case timedOut(blockers: [ClaimHolding])
}

public struct ExplicitClaimConflict: Error, Sendable, Hashable {
    public var blockers: [ClaimHolding]

    public init(blockers: [ClaimHolding]) {
        self.blockers = blockers
    }
}

/// The claim table as the control socket uses it: explicit claims, all or nothing, for a
/// session's process tree.
public protocol ClaimService: Sendable {
    associatedtype ExplicitGrant: Sendable
    associatedtype ExplicitWait: Hashable & Sendable

    /// Takes every claim in `claims` at once, or queues for them until `deadline`. When it
    /// returns `.waiting`, `onOutcome` is called exactly once later, from any thread (it may
    /// be before this call returns), unless `cancelExplicitWait` returns true first.
    func acquireExplicit(_ claims: [ExplicitClaim], for claimant: ExplicitClaimant, deadline: ContinuousClock.Instant,
                         onOutcome: @escaping @Sendable (ExplicitClaimOutcome<ExplicitGrant>) -> Void)
        -> ExplicitClaimAttempt<ExplicitGrant, ExplicitWait>

    /// Takes every claim at once, or none and says who is in the way.
    func tryAcquireExplicit(_ claims: [ExplicitClaim], for claimant: ExplicitClaimant) -> Result<ExplicitGrant, ExplicitClaimConflict>

    /// Gives up a wait. False when it already ended (its outcome is then on its way).
    func cancelExplicitWait(_ wait: ExplicitWait) -> Bool

    func releaseExplicit(_ grant: ExplicitGrant)

    /// Releases every claim the claimant holds and ends its waits (their outcomes are not called).
    func releaseAllExplicit(of claimant: ExplicitClaimant)

    /// Who holds and who waits, now.
    func claimStatus() -> ClaimTableStatus
}
