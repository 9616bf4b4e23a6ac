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

/// One request waiting for its claims: decides who answers it (the grant, the timeout, or
/// an interrupt from the kernel) and is the interrupt callback's context.
///
/// Sendable: all mutable state is atomics or behind its own lock.
private final class ClaimWait: Sendable {
    let table: ClaimTable
    let request: PendingRequest
    /// The queued ticket, nil until `acquire` has returned it.
    let ticket = Mutex<ClaimWaitTicket?>(nil)
    /// Set by the interrupt callback, so an interrupt that comes before the ticket is known still counts.
    let interrupted = Atomic<Bool>(false)
    /// Set by whichever of grant, timeout or interrupt comes first; the others stand down.
    let answered = Atomic<Bool>(false)

    init(table: ClaimTable, request: PendingRequest) {
        self.table = table
        self.request = request
    }

    func claimAnswer() -> Bool {
        answered.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
    }

    /// Cancels the queued wait if there is one; true when this call took it out of the queue.
    func cancelQueuedWait() -> Bool {
        guard let queued = ticket.withLock({ $0 }) else { return false }
        return table.cancel(queued)
    }
}

/// Called by libfuse on the thread that received the kernel's INTERRUPT, with the request's
/// lock held (replying from here is allowed), or at registration when the interrupt came first.
private let interruptWaitingRequest: @convention(c) (fuse_req_t?, UnsafeMutableRawPointer?) -> Void = { _, context in
    guard let context else { return }
    let wait = Unmanaged<ClaimWait>.fromOpaque(context).takeUnretainedValue()
    wait.interrupted.store(true, ordering: .releasing)
    guard wait.cancelQueuedWait(), wait.claimAnswer() else { return }
    fuse_reply_err(wait.request.raw, EINTR)
    // Replying unregistered the callback, so this was the last use of the registration's reference.
    Unmanaged<ClaimWait>.fromOpaque(context).release()
}

extension FileSystem {
    /// The claim owner for a request: the caller's process (all its threads count as one).
    func owner(of request: fuse_req_t) -> ClaimOwner {
        .process(processes.threadGroup(of: fuse_req_ctx(request)!.pointee.pid))
    }

    /// Takes `claims` for the caller and runs `body` with the grant: at once on this thread
    /// when they are free, or later on another thread once they are granted, without holding
    /// a FUSE worker meanwhile. `body` must reply to the request and release the grant when it
    /// no longer needs it. A wait ends with EBUSY after the claim timeout (the log names the
    /// holders), or EINTR when the caller is interrupted; `nonblocking` requests fail at once
    /// with EWOULDBLOCK. An empty claim list runs `body` with nil at once.
    ///
    /// `claimsNow` derives the claims afresh from the nodes: after a wait, a rename granted
    /// ahead of this request may have moved them, and then the request asks again.
    func withClaims(_ request: fuse_req_t, _ claimsNow: @escaping @Sendable () -> [ClaimRequest], nonblocking: Bool = false,
                    _ body: @escaping @Sendable (ClaimGrant?) -> Void) {
        let claims = claimsNow()
        if claims.isEmpty { return body(nil) }
        let owner = owner(of: request)
        // The common case, no conflict: no wait object, no interrupt registration.
        switch self.claims.tryAcquire(claims, owner: owner) {
        case .success(let grant): return body(grant)
        case .failure where nonblocking: return reply(request, error: .wouldBlock)
        case .failure: break
        }

        let wait = ClaimWait(table: self.claims, request: PendingRequest(raw: request))
        // Registered before queueing: once queued, another thread may answer the request at any
        // moment, after which registering would touch a freed request.
        let context = Unmanaged.passRetained(wait).toOpaque()
        fuse_req_interrupt_func(request, interruptWaitingRequest, context)

        /// Ends the wait from outside the callback: unregistering waits for a callback that is
        /// running now, and afterwards none can start, so the registration's reference can go.
        @Sendable func finish() {
            fuse_req_interrupt_func(wait.request.raw, nil, nil)
            Unmanaged.passUnretained(wait).release()
        }

        let deadline = ContinuousClock.now + options.claimTimeout
        let attempt = self.claims.acquire(claims, owner: owner, deadline: deadline) { [self] outcome in
            guard wait.claimAnswer() else {
                if case .granted(let grant) = outcome { self.claims.release(grant) }
                return
            }
            finish()
            switch outcome {
            case .granted(let grant):
                // Run the operation off the releasing thread (often a FUSE worker serving a release).
                claimWork.async { [self] in
                    if claimsNow() != claims {
                        self.claims.release(grant)
                        withClaims(wait.request.raw, claimsNow, body)
                    } else {
                        body(grant)
                    }
                }
            case .timedOut(let blockers):
                logger.warning("claim wait timed out", metadata: [
                    "owner": "\(owner)", "wanted": "\(claims.map { "\($0.mode) \($0.path)" })",
                    "held by": "\(blockers.map(\.description))",
                ])
                reply(wait.request.raw, error: .resourceBusy)
            }
        }
        switch attempt {
        case .granted(let grant):
            guard wait.claimAnswer() else { return self.claims.release(grant) } // interrupted meanwhile
            finish()
            body(grant)
        case .waiting(let ticket):
            wait.ticket.withLock { $0 = ticket }
            // An interrupt that arrived before the ticket was known could not cancel; do it now.
            if wait.interrupted.load(ordering: .acquiring), wait.cancelQueuedWait(), wait.claimAnswer() {
                finish()
                reply(request, error: .interrupted)
            }
        }
    }
}
