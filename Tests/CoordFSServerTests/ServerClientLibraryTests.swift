import CoordFSClient
import CoordFSCore
import Foundation
import Glibc
import Synchronization
import Testing

/// Runs an async test body against a fresh server.
func withServerAsync(queueCapacity: Int = EventHub.defaultQueueCapacity, historyCapacity: Int = EventHub.defaultHistoryCapacity,
                     _ body: (ServerFixture) async throws -> Void) async throws {
    let fixture = try ServerFixture(queueCapacity: queueCapacity, historyCapacity: historyCapacity)
    defer { fixture.stop() }
    try await body(fixture)
}

/// Records what it is asked and told; refuses deletions when told to.
final class RecordingPresenter: Presenter {
    let log = Mutex<[String]>([])
    /// The items of the requests asked, as they came.
    let asked = Mutex<[PresentedItem]>([])
    let refuseDeletion: Bool

    init(refuseDeletion: Bool = false) {
        self.refuseDeletion = refuseDeletion
    }

    var entries: [String] { log.withLock { $0 } }
    var items: [PresentedItem] { asked.withLock { $0 } }

    func save(_ item: PresentedItem) async throws {
        asked.withLock { $0.append(item) }
        log.withLock { $0.append("save \(item.path)") }
    }
    func relinquish(_ item: PresentedItem) async throws { log.withLock { $0.append("relinquish \(item.path)") } }
    func reacquire(_ item: PresentedItem) async { log.withLock { $0.append("reacquire \(item.path)") } }
    func accommodateDeletion(_ item: PresentedItem) async throws {
        log.withLock { $0.append("delete? \(item.path)") }
        if refuseDeletion { throw PresenterRefusal("still editing") }
    }
    func didChange(_ item: PresentedItem) async { log.withLock { $0.append("changed \(item.path)") } }
    func didMove(_ item: PresentedItem, to destination: FilePath) async { log.withLock { $0.append("moved \(item.path) \(destination) \(item.presented)") } }
    func didDelete(_ item: PresentedItem) async { log.withLock { $0.append("deleted \(item.path)") } }
}

/// The error `body` throws, if any, as a CoordFSError.
func failure<T>(_ body: () async throws -> T) async -> CoordFSError? {
    do {
        _ = try await body()
        return nil
    } catch {
        return error as? CoordFSError ?? .protocolViolation("not a CoordFSError: \(error)")
    }
}

@Suite(.serialized) struct ServerClientLibraryTests {
    @Test func connectsSaysHelloAndReadsStatus() async throws {
        try await withServerAsync { fixture in
            let connection = try await CoordFSConnection.connect(socketPath: fixture.socketPath, client: "library-test")
            defer { connection.close() }
            #expect(connection.server.pid == getpid())
            #expect(connection.server.version == 1)
            let status = try await connection.status()
            #expect(status.connections.map(\.client) == ["library-test"])
            #expect(status.server.socket == fixture.socketPath)
        }
    }

    @Test func eventsArriveAsAnAsyncSequence() async throws {
        try await withServerAsync { fixture in
            let connection = try await CoordFSConnection.connect(socketPath: fixture.socketPath)
            defer { connection.close() }
            let subscription = try await connection.subscribe("/", recursive: true, kinds: [.created, .moved])
            #expect(subscription.sequence == 0 && !subscription.needsResync)
            fixture.publish(.created, "/a")
            fixture.publish(.changed, "/a")
            fixture.publish(.moved, "/a", to: "/b")
            var seen: [String] = []
            for try await message in subscription {
                guard case .event(let event) = message else { continue }
                seen.append("\(event.kind) \(event.path)\(event.destination.map { " \($0)" } ?? "")")
                if seen.count == 2 { break }
            }
            #expect(seen == ["created /a", "moved /a /b"])
            try await subscription.cancel()
        }
    }

    @Test func sinceReplaysAndResyncIsReported() async throws {
        try await withServerAsync(historyCapacity: 4) { fixture in
            for index in 1...6 { fixture.publish(.changed, "/f\(index)") }
            let connection = try await CoordFSConnection.connect(socketPath: fixture.socketPath)
            defer { connection.close() }
            let replay = try await connection.subscribe("/", since: 4)
            #expect(replay.replayed == 2 && !replay.needsResync)
            var iterator = replay.makeAsyncIterator()
            guard case .event(let first)? = try await iterator.next() else { throw HarnessError("no replayed event") }
            #expect(first.sequence == 5)
            let late = try await connection.subscribe("/", since: 1)
            #expect(late.needsResync && late.sequence == 6)
        }
    }

