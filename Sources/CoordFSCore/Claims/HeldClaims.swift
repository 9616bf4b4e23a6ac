import Synchronization
import SystemPackage

/// What an operation or an explicit claim holds once allowed: the grant of this host's claim
/// table and, with other hosts in the picture, their coverage of the same requests. One value,
/// released as one (`ClaimAuthority.release`), so neither outlives the other.
public struct HeldClaims: Sendable {
    public let grant: ClaimGrant
    /// The other hosts' coverage this holds and releases; nil on a mount of one host, and
    /// for claims nested in covered ones of the same owner.
    public let coverage: CoverageUse?
    /// The coverage the claims stand on, checked at a commit: their own, or the enclosing
    /// claims' for nested ones.
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

/// The two steps every claim takes: this host's claim table decides between its own owners,
/// then (with `--cluster`) the other hosts cover the same requests. The table's grant is held
/// while the hosts are asked: a local owner that conflicts queues behind it, as it would
/// behind a holder, and nothing on other hosts waits for it (HostCoverage says why).
///
/// A request nested in claims its owner already holds, covered (a second open of a file its
/// process writes; a program run under an explicit claim, which passes through it), needs no
/// other host's word: the enclosing claims stand for it, and it must not queue behind another
/// host's request that waits for them (it would wait for itself until the timeout). Only
/// wholly nested requests count; one that is partly nested asks for all of its paths.
///
/// Sendable: Sendable references and a mutex.
public final class ClaimAuthority: Sendable {
    public let table: ClaimTable
    /// Nil: this host alone decides.
    public let hosts: (any HostCoverage)?
    /// The coverage each held local grant stands on, by grant id (with other hosts only): what
    /// a nested request finds its enclosing claims' coverage in. A leaf lock after the table's.
    private let covered = Mutex<[UInt64: CoverageUse]>([:])

    public init(table: ClaimTable, hosts: (any HostCoverage)?) {
        self.table = table
        self.hosts = hosts
    }

    /// Records `held` as covered (for requests nested in it) and returns it.
    private func noted(_ held: HeldClaims) -> HeldClaims {
        if let fence = held.fence { covered.withLock { $0[held.grant.id] = fence } }
        return held
    }

    /// The coverage of the claims `grant` is wholly nested in, nil when it is not.
    private func enclosingCoverage(of grant: ClaimGrant, lineage: ProcessLineage) -> CoverageUse? {
        let enclosing = table.enclosingGrants(of: grant, lineage: lineage)
        return covered.withLock { (covered) -> CoverageUse? in
            var fence: CoverageUse?
            for candidates in enclosing {
                var found: CoverageUse?
                for candidate in candidates where found == nil { found = covered[candidate] }
                guard let found else { return nil }
                fence = fence ?? found
            }
            return fence
        }
    }

    /// The claims `grant` (just granted by `table`) stands for, held now: at once when no other
    /// host is in the picture or this host's grants already cover it (no round trip); nil
    /// when the hosts must be asked (`cover`).
    /// `lineage`: the requester's, as the table was asked with.
    public func heldNow(_ grant: ClaimGrant, lineage: ProcessLineage = .none) -> HeldClaims? {
        guard let hosts else { return HeldClaims(grant: grant, coverage: nil) }
        if let enclosing = enclosingCoverage(of: grant, lineage: lineage) {
            return noted(HeldClaims(grant: grant, coverage: nil, fence: enclosing))
        }
        return hosts.coverNow(grant.requests).map { noted(HeldClaims(grant: grant, coverage: $0)) }
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
            case .covered(let use): return onOutcome(.success(self.noted(HeldClaims(grant: grant, coverage: use))))
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
        if held.fence != nil { covered.withLock { _ = $0.removeValue(forKey: held.grant.id) } }
        if let use = held.coverage { hosts?.release(use) }
        table.release(held.grant)
    }

    /// Whether `held` may still change what it claims: false once this host lost the grants
    /// its coverage stands on (a save checks this at its commit: fencing).
    public func stillHolds(_ held: HeldClaims) -> Bool {
        guard let use = held.fence, let hosts else { return true }
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
