import Dispatch
import Synchronization

/// One registered presenter.
///
/// Sendable: `id`, `answers`, `ownerPid`, `label`, `mayMake` and `deliver` never change;
/// `path`, the counters and `isActive` are read and written only under the registry's lock.
public final class PresenterRegistration: @unchecked Sendable {
    public let id: UInt64
    public let answers: PresenterRequestKinds
    public let ownerPid: Int32
    public let label: String
    /// The user whose asks count against `maxAsksPerUser`; nil for presenters not limited.
    public let user: UInt32?
    /// Whether the presenter's user could itself make `change` to a path; nil for presenters
    /// that may hold back anything (root's, the daemon's own).
    fileprivate let mayMake: (@Sendable (PresentedChange, MountPath) -> Bool)?
    fileprivate let deliver: @Sendable (PresenterMessage) -> Void

    // Guarded by PresenterRegistry.state.
    fileprivate var path: MountPath
    fileprivate var isActive = true
    fileprivate var asked: UInt64 = 0
    fileprivate var answered: UInt64 = 0
    fileprivate var timedOut: UInt64 = 0
    fileprivate var refused: UInt64 = 0
    /// Let an ask time out and has answered nothing since: asks skip it at once (a silent
    /// presenter costs every access its timeout once, not on every access).
    fileprivate var isUnresponsive = false

    fileprivate init(id: UInt64, path: MountPath, answers: PresenterRequestKinds, ownerPid: Int32, label: String,
                     user: UInt32?, mayMake: (@Sendable (PresentedChange, MountPath) -> Bool)?,
                     deliver: @escaping @Sendable (PresenterMessage) -> Void) {
        self.id = id
        self.path = path
        self.answers = answers
        self.ownerPid = ownerPid
        self.label = label
        self.user = user
        self.mayMake = mayMake
        self.deliver = deliver
    }

    fileprivate var infoLocked: PresenterInfo {
        PresenterInfo(id: id, path: path, ownerPid: ownerPid, answers: answers, label: label)
    }
}

/// The presenters of one mount and their open requests.
///
/// `ask` runs on FUSE workers before an access proceeds, so its common case — nobody answers
/// that kind of request at all — is one relaxed atomic load, without a lock or an allocation.
/// Otherwise the matching presenters are sent the request (through their `deliver` callback,
/// which must not block), and the completion is called exactly once: when the last one has
/// answered, when a deletion is refused, or at the deadline. Deadlines are timers on one
/// serial dispatch queue, not a thread per request.
public final class PresenterRegistry: Sendable {
    private struct PendingAsk {
        let kind: PresenterRequestKind
        let path: MountPath
        let requester: Int32
        let started: ContinuousClock.Instant
        let asked: [PresenterInfo]
        var awaiting: [UInt64: PresenterInfo]
        var refusals: [PresenterRefusal] = []
        var vanished: [PresenterInfo] = []
        let completion: @Sendable (PresenterVerdict) -> Void
    }

    private struct State {
        var registrations: [PresenterRegistration] = []
        var pending: [UInt64: PendingAsk] = [:]
        var nextRegistrationID: UInt64 = 1
        var nextRequestID: UInt64 = 1
    }

    /// Guards every registration's mutable fields, the list of registrations and the open
    /// requests. A leaf lock (Docs/LOCKING.md): presenters are told, and /proc is read, outside it.
    private let state = Mutex(State())
    /// How many registrations answer each kind (and in all); written under `state`, read without it.
    private let saveCount = Atomic<Int>(0)
    private let relinquishCount = Atomic<Int>(0)
    private let deletionCount = Atomic<Int>(0)
    private let registrationCount = Atomic<Int>(0)

    private let isInTree: @Sendable (_ pid: Int32, _ root: Int32) -> Bool
    private let maxAsksPerUser: Int
    private let timers = DispatchQueue(label: "coordfs.presenter-deadlines")

    /// - Parameters:
    ///   - isInTree: whether `pid` is `root` or a descendant of it; a presenter is not asked
    ///     about, nor told of, what its own process tree does.
    ///   - maxAsksPerUser: unanswered asks the presenters of one (limited) user may have; past
    ///     it they are skipped, as a silent presenter is, until they answer some.
    public init(isInTree: @escaping @Sendable (_ pid: Int32, _ root: Int32) -> Bool = ProcessFacts.isInTreeRule,
                maxAsksPerUser: Int = 256) {
        self.isInTree = isInTree
        self.maxAsksPerUser = maxAsksPerUser
    }

