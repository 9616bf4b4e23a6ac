import CFuse
import CoordFSCore
import SystemPackage

/// One question an access puts to the presenters before it goes on.
struct PresenterAsk {
    let kind: PresenterRequestKind
    /// Nil for an item that has no name (reachable only through a descriptor): nobody presents it.
    let path: MountPath?
    /// What the access holds back: only presenters whose user could make it are asked.
    let change: PresentedChange

    init(_ kind: PresenterRequestKind, _ path: MountPath?, holdingBack change: PresentedChange? = nil) {
        self.kind = kind
        self.path = path
        self.change = change ?? PresentedChange(defaultFor: kind)
    }
}

/// What the presenters agreed to before an access: those that stepped aside (relinquish) are
/// told `reacquire` once the access is over, which for a write open is its last release.
struct PresenterConsent: Sendable {
    fileprivate(set) var relinquished: [PresenterVerdict] = []
    /// Whether the access waited for an answer: paths it resolved before may have moved since.
    fileprivate(set) var waited = false

    static let nobodyAsked = PresenterConsent()
}

extension FileSystem {
    /// Asks the presenters concerned, one kind after the other, and then runs `body`: at once
    /// on this thread when nobody is to be asked (one atomic load when no presenter is
    /// registered at all), or later on another thread once the last answer came or the
    /// presenter timeout passed. The FUSE worker is never held meanwhile. A presenter that
    /// refuses a deletion fails the request with EBUSY, an interrupt (Ctrl-C) with EINTR, and
    /// then `body` never runs.
    ///
    /// Presenters are asked before the access takes its claims: a presenter that saves on
    /// request, or holds the item open until it steps aside, would otherwise wait for the very
    /// claim that waits for its answer.
    func consultPresenters(_ request: fuse_req_t, requester: Int32, _ asks: @autoclosure () -> [PresenterAsk],
                           _ body: @escaping @Sendable (PresenterConsent) -> Void) {
        if presenters.isEmpty { return body(.nobodyAsked) }
        let questions = asks().filter { $0.path != nil && presenters.hasPresenters(answering: $0.kind) }
        if questions.isEmpty { return body(.nobodyAsked) }
        consult(PendingRequest(raw: request), requester: requester, questions[...], PresenterConsent(), body)
    }

    private func consult(_ request: PendingRequest, requester: Int32, _ asks: ArraySlice<PresenterAsk>, _ consent: PresenterConsent,
                         _ body: @escaping @Sendable (PresenterConsent) -> Void) {
        var remaining = asks
        while let next = remaining.popFirst() {
            let later = remaining
            // Ctrl-C ends the wait with EINTR; the presenters' answers then only release what they agreed to.
            let wait = InterruptibleWait(request: request, metrics: requestMetrics)
            wait.register()
            if wait.answered.load(ordering: .acquiring) { return reacquire(consent) } // interrupted before it began
            let asked = presenters.ask(next.kind, path: next.path!, holdingBack: next.change, requester: requester, timeout: options.presenterTimeout) { [self] verdict in
                report(verdict)
                var agreed = consent
                agreed.waited = true
                if verdict.kind == .relinquish { agreed.relinquished.append(verdict) }
                guard wait.claimAnswer() else { return reacquire(agreed) }
                wait.unregister()
                if case .refused = verdict.decision {
                    reacquire(agreed)
                    reply(request.raw, error: .resourceBusy)
                    return wait.recordAnswer()
                }
                // Answers arrive on the control socket's loop or the deadline timer: go on elsewhere.
                claimWork.async { [self, agreed] in
                    wait.goOn { consult(request, requester: requester, later, agreed, body) }
                }
            }
            if asked { return }
            guard wait.claimAnswer() else { return reacquire(consent) }
            wait.unregister()
            wait.goOnHere()
        }
        body(consent)
    }

    /// Tells the presenters that stepped aside for an access that it is over.
    func reacquire(_ consent: PresenterConsent) {
        for verdict in consent.relinquished { presenters.reacquire(after: verdict) }
    }

    private func report(_ verdict: PresenterVerdict) {
        if !verdict.timedOut.isEmpty {
            logger.warning("presenters did not answer in time; went on without them", metadata: [
                "request": "\(verdict.kind)", "path": "\(verdict.path)",
                "presenters": "\(verdict.timedOut.map { "\($0.id) (pid \($0.ownerPid))" })",
                "waited": "\(verdict.waited)",
            ])
        }
        if case .refused(let refusals) = verdict.decision {
            logger.notice("a presenter refused a deletion", metadata: [
                "path": "\(verdict.path)",
                "by": "\(refusals.map { "\($0.presenter.id) (pid \($0.presenter.ownerPid)): \($0.reason ?? "no reason given")" })",
            ])
        }
    }
}

extension FileSystem {
    /// Asks the presenters, then takes the claims, and runs `body` with both: what every
    /// coordinated operation does before it acts (`coordinated` and `coordinatedOpen` derive
    /// both from the operation table). `body` replies, and owns the grant and the consent from
    /// then on. When the claims cannot be had (timeout, interrupt, O_NONBLOCK), the presenters
    /// that stepped aside are told to reacquire at once. `caller`: who sent the request, read
    /// once (`origin(of:)`), the owner of the claims and the one presenters are asked for.
    func withPresentersAndClaims(_ request: fuse_req_t, caller: ChangeOrigin, asking asks: @autoclosure () -> [PresenterAsk],
                                 claims requests: OperationClaimRequests, nonblocking: Bool = false,
                                 _ body: @escaping @Sendable (HeldClaims?, PresenterConsent) -> Void) {
        let pending = PendingRequest(raw: request)
        consultPresenters(request, requester: caller.pid, asks()) { [self] (consent: PresenterConsent) in
            var giveBack: (@Sendable () -> Void)? = nil
            if !consent.relinquished.isEmpty { giveBack = { [self] in reacquire(consent) } }
            // The paths resolved before still hold unless the presenters made the access wait.
            withClaims(pending.raw, for: .process(caller.pid), user: caller.uid, resolved: consent.waited ? nil : requests.resolved, requests.now,
                       nonblocking: nonblocking,
                       whenRefused: giveBack) { (held: HeldClaims?) in
                body(held, consent)
            }
        }
    }
}