    @Test func aSlowReaderGetsAnOverflowInsteadOfUnboundedMemory() async throws {
        try await withServerAsync { fixture in
            let connection = try await CoordFSConnection.connect(socketPath: fixture.socketPath)
            defer { connection.close() }
            let subscription = try await connection.subscribe("/", recursive: true, bufferSize: 4)
            for index in 1...100 { fixture.publish(.changed, "/f\(index)") }
            #expect(await fixture.eventually { fixture.hub.subscriptionStatistics().first?.delivered == 100 })
            try await Task.sleep(for: .milliseconds(100))
            var messages: [SubscriptionMessage] = []
            for try await message in subscription {
                messages.append(message)
                if case .overflow = message { break }
            }
            #expect(messages.count == 5)
            #expect(messages.last == .overflow(.init(dropped: 96, first: 5, last: 100)))
            fixture.publish(.changed, "/after")
            var iterator = subscription.makeAsyncIterator()
            guard case .event(let next)? = try await iterator.next() else { throw HarnessError("no event after the overflow") }
            #expect(next.sequence == 101)
        }
    }

    @Test func coordinateHoldsClaimsForTheClosure() async throws {
        try await withServerAsync { fixture in
            let connection = try await CoordFSConnection.connect(socketPath: fixture.socketPath)
            defer { connection.close() }
            let result = try await connection.coordinate(reading: ["/config"], writing: ["/counter"]) {
                fixture.claims.snapshot().holders.map { "\($0.path) \($0.mode)" }.sorted()
            }
            #expect(result == ["/config read", "/counter exclusive"])
            #expect(await fixture.eventually { fixture.claims.snapshot().holders.isEmpty })

            // The claims go however the closure ends.
            struct Failure: Error {}
            await #expect(throws: Failure.self) {
                try await connection.coordinate(writing: ["/counter"]) { throw Failure() }
            }
            #expect(await fixture.eventually { fixture.claims.snapshot().holders.isEmpty })
        }
    }

    @Test func aConflictIsAnErrorWithACode() async throws {
        try await withServerAsync { fixture in
            let holder = try await CoordFSConnection.connect(socketPath: fixture.socketPath)
            let other = try await CoordFSConnection.connect(socketPath: fixture.socketPath)
            defer { holder.close(); other.close() }
            let held = try await holder.claim(writing: ["/x"])
            let conflict = await failure { try await other.claim(writing: ["/x"], timeout: .zero) }
            #expect(conflict?.code == .conflict)
            #expect(conflict?.description.contains("/x is held") == true)
            let timeout = await failure { try await other.claim(writing: ["/x"], timeout: .milliseconds(200)) }
            #expect(timeout?.code == .timeout)
            try await holder.release(held)
            let mine = try await other.claim(writing: ["/x"], timeout: .zero)
            #expect(mine.writing == ["/x"])
        }
    }

    @Test func cancellingAWaitingClaimGivesUpTheWait() async throws {
        try await withServerAsync { fixture in
            let holder = try await CoordFSConnection.connect(socketPath: fixture.socketPath)
            let other = try await CoordFSConnection.connect(socketPath: fixture.socketPath)
            defer { holder.close(); other.close() }
            _ = try await holder.claim(writing: ["/x"])
            let waiting = Task { try await other.claim(writing: ["/x"], timeout: .seconds(60)) }
            #expect(await fixture.eventually { fixture.claims.snapshot().waiters.count == 1 })
            waiting.cancel()
            let outcome = await waiting.result
            guard case .failure(let error as CoordFSError) = outcome else {
                Issue.record("expected a cancellation, got \(outcome)")
                return
            }
            #expect(error.code == .cancelled)
            #expect(fixture.claims.snapshot().waiters.isEmpty)
        }
    }

    @Test func aPresenterAnswersThroughItsMethods() async throws {
        try await withServerAsync { fixture in
            mkdir(fixture.backing + "/docs", 0o755)
            let connection = try await CoordFSConnection.connect(socketPath: fixture.socketPath)
            defer { connection.close() }
            let presenter = RecordingPresenter(refuseDeletion: true)
            let registration = try await connection.present(presenter, at: "/docs")
            #expect(registration.path == "/docs")

            let saved = VerdictWaiter()
            #expect(fixture.presenters.ask(.save, path: MountPath("/docs/a.txt")!, requester: 1, timeout: .seconds(10), completion: saved.completion))
            #expect(try #require(await saved.wait(fixture)).mayProceed)

            let deletion = VerdictWaiter()
            #expect(fixture.presenters.ask(.accommodateDeletion, path: MountPath("/docs")!, requester: 1, timeout: .seconds(10), completion: deletion.completion))
            let verdict = try #require(await deletion.wait(fixture))
            guard case .refused(let refusals) = verdict.decision else {
                Issue.record("not refused")
                return
            }
            #expect(refusals.first?.reason == "still editing")

            fixture.presenters.notify(.didMove, path: MountPath("/docs")!, destination: MountPath("/papers")!, origin: 1)
            #expect(await fixture.eventually { presenter.entries.count == 3 })
            #expect(presenter.entries == ["save /docs/a.txt", "delete? /docs", "moved /docs /papers /papers"])

            try await registration.stop()
            #expect(fixture.presenters.isEmpty)
        }
    }

    @Test func subscriptionsEndWithAnErrorWhenTheServerStops() async throws {
        let fixture = try ServerFixture()
        defer { fixture.stop() }
        let connection = try await CoordFSConnection.connect(socketPath: fixture.socketPath)
        let subscription = try await connection.subscribe("/", recursive: true)
        fixture.server.stop()
        let ended = await failure { for try await _ in subscription {} }
        #expect(ended?.description.contains("stopping") == true)
        guard case .closed? = await failure({ try await connection.status() }) else {
            Issue.record("a request on a closed connection did not fail as closed")
            return
        }
    }

    @Test func connectingWhereNobodyListensSaysSo() async throws {
        let error = await failure { try await CoordFSConnection.connect(socketPath: "/tmp/coordfs-nobody-here-\(getpid()).sock") }
        guard case .cannotConnect? = error else {
            Issue.record("unexpected \(String(describing: error))")
            return
        }
        #expect(error?.description.contains("No such file") == true)
    }

    /// The mount answers `user.coordfs.control`; here the attribute is set by hand on a
    /// plain directory, as the FUSE layer would report it.
    @Test func locateReadsTheControlAttribute() async throws {
        let directory = "/tmp/coordfs-locate-\(getpid())"
        shell("rm -rf \(directory) && mkdir -p \(directory)/sub && touch \(directory)/sub/file")
        defer { shell("rm -rf \(directory)") }
        let value = #"{"version":1,"socket":"/run/coordfs/x.sock","path":"/sub"}"#
        #expect(shell("setfattr -n user.coordfs.control -v '\(value)' \(directory)/sub") == 0)
        #expect(shell("setfattr -n user.coordfs.control -v '{\"version\":1,\"socket\":\"/run/coordfs/x.sock\",\"path\":\"/sub/file\"}' \(directory)/sub/file") == 0)

        let file = try ControlLocation.locate(FilePath(directory + "/sub/file"))
        #expect(file.socket == "/run/coordfs/x.sock" && file.path == "/sub/file")
        let missing = try ControlLocation.locate(FilePath(directory + "/sub/new.txt"))
        #expect(missing.path == "/sub/new.txt")
        // A long value (deep paths are allowed up to PATH_MAX).
        let deep = "/sub/" + String(repeating: "x", count: 3000)
        #expect(shell("setfattr -n user.coordfs.control -v '{\"version\":1,\"socket\":\"/s\",\"path\":\"\(deep)\"}' \(directory)/sub/file") == 0)
        #expect(try ControlLocation.locate(FilePath(directory + "/sub/file")).path == FilePath(deep))
        let trailing = try ControlLocation.locate(FilePath(directory + "/sub/"))
        #expect(trailing.path == "/sub")
        let plain = await failure { try ControlLocation.locate(FilePath(directory)) }
        #expect(plain?.description == "\(directory) is not inside a coordfs mount (it has no user.coordfs.control attribute)")
        #expect(throws: CoordFSError.self) { try ControlLocation.locate(FilePath(directory + "/nope/deeper")) }
        #expect(shell("setfattr -n user.coordfs.control -v 'garbage' \(directory)/sub") == 0)
        #expect(throws: CoordFSError.self) { try ControlLocation.locate(FilePath(directory + "/sub")) }
        // A failure that says nothing about the mount is told with its errno.
        #expect(shell("ln -s loop \(directory)/loop") == 0)
        guard case .cannotLocate(_, let error)? = await failure({ try ControlLocation.locate(FilePath(directory + "/loop")) }) else {
            Issue.record("a symbolic link loop was not a failure to locate")
            return
        }
        #expect(error == .tooManySymbolicLinkLevels)
    }
}
