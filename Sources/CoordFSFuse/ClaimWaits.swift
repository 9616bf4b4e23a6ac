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

/// One request waiting for its claims, here or on other hosts: an interrupt takes it back.
private final class ClaimWait: InterruptibleWait, @unchecked Sendable {
    let ticket: ClaimTicket

    init(ticket: ClaimTicket, request: PendingRequest, metrics: RequestMetrics?, afterInterrupt: (@Sendable () -> Void)?) {
        self.ticket = ticket
        super.init(request: request, metrics: metrics, afterInterrupt: afterInterrupt)
    }

    /// True when this call took the request back (nothing is held, no outcome will come).
    override func withdraw() -> Bool {
        ticket.cancel()
    }
}

extension FileSystem {
    /// The claim owner for a request: the caller's process (all its threads count as one).
    func owner(of request: fuse_req_t) -> ClaimOwner {
        .process(processes.threadGroup(of: fuse_req_ctx(request)!.pointee.pid))
    }

    /// Who a request's changes come from: the caller's process and user.
    func origin(of request: fuse_req_t) -> ChangeOrigin {
        let context = fuse_req_ctx(request)!.pointee
        return ChangeOrigin(pid: processes.threadGroup(of: context.pid), uid: context.uid)
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

    /// Takes `claims` for `owner`, the caller (`ClaimAuthority.acquire`: this host's table, then other
    /// hosts) and runs `body` with them: at once on this thread when they are free, or later
    /// on another thread once they are held, without holding a FUSE worker meanwhile. `body`
    /// must reply to the request and release the claims when it no longer needs them. A wait
    /// ends with EBUSY after the claim timeout (the log names the holders), EINTR when the
    /// caller is interrupted, ENOLCK when this host cannot reach the cluster's database;
    /// `nonblocking` requests fail at once with EWOULDBLOCK. After any of these error replies
    /// `whenRefused` runs, and `body` never does. An empty claim list runs `body` with nil at once.
    ///
    /// `claimsNow` derives the claims afresh from the nodes: after a wait, a rename granted
    /// ahead of this request (or another host's, applied here) may have moved them, and then
    /// the request asks again. `resolved` are the claims as the caller derived them just now,
    /// nothing having waited since (so the common case walks the node table once); nil
    /// derives them here.
    func withClaims(_ request: fuse_req_t, for owner: ClaimOwner, user: UInt32, resolved: [ClaimRequest]? = nil,
                    _ claimsNow: @escaping @Sendable () -> [ClaimRequest],
                    nonblocking: Bool = false, whenRefused: (@Sendable () -> Void)? = nil,
                    _ body: @escaping @Sendable (HeldClaims?) -> Void) {
        let claims = resolved ?? claimsNow()
        if claims.isEmpty { return body(nil) }
        // Read from /proc here, never under the claim table's lock, and only while some
        // process could pass through an explicit claim.
        let lineage: ProcessLineage = if case .process(let pid) = owner, self.claims.hasExplicitClaims {
            processes.lineage(of: pid)
        } else {
            .none
        }
        let ticket: ClaimTicket
        switch authority.acquire(claims, owner: owner, user: user, lineage: lineage, deadline: .now + options.claimTimeout,
                                 nonblocking: nonblocking) {
        case .held(let held):
            return body(held)
        case .refused(let refusal):
            refused(request, owner: owner, claims, refusal)
            whenRefused?()
            return
        case .waiting(let waiting):
            ticket = waiting
        }
        // Registered before the outcome can reach the request: from here on an interrupt may
        // take it back (and answer EINTR) on another thread.
        let wait = ClaimWait(ticket: ticket, request: PendingRequest(raw: request), metrics: requestMetrics, afterInterrupt: whenRefused)
        wait.register()
        ticket.whenDone { [self] outcome in
            guard wait.claimAnswer() else {
                if case .success(let held) = outcome { authority.release(held) } // interrupted meanwhile
                return
            }
            wait.unregister()
            switch outcome {
            case .success(let held):
                // Run the operation off the thread that let it go on (often a FUSE worker serving a release).
                claimWork.async { [self] in
                    wait.goOn {
                        if claimsNow() != held.grant.requests {
                            authority.release(held)
                            withClaims(wait.request.raw, for: owner, user: user, claimsNow, nonblocking: nonblocking, whenRefused: whenRefused, body)
                        } else {
                            body(held)
                        }
                    }
                }
            case .failure(let refusal):
                refused(wait.request.raw, owner: owner, claims, refusal)
                wait.recordAnswer()
                whenRefused?()
            }
        }
    }

    /// Answers a request whose claims were refused, and says why in the log where a person
    /// would want to know (a timeout names the holders).
    private func refused(_ request: fuse_req_t, owner: ClaimOwner, _ claims: [ClaimRequest], _ refusal: ClaimRefusal) {
        let metadata: Logger.Metadata = [
            "owner": "\(owner)", "wanted": "\(claims.map { "\($0.mode) \($0.path)" })", "why": "\(refusal)",
        ]
        switch refusal {
        case .wouldBlock, .cancelled, .hosts(.wouldBlock): logger.debug("claims refused", metadata: metadata)
        case .timedOut, .hosts(.timedOut): logger.warning("claim wait timed out", metadata: metadata)
        case .hosts(.cutOff): logger.error("claim refused: cut off from the cluster", metadata: metadata)
        }
        reply(request, error: refusal.errno)
    }
}
