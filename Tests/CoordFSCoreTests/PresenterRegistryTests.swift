import Glibc
import Synchronization
import Testing
@testable import CoordFSCore


/// Collects what the registry delivers to one presenter.
private final class Inbox: Sendable {
    let messages = Mutex<[PresenterMessage]>([])
    var deliver: @Sendable (PresenterMessage) -> Void { { message in self.messages.withLock { $0.append(message) } } }
    var requests: [PresenterRequest] {
        messages.withLock { $0.compactMap { if case .request(let request) = $0 { request } else { nil } } }
    }
    var notifications: [PresenterNotification] {
        messages.withLock { $0.compactMap { if case .notification(let notification) = $0 { notification } else { nil } } }
    }
}

/// Waits for the single verdict of one ask.
private final class VerdictBox: Sendable {
    let verdicts = Mutex<[PresenterVerdict]>([])
    var completion: @Sendable (PresenterVerdict) -> Void { { verdict in self.verdicts.withLock { $0.append(verdict) } } }
    /// Looks once more after the deadline: on a loaded machine the polling task itself may
    /// not run again until long after the verdict came.
    func wait(for duration: Duration = .seconds(20)) async -> PresenterVerdict? {
        let deadline = ContinuousClock.now + duration
        while ContinuousClock.now < deadline {
            if let verdict = verdicts.withLock({ $0.first }) { return verdict }
            try? await Task.sleep(for: .milliseconds(2))
        }
        return verdicts.withLock { $0.first }
    }
    var count: Int { verdicts.withLock { $0.count } }
}

private final class Counter: Sendable {
    private let count = Atomic<Int>(0)
    func increment() { count.add(1, ordering: .relaxed) }
    var value: Int { count.load(ordering: .relaxed) }
}

/// A process tree without /proc: pid 100 is the parent of 101.
private let fakeTree: @Sendable (Int32, Int32) -> Bool = { pid, root in pid == root || (pid == 101 && root == 100) }

@Suite struct PresenterRegistryTests {
    @Test func nobodyRegisteredMeansNoWait() {
        let registry = PresenterRegistry(isInTree: fakeTree)
        #expect(!registry.hasPresenters(answering: .save))
        let box = VerdictBox()
        #expect(!registry.ask(.save, path: path("/a"), requester: 1, timeout: .seconds(1), completion: box.completion))
        #expect(box.count == 0)
    }

    @Test func presentersOfOtherPathsOrOtherKindsAreNotAsked() {
        let registry = PresenterRegistry(isInTree: fakeTree)
        let inbox = Inbox()
        _ = registry.register(path("/docs/a"), answers: [.save], ownerPid: 200, deliver: inbox.deliver)
        #expect(!registry.ask(.save, path: path("/docs/b"), requester: 1, timeout: .seconds(1)) { _ in })
        #expect(!registry.ask(.relinquish, path: path("/docs/a"), requester: 1, timeout: .seconds(1)) { _ in })
        // Reading a directory does not ask presenters of what is inside it.
        #expect(!registry.ask(.save, path: path("/docs"), requester: 1, timeout: .seconds(1)) { _ in })
        #expect(inbox.requests.isEmpty)
    }

    /// A presenter is asked only about changes its user could make (the check the control
    /// server gives it); one without a check is asked about everything.
    @Test func presentersAreAskedOnlyAboutChangesTheyCouldMake() async throws {
        let registry = PresenterRegistry(isInTree: fakeTree)
        let writer = Inbox(), reader = Inbox(), trusted = Inbox()
        let checked = Mutex<[String]>([])
        _ = registry.register(path("/docs/f"), answers: .all, ownerPid: 200, mayMake: { change, path in
            checked.withLock { $0.append("\(change) \(path)") }
            return change == .write
        }, deliver: writer.deliver)
        _ = registry.register(path("/docs"), answers: .all, ownerPid: 300, mayMake: { _, _ in false }, deliver: reader.deliver)
        _ = registry.register(path("/docs"), answers: .all, ownerPid: 400, deliver: trusted.deliver)

        #expect(registry.ask(.save, path: path("/docs/f"), requester: 1, timeout: .seconds(20)) { _ in })
        #expect(registry.ask(.relinquish, path: path("/docs/f"), holdingBack: .removal, requester: 1, timeout: .seconds(20)) { _ in })
        let deletion = VerdictBox()
        #expect(registry.ask(.accommodateDeletion, path: path("/docs/f"), requester: 1, timeout: .seconds(20), completion: deletion.completion))
        #expect(writer.requests.map(\.kind) == [.save])
        #expect(reader.requests.isEmpty)
        #expect(trusted.requests.map(\.kind) == [.save, .relinquish, .accommodateDeletion])
        #expect(checked.withLock { $0 } == ["write /docs/f", "removal /docs/f", "removal /docs/f"])

        // The reader's refusal could not count: it was never asked. The trusted one's does.
        let request = try #require(trusted.requests.last)
        registry.answer(request: request.id, presenter: request.presenter, ok: false, reason: "busy")
        let verdict = try #require(await deletion.wait())
        #expect(!verdict.mayProceed && verdict.asked.map(\.ownerPid) == [400])

        // Nobody who could make the change: nothing to wait for.
        #expect(!registry.ask(.accommodateDeletion, path: path("/docs/g"), requester: 400, timeout: .seconds(20)) { _ in })
    }