    // MARK: Registration

    /// Registers a presenter of `path`. `deliver` is called from whatever thread raised the
    /// message (often a FUSE worker): it must hand the message on and return at once.
    /// `mayMake` says whether the presenter's user could make a change itself: it is asked
    /// only about those (called outside the registry's lock; it may read the backing).
    public func register(_ path: MountPath, answers: PresenterRequestKinds, ownerPid: Int32, label: String = "",
                         user: UInt32? = nil, mayMake: (@Sendable (PresentedChange, MountPath) -> Bool)? = nil,
                         deliver: @escaping @Sendable (PresenterMessage) -> Void) -> PresenterRegistration {
        state.withLock { state in
            let registration = PresenterRegistration(id: state.nextRegistrationID, path: path, answers: answers,
                                                     ownerPid: ownerPid, label: label, user: user, mayMake: mayMake,
                                                     deliver: deliver)
            state.nextRegistrationID += 1
            state.registrations.append(registration)
            adjustCounts(for: registration.answers, by: 1)
            return registration
        }
    }

    /// Removes a presenter. Requests waiting for it go on without it (and complete if it was
    /// the last one they waited for).
    public func unregister(_ registration: PresenterRegistration) {
        let finished: [(PendingAsk, UInt64)] = state.withLock { state in
            guard registration.isActive else { return [] }
            registration.isActive = false
            state.registrations.removeAll { $0 === registration }
            adjustCounts(for: registration.answers, by: -1)
            var finished: [(PendingAsk, UInt64)] = []
            for (id, var ask) in state.pending {
                guard let info = ask.awaiting.removeValue(forKey: registration.id) else { continue }
                ask.vanished.append(info)
                if ask.awaiting.isEmpty {
                    state.pending[id] = nil
                    finished.append((ask, id))
                } else {
                    state.pending[id] = ask
                }
            }
            return finished
        }
        for (ask, id) in finished {
            ask.completion(verdict(for: ask, id: id, timedOut: []))
        }
    }

    private func adjustCounts(for answers: PresenterRequestKinds, by delta: Int) {
        if answers.contains(.save) { saveCount.add(delta, ordering: .relaxed) }
        if answers.contains(.relinquish) { relinquishCount.add(delta, ordering: .relaxed) }
        if answers.contains(.accommodateDeletion) { deletionCount.add(delta, ordering: .relaxed) }
        registrationCount.add(delta, ordering: .relaxed)
    }

    /// True when some presenter answers `kind` somewhere in the mount: the FUSE layer may skip
    /// building its completion when this is false.
    @inline(__always)
    public func hasPresenters(answering kind: PresenterRequestKind) -> Bool {
        switch kind {
        case .save: return saveCount.load(ordering: .relaxed) > 0
        case .relinquish: return relinquishCount.load(ordering: .relaxed) > 0
        case .accommodateDeletion: return deletionCount.load(ordering: .relaxed) > 0
        }
    }

    /// True when no presenter is registered at all.
    @inline(__always)
    public var isEmpty: Bool { registrationCount.load(ordering: .relaxed) == 0 }

    /// Whether a registration at `presented` is concerned by `kind` on `path`. Reading concerns
    /// presenters of the item and of the directories above it (a directory presenter presents
    /// its contents); writing, moving and deleting concern those below it too (deleting a
    /// directory deletes what they present).
    private static func concerns(_ presented: MountPath, _ path: MountPath, downward: Bool) -> Bool {
        path.isWithin(presented) || (downward && presented.isWithin(path))
    }

    // MARK: Requests

