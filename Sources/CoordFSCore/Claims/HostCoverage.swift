/// Claims that some other authority must also allow: with `--cluster`, the other hosts that
/// share the backing (CoordFSCluster implements it over PostgreSQL). The claim table decides
/// between the owners on this host; coverage decides between hosts.
///
/// An operation first takes its claims in the local `ClaimTable`, then asks for coverage of
/// the same requests, and becomes a *user* of the host's grants only once every request is
/// covered: it never holds part of its coverage while it waits for the rest, so no two hosts
/// can wait for each other (Docs/LOCKING.md, "Across hosts"). A covered operation releases its
/// coverage when it releases its claims (a writer's handle, at its last release).
///
/// Sendable: implementations are called from any FUSE worker and from the control server.
public protocol HostCoverage: AnyObject, Sendable {
    /// Covers `requests` now from grants this host already holds (no round trip), or returns
    /// nil when the database must be asked.
    func coverNow(_ requests: [ClaimRequest]) -> CoverageUse?

    /// Asks for coverage, waiting behind conflicting holders on other hosts (first come, first
    /// served across hosts). `onOutcome` is called exactly once, later and on another thread,
    /// unless `cancel` takes the request back first. `nonblocking`: fail with
    /// `.wouldBlock` instead of waiting when another host holds a conflicting grant.
    func cover(_ requests: [ClaimRequest], deadline: ContinuousClock.Instant, nonblocking: Bool,
               onOutcome: @escaping @Sendable (CoverageOutcome) -> Void) -> CoverageTicket

    /// Takes a waiting request back; true when it was still waiting (its callback never runs).
    func cancel(_ ticket: CoverageTicket) -> Bool

    /// The operation is done with its coverage (a second release does nothing).
    func release(_ use: CoverageUse)

    /// Whether the grants `use` stands on still hold: false once this host lost them (its
    /// database session ended, or it cannot prove the session still stands). A save checks
    /// this at its commit (fencing), so it never replaces a file under a grant another host
    /// may hold by now.
    func stillHolds(_ use: CoverageUse) -> Bool
}

/// The token of covered requests: the fence of the session they were granted in.
///
/// Sendable: constants only.
public final class CoverageUse: Sendable {
    public let id: UInt64
    public let requests: [ClaimRequest]
    /// Grows every time the host's session (and with it every grant) is replaced.
    public let fence: UInt64

    public init(id: UInt64, requests: [ClaimRequest], fence: UInt64) {
        self.id = id
        self.requests = requests
        self.fence = fence
    }
}

/// A request waiting for coverage.
public struct CoverageTicket: Hashable, Sendable {
    public let id: UInt64
    public init(id: UInt64) { self.id = id }
}

public enum CoverageOutcome: Sendable {
    case covered(CoverageUse)
    /// The deadline passed with other hosts still holding conflicting grants (EBUSY).
    case timedOut(holders: [String])
    /// Another host holds a conflicting grant and the request was not to wait (EWOULDBLOCK).
    case wouldBlock
    /// This host cannot reach the database, so it cannot prove the grant (ENOLCK).
    case cutOff(reason: String)
}