    /// The presenters of one limited user have at most `maxAsksPerUser` asks unanswered, over
    /// all of them; past it they are skipped until they answer. Unlimited ones are always asked.
    @Test func aUsersUnansweredAsksAreBounded() {
        let registry = PresenterRegistry(isInTree: fakeTree, maxAsksPerUser: 2)
        let first = Inbox(), second = Inbox(), unlimited = Inbox()
        _ = registry.register(path("/a"), answers: [.save], ownerPid: 200, user: 7, deliver: first.deliver)
        _ = registry.register(path("/b"), answers: [.save], ownerPid: 201, user: 7, deliver: second.deliver)
        _ = registry.register(path("/a"), answers: [.save], ownerPid: 300, deliver: unlimited.deliver)
        #expect(registry.ask(.save, path: path("/a"), requester: 1, timeout: .seconds(20)) { _ in })
        #expect(registry.ask(.save, path: path("/b"), requester: 1, timeout: .seconds(20)) { _ in })
        #expect(!registry.ask(.save, path: path("/b"), requester: 1, timeout: .seconds(20)) { _ in }, "user 7 has 2 unanswered")
        #expect(registry.ask(.save, path: path("/a"), requester: 1, timeout: .seconds(20)) { _ in }, "the unlimited one still is asked")
        #expect(first.requests.count == 1 && second.requests.count == 1 && unlimited.requests.count == 2)
        let answered = first.requests[0]
        registry.answer(request: answered.id, presenter: answered.presenter, ok: true)
        #expect(registry.ask(.save, path: path("/b"), requester: 1, timeout: .seconds(20)) { _ in }, "one answered: room for one more")
        #expect(second.requests.count == 2)
    }

    @Test func askWaitsForEveryAnswerThenProceeds() async throws {
        let registry = PresenterRegistry(isInTree: fakeTree)
        let first = Inbox(), second = Inbox()
        let a = registry.register(path("/docs"), answers: .all, ownerPid: 200, label: "dir", deliver: first.deliver)
        let b = registry.register(path("/docs/f"), answers: [.save], ownerPid: 300, deliver: second.deliver)
        let box = VerdictBox()
        #expect(registry.ask(.save, path: path("/docs/f"), requester: 1, timeout: .seconds(10), completion: box.completion))
        let request = try #require(first.requests.first)
        #expect(request.kind == .save && request.path == path("/docs/f") && request.presentedPath == path("/docs"))
        #expect(second.requests.first?.id == request.id)
        #expect(registry.pendingRequests().first?.awaiting == [a.id, b.id])
        #expect(registry.answer(request: request.id, presenter: a.id, ok: true))
        #expect(box.count == 0)
        #expect(!registry.answer(request: request.id, presenter: a.id, ok: true))  // twice does not count
        #expect(registry.answer(request: request.id, presenter: b.id, ok: true))
        let verdict = try #require(await box.wait())
        #expect(verdict.mayProceed && verdict.timedOut.isEmpty && verdict.asked.count == 2)
        #expect(registry.pendingRequests().isEmpty)
    }