    /// Asks every presenter concerned by `kind` on `path` whose user could make `change`
    /// itself (except those in the requester's own process tree) and calls `completion` once when the access may go on or must fail: from
    /// the thread of the last answer or of the deadline timer, which can be before `ask` returns
    /// (a presenter may answer from inside `deliver`).
    ///
    /// - Returns: false, at once and without calling `completion`, when nobody is to be asked:
    ///   the caller proceeds without waiting.
    public func ask(_ kind: PresenterRequestKind, path: MountPath, holdingBack change: PresentedChange? = nil,
                    requester: Int32, timeout: Duration,
                    completion: @escaping @Sendable (PresenterVerdict) -> Void) -> Bool {
        guard hasPresenters(answering: kind) else { return false }
        let downward = kind != .save
        let candidates: [PresenterRegistration] = state.withLock { state in
            state.registrations.filter { $0.answers.contains(kind) && Self.concerns($0.path, path, downward: downward) }
        }
        // Reading /proc and the backing happens outside the lock.
        let change = change ?? PresentedChange(defaultFor: kind)
        let chosen = candidates.filter { !isInTree(requester, $0.ownerPid) && $0.mayMake?(change, path) != false }
        guard !chosen.isEmpty else { return false }

        let started = ContinuousClock.now
        let deadline = started.advanced(by: timeout)
        let sends: [(PresenterRegistration, PresenterRequest)]? = state.withLock { state in
            var asksOf = Self.unansweredAsksByUser(state, of: chosen)
            let live = chosen.filter { registration in
                guard registration.isActive && !registration.isUnresponsive else { return false }
                guard let user = registration.user else { return true }
                guard asksOf[user, default: 0] < maxAsksPerUser else { return false }
                asksOf[user, default: 0] += 1
                return true
            }
            guard !live.isEmpty else { return nil }
            let id = state.nextRequestID
            state.nextRequestID += 1
            let infos = live.map(\.infoLocked)
            state.pending[id] = PendingAsk(kind: kind, path: path, requester: requester, started: started, asked: infos,
                                           awaiting: Dictionary(uniqueKeysWithValues: infos.map { ($0.id, $0) }),
                                           completion: completion)
            return live.map { registration in
                registration.asked += 1
                return (registration, PresenterRequest(id: id, kind: kind, path: path, presentedPath: registration.path,
                                                       presenter: registration.id, requester: requester, deadline: deadline))
            }
        }
        guard let sends, let id = sends.first?.1.id else { return false }
        timers.asyncAfter(deadline: .now() + Self.dispatchInterval(timeout)) { [self] in
            expire(id)
        }
        for (registration, request) in sends {
            registration.deliver(.request(request))
        }
        return true
    }

    /// How many asks each user among `chosen`'s limited ones has unanswered: a scan of the open
    /// requests, which only asks that reach a limited user's presenter pay for.
    private static func unansweredAsksByUser(_ state: State, of chosen: [PresenterRegistration]) -> [UInt32: Int] {
        let users = Set(chosen.compactMap(\.user))
        guard !users.isEmpty, !state.pending.isEmpty else { return [:] }
        let userOf = Dictionary(uniqueKeysWithValues: state.registrations.compactMap { registration in
            registration.user.flatMap { users.contains($0) ? (registration.id, $0) : nil }
        })
        var counts: [UInt32: Int] = [:]
        for ask in state.pending.values {
            for id in ask.awaiting.keys {
                if let user = userOf[id] { counts[user, default: 0] += 1 }
            }
        }
        return counts
    }

    /// Records a presenter's answer. Returns false when the request is no longer waiting for
    /// this presenter (answered before, timed out, or never asked it). Any answer, even a
    /// late one, shows the presenter is there again: it is asked again from now on.
    @discardableResult
    public func answer(request id: UInt64, presenter: UInt64, ok: Bool, reason: String? = nil) -> Bool {
        let outcome: (accepted: Bool, finished: PendingAsk?) = state.withLock { state in
            let registration = state.registrations.first { $0.id == presenter }
            registration?.isUnresponsive = false
            guard var ask = state.pending[id], let info = ask.awaiting.removeValue(forKey: presenter) else { return (false, nil) }
            registration?.answered += 1
            if !ok && ask.kind == .accommodateDeletion {
                registration?.refused += 1
                ask.refusals.append(PresenterRefusal(presenter: info, reason: reason))
            }
            // A refused deletion need not wait for the others.
            if ask.awaiting.isEmpty || !ask.refusals.isEmpty {
                state.pending[id] = nil
                return (true, ask)
            }
            state.pending[id] = ask
            return (true, nil)
        }
        if let finished = outcome.finished {
            finished.completion(verdict(for: finished, id: id, timedOut: []))
        }
        return outcome.accepted
    }

    private func expire(_ id: UInt64) {
        let finished: PendingAsk? = state.withLock { state in
            guard let ask = state.pending.removeValue(forKey: id) else { return nil }
            for presenterID in ask.awaiting.keys {
                guard let registration = state.registrations.first(where: { $0.id == presenterID }) else { continue }
                registration.timedOut += 1
                registration.isUnresponsive = true
            }
            return ask
        }
        if let finished {
            Instruments.presenterTimeouts.increment()
            let late = finished.awaiting.values.sorted { $0.id < $1.id }
            finished.completion(verdict(for: finished, id: id, timedOut: late))
        }
    }

