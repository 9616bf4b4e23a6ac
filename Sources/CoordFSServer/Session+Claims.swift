import CoordFSCore
import Dispatch
import CoordFSProtocol
import SystemPackage
import Logging
import NIOCore

// A session's explicit claims: taken through ClaimAuthority.acquire like any file
// operation's, released on request or when the client goes.
extension Session {
    func claim(_ id: RequestID, _ body: Request.Claim) {
        let readTexts = body.read ?? []
        let writeTexts = body.write ?? []
        let options = context.options
        guard !(readTexts.isEmpty && writeTexts.isEmpty) else {
            return fail(id, .badRequest, "name at least one path in \"read\" or \"write\"")
        }
        guard readTexts.count + writeTexts.count <= options.maxPathsPerClaim else {
            return fail(id, .limit, "at most \(options.maxPathsPerClaim) paths in one claim")
        }
        guard held.count + waiting.count < options.maxClaimsPerConnection else {
            return fail(id, .limit, "at most \(options.maxClaimsPerConnection) claims held or waiting per connection")
        }
        if let refusal = overUserLimit(\.claims, \.claims, "claims held or waiting", flag: "claims") { return fail(id, .limit, refusal) }
        guard waiting[id] == nil else {
            return fail(id, .badRequest, "a claim with id \(id) is still waiting; use another id")
        }
        if let wait = body.wait, !(wait.isFinite && wait >= 0) {
            return fail(id, .badRequest, "\"wait\" is a number of seconds, 0 or more")
        }
        // A `read` claim is a read claim; a `write` claim is exclusive: nobody else sees or
        // changes the path (Docs/LOCKING.md, "Modes"). A path named in both lists is claimed exclusive.
        var modes: [MountPath: ClaimMode] = [:]
        for (texts, mode) in [(readTexts, ClaimMode.read), (writeTexts, .exclusive)] {
            for text in texts {
                switch admit(text) {
                case .failure(let detail): return fail(id, detail)
                case .success(let path): if modes[path] != .exclusive { modes[path] = mode }
                }
            }
        }
        // A user may hold back only what it may change (issue 32): an exclusive claim keeps
        // everyone else from changing the path, so it needs the write permission a change of
        // it would (to write the item, or to make it in its directory). A read claim needs to
        // read it, as every claim does (`admit`).
        if let forbidden = modes.first(where: { $0.value == .exclusive && !gate.mayChange($0.key) })?.key {
            return fail(id, .notPermitted, "\(forbidden): uid \(peer.uid) may not change it, so it may not claim it for writing")
        }
        let requests = modes.map { ClaimRequest($0.key, $0.value) }.sorted { $0.path < $1.path }
        let read = requests.filter { $0.mode == .read }.map(\.path.filePath)
        let write = requests.filter { $0.mode == .exclusive }.map(\.path.filePath)

        let started = ContinuousClock.now
        let nonblocking = body.nonblock == true || body.wait == 0
        let limit = body.wait.map { Duration.seconds(clamping: $0) } ?? options.defaultClaimWait
        let ask = Ask(read: read, write: write, started: started)
        switch context.authority.acquire(requests, owner: claimOwner, user: peer.uid, deadline: started.advanced(by: min(limit, options.maxClaimWait)),
                                         nonblocking: nonblocking) {
        case .held(let claims):
            grantClaim(id, claims, ask)
        case .refused(let refusal):
            refuseClaim(id, refusal, ask)
        case .waiting(let ticket):
            waiting[id] = Waiting(ticket: ticket, ask: ask)
            let context = self.context
            let sessionID = self.id
            ticket.whenDone { outcome in
                context.eventLoop.execute {
                    if let session = context.sessions[sessionID] {
                        session.claimOutcome(id, outcome)
                    } else if case .success(let claims) = outcome {
                        context.authority.release(claims)
                    }
                }
            }
        }
    }

    func grantClaim(_ id: RequestID, _ claims: HeldClaims, _ ask: Ask) {
        let claimID = nextClaimID
        nextClaimID += 1
        held[claimID] = Held(claims: claims, read: ask.read, write: ask.write)
        reply(id, Request.Claim.Reply(claim: claimID, read: ask.read, write: ask.write, waited: (ContinuousClock.now - ask.started).seconds))
    }

