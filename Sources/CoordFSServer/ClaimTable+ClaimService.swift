/// The claim table as the control socket's claim service: explicit claims are claims like any other.
import CoordFSCore


extension ClaimTable: ClaimService {
    public typealias ExplicitGrant = ClaimGrant
    public typealias ExplicitWait = ClaimWaitTicket

    public func acquireExplicit(_ claims: [ExplicitClaim], for claimant: ExplicitClaimant, deadline: ContinuousClock.Instant,
                                onOutcome: @escaping @Sendable (ExplicitClaimOutcome<ClaimGrant>) -> Void)
        -> ExplicitClaimAttempt<ClaimGrant, ClaimWaitTicket> {
        let attempt = acquire(claims.map(ClaimRequest.init(explicit:)), owner: ClaimOwner(claimant), deadline: deadline) { outcome in
            switch outcome {
            case .granted(let grant): onOutcome(.granted(grant))
            case .timedOut(let blockers): onOutcome(.timedOut(blockers: blockers.map(ClaimHolding.init)))
            }
        }
        switch attempt {
        case .granted(let grant): return .granted(grant)
        case .waiting(let ticket): return .waiting(ticket)
        }
    }

    public func tryAcquireExplicit(_ claims: [ExplicitClaim], for claimant: ExplicitClaimant) -> Result<ClaimGrant, ExplicitClaimConflict> {
        tryAcquire(claims.map(ClaimRequest.init(explicit:)), owner: ClaimOwner(claimant))
            .mapError { ExplicitClaimConflict(blockers: $0.blockers.map(ClaimHolding.init)) }
    }

    public func cancelExplicitWait(_ wait: ClaimWaitTicket) -> Bool {
        cancel(wait)
    }

    public func releaseExplicit(_ grant: ClaimGrant) {
        release(grant)
    }

    public func releaseAllExplicit(of claimant: ExplicitClaimant) {
        _ = releaseAll(of: ClaimOwner(claimant))
    }

    public func claimStatus() -> ClaimTableStatus {
        let snapshot = snapshot()
        return ClaimTableStatus(
            held: snapshot.holders.map(ClaimHolding.init),
            waiting: snapshot.waiters.map { waiter in
                // One line per waiter: its strongest mode, all its paths.
                let mode = waiter.requests.map(\.mode).max { $0.strength < $1.strength } ?? .read
                return ClaimWaiting(paths: waiter.requests.map(\.path), mode: ClaimHolding.Mode(mode),
                                    owner: ClaimHolding.Owner(waiter.owner), since: waiter.since)
            })
    }
}

extension ClaimRequest {
    /// Explicit read claims are read claims; explicit write claims are exclusive (nobody else
    /// sees or changes the path, as the design's table says).
    init(explicit claim: ExplicitClaim) {
        self.init(claim.path, claim.mode == .read ? .read : .exclusive)
    }
}

extension ClaimOwner {
    init(_ claimant: ExplicitClaimant) {
        self = .client(claimant.session, processTree: claimant.processTree)
    }
}

extension ClaimMode {
    var strength: Int {
        switch self {
        case .snapshotRead: 0
        case .read: 1
        case .write: 2
        case .exclusive: 3
        }
    }
}

extension ClaimHolding.Mode {
    init(_ mode: ClaimMode) {
        switch mode {
        case .snapshotRead: self = .snapshotRead
        case .read: self = .read
        case .write: self = .write
        case .exclusive: self = .exclusive
        }
    }
}

extension ClaimHolding.Owner {
    init(_ owner: ClaimOwner) {
        switch owner {
        case .process(let pid): self = .process(pid)
        case .client(let session, let tree): self = .session(session, processTree: tree)
        }
    }
}

extension ClaimHolding {
    init(_ holder: ClaimHolder) {
        self.init(path: holder.path, mode: Mode(holder.mode), owner: Owner(holder.owner), since: holder.since)
    }
}
