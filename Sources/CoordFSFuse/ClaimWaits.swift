import CFuse
import Dispatch
import Glibc
import Logging
import Synchronization
import CoordFSCore
import SystemPackage

/// A FUSE request that may be answered later, from another thread.
///
/// Sendable: libfuse lets any thread reply to a request exactly once; `ClaimWait` makes sure
/// only one party (the grant, the timeout or an interrupt) ever does.
struct PendingRequest: @unchecked Sendable {
    let raw: fuse_req_t
}

/// A request that waits for something (claims, presenters' answers) and may end three ways:
/// granted, timed out, or interrupted by the kernel. Exactly one party answers it; the others
/// stand down. While registered, it is the context of libfuse's interrupt callback.
///
/// Sendable (unchecked only because a subclass adds to it): all mutable state is atomics, or
/// behind the subclass's own lock.
class InterruptibleWait: @unchecked Sendable {
    let request: PendingRequest
    /// Set by the interrupt callback, so an interrupt that comes before the wait can be withdrawn still counts.
    let interrupted = Atomic<Bool>(false)
    /// Set by whichever of grant, timeout or interrupt comes first.
    let answered = Atomic<Bool>(false)
    /// Runs after an interrupt answered the request with EINTR.
    let afterInterrupt: (@Sendable () -> Void)?
    /// The request's arrival, taken from the thread that received it: whoever answers records it.
    let timing: RequestTiming
    let metrics: RequestMetrics?

    /// Call on the thread serving the request (it takes the request's timing from there).
    init(request: PendingRequest, metrics: RequestMetrics?, afterInterrupt: (@Sendable () -> Void)? = nil) {
        self.request = request
        self.afterInterrupt = afterInterrupt
        self.metrics = metrics
        self.timing = RequestTiming.takeCurrent()
    }

    /// The wait ended with an error reply: the request is done.
    func recordAnswer() {
        metrics?.record(timing)
    }

    /// The wait ended and the request goes on in `body`, on this thread, which answers it (or waits again).
    func goOn(_ body: () -> Void) {
        timing.resume(metrics, body)
    }

    /// The wait ended without waiting, on the thread that began it: the request goes on there.
    func goOnHere() {
        timing.restore()
    }

    func claimAnswer() -> Bool {
        answered.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
    }

    /// Whether an interrupt may end the request now: true unless what it waits for can no
    /// longer be withdrawn. Called from the interrupt callback.
    func withdraw() -> Bool { true }

    /// Registers for the kernel's INTERRUPT. From then on another thread may answer the request
    /// at any moment, so register before the wait starts, never after.
    func register() {
        fuse_req_interrupt_func(request.raw, interruptWait, Unmanaged.passRetained(self).toOpaque())
    }

    /// Ends the wait from outside the callback, after winning `claimAnswer`: unregistering waits
    /// for a callback that is running now, and afterwards none can start, so the registration's
    /// reference can go.
    func unregister() {
        fuse_req_interrupt_func(request.raw, nil, nil)
        Unmanaged.passUnretained(self).release()
    }

    /// Answers EINTR for an interrupt that came while the wait could not be withdrawn yet;
    /// true when it did.
    func endIfInterruptedMeanwhile() -> Bool {
        guard interrupted.load(ordering: .acquiring), withdraw(), claimAnswer() else { return false }
        unregister()
        reply(request.raw, error: .interrupted)
        recordAnswer()
        afterInterrupt?()
        return true
    }
}

/// Called by libfuse on the thread that received the kernel's INTERRUPT, with the request's
/// lock held (replying from here is allowed), or at registration when the interrupt came first.
private let interruptWait: @convention(c) (fuse_req_t?, UnsafeMutableRawPointer?) -> Void = { _, context in
    guard let context else { return }
    let wait = Unmanaged<InterruptibleWait>.fromOpaque(context).takeUnretainedValue()
    wait.interrupted.store(true, ordering: .releasing)
    guard wait.withdraw(), wait.claimAnswer() else { return }
    fuse_reply_err(wait.request.raw, EINTR)
    wait.recordAnswer()
    wait.afterInterrupt?()
    // Replying unregistered the callback, so this was the last use of the registration's reference.
    Unmanaged<InterruptibleWait>.fromOpaque(context).release()
}

/// One request waiting for its claims: an interrupt withdraws it from the claim table's queue.
private final class ClaimWait: InterruptibleWait, @unchecked Sendable {
    let table: ClaimTable
    /// The queued ticket, nil until `acquire` has returned it.
    let ticket = Mutex<ClaimWaitTicket?>(nil)

    init(table: ClaimTable, request: PendingRequest, metrics: RequestMetrics?, afterInterrupt: (@Sendable () -> Void)?) {
        self.table = table
        super.init(request: request, metrics: metrics, afterInterrupt: afterInterrupt)
    }

