import Synchronization
import SystemPackage

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
    /// With other hosts: the coverage each held local grant stands on, by grant id (where a
    /// nested request finds its enclosing claims'), and how many held grants stand on each
    /// use, by use id: a use goes back to the hosts with the last of them, so an enclosing
    /// handle released before a nested one (a program's next open of a file comes before the
    /// kernel's release of its last) leaves the nested one covered. A leaf lock after the table's.
    private struct Covered {
        var byGrant: [UInt64: CoverageUse] = [:]
        var standing: [UInt64: Int] = [:]
    }
    private let covered = Mutex(Covered())

    public init(table: ClaimTable, hosts: (any HostCoverage)?) {
        self.table = table
        self.hosts = hosts
    }

    /// Records `held` as covered (for requests nested in it) and returns it.
    private func noted(_ held: HeldClaims) -> HeldClaims {
        if let use = held.coverage {
            covered.withLock { covered in
                covered.byGrant[held.grant.id] = use
                covered.standing[use.id, default: 0] += 1
            }
        }
        return held
    }

    /// The claims `grant` stands for when it is wholly nested in covered claims of its owner:
    /// held on the enclosing coverage (counted as standing on it), nil when it is not nested.
    private func heldNested(_ grant: ClaimGrant, lineage: ProcessLineage) -> HeldClaims? {
        let enclosing = table.enclosingGrants(of: grant, lineage: lineage)
        return covered.withLock { (covered) -> HeldClaims? in
            var fence: CoverageUse?
            for candidates in enclosing {
                var found: CoverageUse?
                for candidate in candidates where found == nil { found = covered.byGrant[candidate] }
                guard let found else { return nil }
                fence = fence ?? found
            }
            guard let fence else { return nil }
            covered.byGrant[grant.id] = fence
            covered.standing[fence.id, default: 0] += 1
            return HeldClaims(grant: grant, coverage: nil, fence: fence)
        }
    }

    /// The claims `grant` (just granted by `table`) stands for, held now: at once when no other
    /// host is in the picture or this host's grants already cover it (no round trip); nil
    /// when the hosts must be asked (`cover`).
    /// `lineage`: the requester's, as the table was asked with.
    func heldNow(_ grant: ClaimGrant, lineage: ProcessLineage = .none) -> HeldClaims? {
        guard let hosts else { return HeldClaims(grant: grant, coverage: nil) }
        if let nested = heldNested(grant, lineage: lineage) { return nested }
        return hosts.coverNow(grant.requests).map { noted(HeldClaims(grant: grant, coverage: $0)) }
    }

    /// Asks the other hosts to cover `grant`. `onOutcome` is called once, later and on another
    /// thread, with the held claims, or with the refusal after the local grant was released,
    /// unless `cancel` takes the request back first. Call only when `heldNow` gave nil.
    /// Snapshot reads alone are held uncovered when this host is cut off.
    func cover(_ grant: ClaimGrant, deadline: ContinuousClock.Instant, nonblocking: Bool,
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
    func cancel(_ wait: CoverageWait) -> Bool {
        guard let hosts, hosts.cancel(wait.ticket) else { return false }
        table.release(wait.grant)
        return true
    }

    /// Releases both parts (a second release does nothing).
    public func release(_ held: HeldClaims) {
        if let use = held.fence {
            let last = covered.withLock { (covered) -> Bool in
                guard covered.byGrant.removeValue(forKey: held.grant.id) != nil else { return false } // released before
                let left = (covered.standing[use.id] ?? 1) - 1
                covered.standing[use.id] = left > 0 ? left : nil
                return left <= 0
            }
            if last { hosts?.release(use) }
        }
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
