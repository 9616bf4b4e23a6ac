import SystemPackage

/// What an operation or an explicit claim holds once allowed: the grant of this host's claim
/// table and, with other hosts in the picture, their coverage of the same requests. One value,
/// released as one (`ClaimAuthority.release`), so neither outlives the other.
public struct HeldClaims: Sendable {
    public let grant: ClaimGrant
    /// Nil on a mount of one host.
    public let coverage: CoverageUse?

    public init(grant: ClaimGrant, coverage: CoverageUse?) {
        self.grant = grant
        self.coverage = coverage
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

/// The two steps every claim takes: this host's claim table decides between its own owners,
/// then (with `--cluster`) the other hosts cover the same requests. The table's grant is held
/// while the hosts are asked: a local owner that conflicts queues behind it, as it would
/// behind a holder, and nothing on other hosts waits for it (HostCoverage says why).
///
/// Sendable: two Sendable references.
public struct ClaimAuthority: Sendable {
    public let table: ClaimTable
    /// Nil: this host alone decides.
    public let hosts: (any HostCoverage)?

    public init(table: ClaimTable, hosts: (any HostCoverage)?) {
        self.table = table
        self.hosts = hosts
    }

    /// The claims `grant` (just granted by `table`) stands for, held now: at once when no other
    /// host is in the picture or this host's grants already cover it (no round trip); nil
    /// when the hosts must be asked (`cover`).
    public func heldNow(_ grant: ClaimGrant) -> HeldClaims? {
        guard let hosts else { return HeldClaims(grant: grant, coverage: nil) }
        return hosts.coverNow(grant.requests).map { HeldClaims(grant: grant, coverage: $0) }
    }

    /// Asks the other hosts to cover `grant`. `onOutcome` is called once, later and on another
    /// thread, with the held claims, or with the refusal after the local grant was released,
    /// unless `cancel` takes the request back first. Call only when `heldNow` gave nil.
    /// Snapshot reads alone are held uncovered when this host is cut off.
    public func cover(_ grant: ClaimGrant, deadline: ContinuousClock.Instant, nonblocking: Bool,
                      onOutcome: @escaping @Sendable (Result<HeldClaims, CoverageRefusal>) -> Void) -> CoverageWait {
        guard let hosts else { preconditionFailure("nothing to ask: heldNow covers a mount of one host") }
        let table = self.table
        let ticket = hosts.cover(grant.requests, deadline: deadline, nonblocking: nonblocking) { outcome in
            let refusal: CoverageRefusal
            switch outcome {
            case .covered(let use): return onOutcome(.success(HeldClaims(grant: grant, coverage: use)))
            case .timedOut(let holders): refusal = .timedOut(holders: holders)
            case .wouldBlock: refusal = .wouldBlock
            case .cutOff(let reason):
                // A snapshot read changes nothing and reads a committed version: cut off, it
                // goes on without the other hosts' word (it cannot see a write in progress).
                if grant.requests.allSatisfy({ $0.mode == .snapshotRead }) {
                    return onOutcome(.success(HeldClaims(grant: grant, coverage: nil)))
                }
                refusal = .cutOff(reason: reason)
            }
            table.release(grant)
            onOutcome(.failure(refusal))
        }
        return CoverageWait(ticket: ticket, grant: grant)
    }

    /// Takes a waiting request back: true when it was still waiting; then its callback never
    /// runs and the local grant is released here.
    public func cancel(_ wait: CoverageWait) -> Bool {
        guard let hosts, hosts.cancel(wait.ticket) else { return false }
        table.release(wait.grant)
        return true
    }

    /// Releases both parts (a second release does nothing).
    public func release(_ held: HeldClaims) {
        if let use = held.coverage { hosts?.release(use) }
        table.release(held.grant)
    }

    /// Whether `held` may still change what it claims: false once this host lost the grants
    /// its coverage stands on (a save checks this at its commit: fencing).
    public func stillHolds(_ held: HeldClaims) -> Bool {
        guard let use = held.coverage, let hosts else { return true }
        return hosts.stillHolds(use)
    }
}

/// A request whose local grant is held while other hosts are asked.
///
/// Sendable: constants only.
public final class CoverageWait: Sendable {
    let ticket: CoverageTicket
    let grant: ClaimGrant

    init(ticket: CoverageTicket, grant: ClaimGrant) {
        self.ticket = ticket
        self.grant = grant
    }
}