    /// Cancels the queued wait if there is one; true when this call took it out of the queue.
    override func withdraw() -> Bool {
        guard let queued = ticket.withLock({ $0 }) else { return false }
        return table.cancel(queued)
    }
}

/// One request whose local grant is held while other hosts are asked to cover it: an
/// interrupt takes the request back from them, and the local grant goes with it.
private final class HostCoverageWait: InterruptibleWait, @unchecked Sendable {
    let authority: ClaimAuthority
    /// The request out to the hosts, nil until `cover` has returned it.
    let pending = Mutex<CoverageWait?>(nil)

    init(authority: ClaimAuthority, request: PendingRequest, metrics: RequestMetrics?, afterInterrupt: (@Sendable () -> Void)?) {
        self.authority = authority
        super.init(request: request, metrics: metrics, afterInterrupt: afterInterrupt)
    }

    override func withdraw() -> Bool {
        guard let pending = pending.withLock({ $0 }) else { return false }
        return authority.cancel(pending)
    }
}

extension FileSystem {
    /// The claim owner for a request: the caller's process (all its threads count as one).
    func owner(of request: fuse_req_t) -> ClaimOwner {
        .process(processes.threadGroup(of: fuse_req_ctx(request)!.pointee.pid))
    }

    /// Whether `requester` sees `save`'s uncommitted version in attributes and names. Its owner
    /// does, and so does a descendant of the owner (fork, `pass_fds`) that holds a descriptor of
    /// the file: an open file belongs to every process that holds it, as on a plain disk, and
    /// the kernel's fstat names the caller, not the descriptor. (A descendant's own open of an
    /// existing file reads the committed version, as anyone else's: `openForReading`.)
    func seesPendingVersion(of save: Save, _ requester: ClaimOwner) -> Bool {
        if requester == save.owner { return true }
        guard case .process(let pid) = requester, case .process(let ownerPID) = save.owner,
              processes.lineage(of: pid).pids.contains(ownerPID), let mountID = kernelMount.id else { return false }
        return ProcessFacts.holdsOpenFile(pid, mountID: mountID, inode: save.node.shownInode)
    }

    /// Takes `claims` for the caller and runs `body` with the grant: at once on this thread
    /// when they are free, or later on another thread once they are granted, without holding
    /// a FUSE worker meanwhile. `body` must reply to the request and release the grant when it
    /// no longer needs it. A wait ends with EBUSY after the claim timeout (the log names the
    /// holders), or EINTR when the caller is interrupted; `nonblocking` requests fail at once
    /// with EWOULDBLOCK. After any of these error replies `whenRefused` runs, and `body` never
    /// does. An empty claim list runs `body` with nil at once. With other hosts (`--cluster`),
    /// they cover the claims once the table granted them (`coverAcrossHosts`), and `body`
    /// gets both, to release together.
    ///
    /// `claimsNow` derives the claims afresh from the nodes: after a wait, a rename granted
    /// ahead of this request may have moved them, and then the request asks again. `resolved`
    /// are the claims as the caller derived them just now, nothing having waited since (so
    /// the common case walks the node table once); nil derives them here.
    func withClaims(_ request: fuse_req_t, resolved: [ClaimRequest]? = nil, _ claimsNow: @escaping @Sendable () -> [ClaimRequest],
                    nonblocking: Bool = false, whenRefused: (@Sendable () -> Void)? = nil,
                    _ body: @escaping @Sendable (HeldClaims?) -> Void) {
        let claims = resolved ?? claimsNow()
        if claims.isEmpty { return body(nil) }
        let owner = owner(of: request)
        // Read from /proc here, never under the claim table's lock, and only while some
        // process could pass through an explicit claim.
        let lineage: ProcessLineage = if case .process(let pid) = owner, self.claims.hasExplicitClaims {
            processes.lineage(of: pid)
        } else {
            .none
        }
        // The common case, no conflict: no wait object, no interrupt registration.
        switch self.claims.tryAcquire(claims, owner: owner, lineage: lineage) {
        case .success(let grant):
            return coverAcrossHosts(request, grant, lineage, claimsNow, deadline: nil, nonblocking: nonblocking, whenRefused: whenRefused, body)
        case .failure where nonblocking:
            Instruments.claimWouldBlock()
            reply(request, error: .wouldBlock)
            whenRefused?()
            return
        case .failure: break
        }

        let wait = ClaimWait(table: self.claims, request: PendingRequest(raw: request), metrics: requestMetrics, afterInterrupt: whenRefused)
        wait.register()

        let deadline = ContinuousClock.now + options.claimTimeout
        let attempt = self.claims.acquire(claims, owner: owner, lineage: lineage, deadline: deadline) { [self] outcome in
            guard wait.claimAnswer() else {
                if case .granted(let grant) = outcome { self.claims.release(grant) }
                return
            }
            wait.unregister()
            switch outcome {
            case .granted(let grant):
                // Run the operation off the releasing thread (often a FUSE worker serving a release).
                claimWork.async { [self] in
                    wait.goOn {
                        if claimsNow() != claims {
                            self.claims.release(grant)
                            withClaims(wait.request.raw, claimsNow, whenRefused: whenRefused, body)
                        } else {
                            coverAcrossHosts(wait.request.raw, grant, lineage, claimsNow, deadline: deadline, nonblocking: false,
                                             whenRefused: whenRefused, body)
                        }
                    }
                }
            case .timedOut(let blockers):
                logger.warning("claim wait timed out", metadata: [
                    "owner": "\(owner)", "wanted": "\(claims.map { "\($0.mode) \($0.path)" })",
                    "held by": "\(blockers.map(\.description))",
                ])
                reply(wait.request.raw, error: .resourceBusy)
                wait.recordAnswer()
                whenRefused?()
            }
        }
        switch attempt {
        case .granted(let grant):
            guard wait.claimAnswer() else { return self.claims.release(grant) } // interrupted meanwhile
            wait.unregister()
            wait.goOnHere()
            coverAcrossHosts(request, grant, lineage, claimsNow, deadline: deadline, nonblocking: false, whenRefused: whenRefused, body)
        case .waiting(let ticket):
            wait.ticket.withLock { $0 = ticket }
            // An interrupt that arrived before the ticket was known could not cancel; do it now.
            _ = wait.endIfInterruptedMeanwhile()
        }
    }