    @Test func aPresenterThatNeverAnswersIsSkippedAtTheDeadline() async throws {
        let registry = PresenterRegistry(isInTree: fakeTree)
        let silent = Inbox(), prompt = Inbox()
        let quiet = registry.register(path("/f"), answers: [.relinquish], ownerPid: 200, deliver: silent.deliver)
        let quick = registry.register(path("/f"), answers: [.relinquish], ownerPid: 300, deliver: prompt.deliver)
        let box = VerdictBox()
        let started = ContinuousClock.now
        #expect(registry.ask(.relinquish, path: path("/f"), requester: 1, timeout: .milliseconds(200), completion: box.completion))
        registry.answer(request: try #require(prompt.requests.first).id, presenter: quick.id, ok: true)
        let verdict = try #require(await box.wait())
        #expect(verdict.mayProceed)
        #expect(verdict.timedOut.map(\.id) == [quiet.id])
        // The registry's own measure: the test's polling may be slowed by other suites.
        #expect(verdict.waited >= .milliseconds(200) && verdict.waited < .seconds(1))
        #expect(ContinuousClock.now - started >= .milliseconds(200))
        try await Task.sleep(for: .milliseconds(50))
        #expect(box.count == 1)
        #expect(registry.presenters().first { $0.info.id == quiet.id }?.timedOut == 1)
        // A late answer is not counted.
        #expect(!registry.answer(request: verdict.request, presenter: quiet.id, ok: true))
    }

    @Test func aRefusedDeletionFailsAtOnce() async throws {
        let registry = PresenterRegistry(isInTree: fakeTree)
        let refuser = Inbox(), slow = Inbox()
        let no = registry.register(path("/keep"), answers: [.accommodateDeletion], ownerPid: 200, deliver: refuser.deliver)
        _ = registry.register(path("/keep/inner"), answers: [.accommodateDeletion], ownerPid: 300, deliver: slow.deliver)
        let box = VerdictBox()
        // Deleting the directory concerns presenters of what is inside it too.
        #expect(registry.ask(.accommodateDeletion, path: path("/keep"), requester: 1, timeout: .seconds(30), completion: box.completion))
        #expect(slow.requests.count == 1)
        registry.answer(request: try #require(refuser.requests.first).id, presenter: no.id, ok: false, reason: "unsaved work")
        let verdict = try #require(await box.wait(for: .seconds(2)))
        guard case .refused(let refusals) = verdict.decision else {
            Issue.record("expected a refusal, got \(verdict.decision)")
            return
        }
        #expect(refusals.map(\.presenter.id) == [no.id])
        #expect(refusals.first?.reason == "unsaved work")
    }

    @Test func refusingASaveDoesNotStopTheRead() async throws {
        let registry = PresenterRegistry(isInTree: fakeTree)
        let inbox = Inbox()
        let presenter = registry.register(path("/f"), answers: [.save], ownerPid: 200, deliver: inbox.deliver)
        let box = VerdictBox()
        #expect(registry.ask(.save, path: path("/f"), requester: 1, timeout: .seconds(5), completion: box.completion))
        registry.answer(request: try #require(inbox.requests.first).id, presenter: presenter.id, ok: false)
        #expect(try #require(await box.wait()).mayProceed)
    }

    @Test func theRequestersOwnTreeIsNotAsked() async throws {
        let registry = PresenterRegistry(isInTree: fakeTree)
        let own = Inbox(), other = Inbox()
        _ = registry.register(path("/f"), answers: .all, ownerPid: 100, deliver: own.deliver)
        // Only the requester's own tree is there: nothing to wait for.
        #expect(!registry.ask(.save, path: path("/f"), requester: 101, timeout: .seconds(5)) { _ in })
        let stranger = registry.register(path("/f"), answers: .all, ownerPid: 300, deliver: other.deliver)
        let box = VerdictBox()
        #expect(registry.ask(.save, path: path("/f"), requester: 101, timeout: .seconds(5), completion: box.completion))
        #expect(own.requests.isEmpty)
        registry.answer(request: try #require(other.requests.first).id, presenter: stranger.id, ok: true)
        #expect(try #require(await box.wait()).asked.map(\.id) == [stranger.id])
    }

    @Test func unregisteringWhileAskedCompletesWithoutIt() async throws {
        let registry = PresenterRegistry(isInTree: fakeTree)
        let inbox = Inbox()
        let presenter = registry.register(path("/f"), answers: .all, ownerPid: 200, deliver: inbox.deliver)
        let box = VerdictBox()
        #expect(registry.ask(.relinquish, path: path("/f"), requester: 1, timeout: .seconds(30), completion: box.completion))
        registry.unregister(presenter)
        let verdict = try #require(await box.wait(for: .seconds(2)))
        #expect(verdict.mayProceed && verdict.vanished.map(\.id) == [presenter.id])
        #expect(!registry.hasPresenters(answering: .relinquish) && registry.isEmpty)
    }

    @Test func notificationsReachConcernedPresentersAndFollowMoves() throws {
        let registry = PresenterRegistry(isInTree: fakeTree)
        let directory = Inbox(), file = Inbox(), elsewhere = Inbox(), own = Inbox()
        _ = registry.register(path("/a"), answers: [], ownerPid: 200, deliver: directory.deliver)
        let filePresenter = registry.register(path("/a/f"), answers: [], ownerPid: 300, deliver: file.deliver)
        _ = registry.register(path("/b"), answers: [], ownerPid: 400, deliver: elsewhere.deliver)
        _ = registry.register(path("/a"), answers: [], ownerPid: 100, deliver: own.deliver)

        registry.notify(.didChange, path: path("/a/f"), origin: 101)
        #expect(directory.notifications.map(\.kind) == [.didChange])
        #expect(file.notifications.map(\.kind) == [.didChange])
        #expect(elsewhere.notifications.isEmpty && own.notifications.isEmpty)

        registry.notify(.didMove, path: path("/a"), destination: path("/c"), origin: 1)
        #expect(registry.path(of: filePresenter) == path("/c/f"))
        let moved = try #require(file.notifications.last)
        #expect(moved.kind == .didMove && moved.destination == path("/c") && moved.presentedPath == path("/c/f"))

        registry.notify(.didDelete, path: path("/c"), origin: 1)
        #expect(file.notifications.last?.kind == .didDelete)
        #expect(elsewhere.notifications.isEmpty)
    }

    @Test func reacquireGoesToThoseWhoWereAskedToRelinquish() async throws {
        let registry = PresenterRegistry(isInTree: fakeTree)
        let inbox = Inbox()
        let presenter = registry.register(path("/f"), answers: [.relinquish], ownerPid: 200, deliver: inbox.deliver)
        let box = VerdictBox()
        #expect(registry.ask(.relinquish, path: path("/f"), requester: 1, timeout: .seconds(5), completion: box.completion))
        registry.answer(request: try #require(inbox.requests.first).id, presenter: presenter.id, ok: true)
        let verdict = try #require(await box.wait())
        registry.reacquire(after: verdict)
        #expect(inbox.notifications.map(\.kind) == [.reacquire])
    }

    @Test func manyConcurrentAsksEachCompleteOnce() async throws {
        let registry = PresenterRegistry(isInTree: fakeTree)
        let answered = Counter()
        let holder = Mutex<PresenterRegistry?>(registry)
        // Answers from the delivering thread, as an eager presenter would.
        let registration = Mutex<UInt64>(0)
        let id = registry.register(path("/"), answers: .all, ownerPid: 200) { message in
            guard case .request(let request) = message, let registry = holder.withLock({ $0 }) else { return }
            registry.answer(request: request.id, presenter: registration.withLock { $0 }, ok: true)
        }.id
        registration.withLock { $0 = id }
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<400 {
                group.addTask {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        let asked = registry.ask(.save, path: MountPath(components: ["f\(index)"]), requester: 1, timeout: .seconds(30)) { _ in
                            answered.increment()
                            continuation.resume()
                        }
                        if !asked { continuation.resume() }
                    }
                }
            }
        }
        #expect(answered.value == 400)
        #expect(registry.presenters().first?.answered == 400)
    }
}

@Suite struct PresenterProcessTreeTests {
    @Test func aChildIsInItsParentsTreeAndNotTheOtherWayRound() {
        let me = getpid()
        let parent = getppid()
        #expect(ProcessFacts.isInTree(me, rootedAt: me))
        #expect(ProcessFacts.isInTree(me, rootedAt: parent))
        #expect(!ProcessFacts.isInTree(parent, rootedAt: me))
        #expect(!ProcessFacts.isInTree(me, rootedAt: 999_999_999))
        #expect(ProcessFacts().name(of: me)?.isEmpty == false)
        #expect(ProcessFacts.supplementaryGroups(of: me) != nil)
    }
}

extension PresenterRegistryTests {
    /// A presenter that let an ask time out costs the next accesses nothing: it is skipped at
    /// once until it answers something (a late answer counts), then asked again.
    @Test func aSilentPresenterIsSkippedAtOnceUntilItAnswers() async throws {
        let registry = PresenterRegistry(isInTree: fakeTree)
        let silent = Inbox()
        let quiet = registry.register(path("/f"), answers: [.save], ownerPid: 200, deliver: silent.deliver)
        let first = VerdictBox()
        #expect(registry.ask(.save, path: path("/f"), requester: 1, timeout: .milliseconds(100), completion: first.completion))
        let timedOut = try #require(await first.wait())
        #expect(timedOut.timedOut.map(\.id) == [quiet.id])
        #expect(registry.presenters().first?.unresponsive == true)

        #expect(!registry.ask(.save, path: path("/f"), requester: 1, timeout: .seconds(30)) { _ in }, "skipped at once: no wait")
        #expect(silent.requests.count == 1, "not asked again")
        #expect(registry.presenters().first?.asked == 1)

        // Its late answer is not accepted for the ask it missed, but shows it is there again.
        #expect(!registry.answer(request: timedOut.request, presenter: quiet.id, ok: true))
        #expect(registry.presenters().first?.unresponsive == false)
        let again = VerdictBox()
        #expect(registry.ask(.save, path: path("/f"), requester: 1, timeout: .seconds(30), completion: again.completion))
        let request = try #require(silent.requests.last)
        #expect(silent.requests.count == 2)
        #expect(registry.answer(request: request.id, presenter: quiet.id, ok: true))
        #expect(try #require(await again.wait()).timedOut.isEmpty)
    }
}