    func refuseClaim(_ id: RequestID, _ refusal: ClaimRefusal, _ ask: Ask) {
        let now = ContinuousClock.now
        let waited = Self.format((now - ask.started).seconds)
        switch refusal {
        case .wouldBlock(let blockers):
            fail(id, .conflict, "\(Self.describe(blockers, now: now)) (asked not to wait)",
                 blockers: blockers.map { ClaimHolderRecord($0, now: now) })
        case .timedOut(let blockers):
            fail(id, .timeout, "\(Self.describe(blockers, now: now)) (gave up after \(waited) s)",
                 blockers: blockers.map { ClaimHolderRecord($0, now: now) })
        case .hosts(.timedOut(let holders)):
            fail(id, .timeout, "held on other hosts: \(holders.joined(separator: "; ")) (gave up after \(waited) s)")
        case .hosts(.wouldBlock):
            fail(id, .conflict, "held on another host (asked not to wait)")
        case .hosts(.cutOff(let reason)):
            fail(id, .cutOff, "this host cannot reach the cluster's database: \(reason)")
        case .cancelled:
            fail(id, .cancelled, "the claim was cancelled before it was granted")
        }
    }

    func claimOutcome(_ id: RequestID, _ outcome: ClaimTicket.Outcome) {
        guard !isClosed, let pending = waiting.removeValue(forKey: id) else {
            if case .success(let claims) = outcome { context.authority.release(claims) }
            return
        }
        switch outcome {
        case .success(let claims): grantClaim(id, claims, pending.ask)
        case .failure(let refusal): refuseClaim(id, refusal, pending.ask)
        }
        flush()
    }

    /// One of this session's claims kept another user waiting for the break time and the table
    /// took it: forget it (giving back what other hosts covered), and tell the client.
    func claimBroken(_ broken: ClaimBreak) {
        guard let (claimID, claim) = held.first(where: { $0.value.claims.grant.id == broken.grant }) else { return }
        held[claimID] = nil
        context.authority.release(claim.claims)
        let held = broken.holds.map { broken.at - $0.since }.max() ?? .zero
        let (byPid, _) = Self.pid(of: broken.brokenBy)
        push(.broken(BrokenPush(claim: claimID, read: claim.read, write: claim.write, byUid: broken.brokenByUser, byPid: byPid,
                                held: held.seconds, waited: broken.waited.seconds)))
        flush()
    }

    private static func pid(of owner: ClaimOwner) -> (Int32, UInt64?) {
        switch owner {
        case .process(let pid): (pid, nil)
        case .client(let session, let tree): (tree, session)
        }
    }

    func release(_ id: RequestID, _ body: Request.Release) {
        guard let claim = held.removeValue(forKey: body.claim) else {
            return fail(id, .notFound, "no claim \(body.claim) is held on this connection")
        }
        context.authority.release(claim.claims)
        reply(id, Empty())
    }

    func cancel(_ id: RequestID, _ body: Request.Cancel) {
        guard let pending = waiting[body.request], pending.ticket.cancel() else {
            // Not waiting, or its outcome is already on the way (perhaps "cancelled"): that reply will come.
            return reply(id, Request.Cancel.Reply(cancelled: false))
        }
        waiting[body.request] = nil
        fail(body.request, .cancelled, "the claim was cancelled before it was granted")
        reply(id, Request.Cancel.Reply(cancelled: true))
    }

    static func describe(_ blockers: [ClaimHolder], now: ContinuousClock.Instant) -> String {
        guard let first = blockers.first else { return "the paths are claimed by others" }
        let owner = ClaimOwnerRecord(first.owner)
        let more = blockers.count > 1 ? " and \(blockers.count - 1) more" : ""
        return "\(first.path) is held (\(ClaimModeName(first.mode))) by \(owner) for \(format((now - first.since).seconds)) s\(more)"
    }

    static func format(_ seconds: Double) -> String {
        let tenths = (seconds * 10).rounded() / 10
        return String(tenths)
    }

    // MARK: Status view

    /// This session's claims, for status.
    var heldClaims: [(claim: UInt64, read: [FilePath], write: [FilePath])] {
        held.map { ($0.key, $0.value.read, $0.value.write) }.sorted { $0.claim < $1.claim }
    }
}