    private func verdict(for ask: PendingAsk, id: UInt64, timedOut: [PresenterInfo]) -> PresenterVerdict {
        PresenterVerdict(request: id, kind: ask.kind, path: ask.path,
                         decision: ask.refusals.isEmpty ? .proceed : .refused(by: ask.refusals),
                         asked: ask.asked, timedOut: timedOut, vanished: ask.vanished,
                         waited: ContinuousClock.now - ask.started)
    }

    private static func dispatchInterval(_ duration: Duration) -> DispatchTimeInterval {
        let (seconds, attoseconds) = duration.components
        let nanoseconds = max(0, seconds) * 1_000_000_000 + max(0, attoseconds) / 1_000_000_000
        return .nanoseconds(Int(clamping: nanoseconds))
    }

    // MARK: Notifications

    /// Tells the presenters concerned that something happened to `path` (for `didMove`, that it
    /// is now `destination`; presenters of it or beneath it follow it there). The process tree
    /// that made the change is not told.
    public func notify(_ kind: PresenterNotificationKind, path: MountPath, destination: MountPath? = nil, version: Int64? = nil, origin: Int32) {
        guard !isEmpty else { return }
        let downward = kind == .didMove || kind == .didDelete
        let recipients: [(PresenterRegistration, PresenterNotification)] = state.withLock { state in
            var recipients: [(PresenterRegistration, PresenterNotification)] = []
            for registration in state.registrations {
                let concerned = Self.concerns(registration.path, path, downward: downward)
                    || (kind == .didMove && destination.map { Self.concerns(registration.path, $0, downward: false) } == true)
                guard concerned else { continue }
                if kind == .didMove, let destination, registration.path.isWithin(path) {
                    registration.path = MountPath(components: destination.components + registration.path.components.dropFirst(path.components.count))
                }
                recipients.append((registration, PresenterNotification(kind: kind, path: path, destination: destination,
                                                                       presentedPath: registration.path, presenter: registration.id,
                                                                       version: version)))
            }
            return recipients
        }
        for (registration, notification) in recipients where !isInTree(origin, registration.ownerPid) {
            registration.deliver(.notification(notification))
        }
    }

    /// Tells the presenters that relinquished for an access that it is over. Call it after
    /// the operation (and after `notify(.didMove, …)` when it moved the item, so they are told
    /// the new path).
    public func reacquire(after verdict: PresenterVerdict) {
        guard verdict.kind == .relinquish else { return }
        let asked = Set(verdict.asked.map(\.id))
        let recipients: [(PresenterRegistration, PresenterNotification)] = state.withLock { state in
            state.registrations.filter { asked.contains($0.id) }.map { registration in
                (registration, PresenterNotification(kind: .reacquire, path: verdict.path, destination: nil,
                                                     presentedPath: registration.path, presenter: registration.id))
            }
        }
        for (registration, notification) in recipients {
            registration.deliver(.notification(notification))
        }
    }

    // MARK: Status

    public func presenters() -> [PresenterStatus] {
        state.withLock { state in
            var pendingCount: [UInt64: Int] = [:]
            for ask in state.pending.values {
                for id in ask.awaiting.keys { pendingCount[id, default: 0] += 1 }
            }
            return state.registrations.map {
                PresenterStatus(info: $0.infoLocked, pending: pendingCount[$0.id] ?? 0, asked: $0.asked,
                                answered: $0.answered, timedOut: $0.timedOut, refused: $0.refused, unresponsive: $0.isUnresponsive)
            }
        }
    }

    /// How many requests have been put to presenters since the mount started (each may go to several).
    public var requestsAsked: UInt64 {
        state.withLock { $0.nextRequestID - 1 }
    }

    public func pendingRequests() -> [PendingPresenterRequest] {
        let now = ContinuousClock.now
        return state.withLock { state in
            state.pending.map { id, ask in
                PendingPresenterRequest(id: id, kind: ask.kind, path: ask.path, requester: ask.requester,
                                        awaiting: ask.awaiting.keys.sorted(), waiting: now - ask.started)
            }.sorted { $0.id < $1.id }
        }
    }

    /// The presenter's path now (it follows moves), or nil once unregistered.
    public func path(of registration: PresenterRegistration) -> MountPath? {
        state.withLock { _ in registration.isActive ? registration.path : nil }
    }
}
