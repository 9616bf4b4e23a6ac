import SystemPackage

/// What an operation or an explicit claim holds once allowed: the grant of this host's claim
/// table and, with other hosts in the picture, their coverage of the same requests. One value,
/// released as one (`ClaimAuthority.release`), so neither outlives the other.
public struct HeldClaims: Sendable {
    public let grant: ClaimGrant
    /// The other hosts' coverage these claims were given; nil on a mount of one host, and
    /// for claims nested in covered ones of the same owner.
    public let coverage: CoverageUse?
    /// The coverage the claims stand on: their own, or the enclosing claims' for nested ones.
    /// A commit checks it (fencing); it goes back to the hosts when the last claims standing
    /// on it are released.
    public let fence: CoverageUse?

    public init(grant: ClaimGrant, coverage: CoverageUse?, fence: CoverageUse? = nil) {
        self.grant = grant
        self.coverage = coverage
        self.fence = fence ?? coverage
    }
}

/// Why other hosts did not cover a request; the local grant was released already.
public enum CoverageRefusal: Error, Sendable, CustomStringConvertible {
    /// Other hosts still held conflicting grants at the deadline.
    case timedOut(holders: [String])
    /// Another host holds a conflicting grant and the request was not to wait.
    case wouldBlock
    /// This host cannot prove it may grant: it lost or cannot reach the database.
    case cutOff(reason: String)

    /// The errno an operation fails with (Docs/LOCKING.md, "Across hosts").
    public var errno: Errno {
        switch self {
        case .timedOut: .resourceBusy
        case .wouldBlock: .wouldBlock
        case .cutOff: .noLocks
        }
    }

    public var description: String {
        switch self {
        case .timedOut(let holders): "other hosts still hold it: \(holders.joined(separator: "; "))"
        case .wouldBlock: "another host holds it (not waiting)"
        case .cutOff(let reason): "this host cannot reach the cluster's database: \(reason)"
        }
    }
}