    /// The second step of `withClaims`: the other hosts cover what this host's table granted,
    /// and `body` runs with both. At once when no other host is in the picture or this host's
    /// grants cover it already (no round trip); otherwise once the hosts answer, on another
    /// thread, without holding a FUSE worker meanwhile (the local grant stays held: local
    /// owners that conflict queue behind it). A refusal has released the local grant and
    /// fails the request: EBUSY at the deadline (the log names the hosts holding it),
    /// EWOULDBLOCK for `nonblocking`, ENOLCK when this host cannot reach the cluster's
    /// database; an interrupt takes the request back from the hosts (EINTR). `deadline`: the
    /// one the local wait had, nil when it did not wait; `lineage`: the one the table was asked
    /// with (a request nested in its owner's covered claims needs no other host: `ClaimAuthority`).
    private func coverAcrossHosts(_ request: fuse_req_t, _ grant: ClaimGrant, _ lineage: ProcessLineage, _ claimsNow: @escaping @Sendable () -> [ClaimRequest],
                                  deadline: ContinuousClock.Instant?, nonblocking: Bool, whenRefused: (@Sendable () -> Void)?,
                                  _ body: @escaping @Sendable (HeldClaims?) -> Void) {
        if let held = authority.heldNow(grant, lineage: lineage) { return body(held) }

        let wait = HostCoverageWait(authority: authority, request: PendingRequest(raw: request), metrics: requestMetrics,
                                    afterInterrupt: whenRefused)
        wait.register()
        let owner = grant.owner
        let asked = authority.cover(grant, deadline: deadline ?? .now + options.claimTimeout, nonblocking: nonblocking) { [self] result in
            guard wait.claimAnswer() else {
                if case .success(let held) = result { authority.release(held) }
                return
            }
            wait.unregister()
            switch result {
            case .success(let held):
                claimWork.async { [self] in
                    wait.goOn {
                        // Another host's rename, applied here meanwhile, may have moved the paths.
                        if claimsNow() != held.grant.requests {
                            authority.release(held)
                            withClaims(wait.request.raw, claimsNow, nonblocking: nonblocking, whenRefused: whenRefused, body)
                        } else {
                            body(held)
                        }
                    }
                }
            case .failure(let refusal):
                let metadata: Logger.Metadata = [
                    "owner": "\(owner)", "wanted": "\(grant.requests.map { "\($0.mode) \($0.path)" })", "why": "\(refusal)",
                ]
                switch refusal {
                case .wouldBlock: logger.debug("claim not covered across hosts", metadata: metadata)
                case .timedOut: logger.warning("claim wait across hosts timed out", metadata: metadata)
                case .cutOff: logger.error("claim refused: cut off from the cluster", metadata: metadata)
                }
                if case .wouldBlock = refusal { Instruments.claimWouldBlock() }
                reply(wait.request.raw, error: refusal.errno)
                wait.recordAnswer()
                whenRefused?()
            }
        }
        wait.pending.withLock { $0 = asked }
        // An interrupt that arrived before the request was out could not take it back; do it now.
        _ = wait.endIfInterruptedMeanwhile()
    }
}
