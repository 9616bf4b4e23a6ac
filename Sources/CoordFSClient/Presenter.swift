import SystemPackage

/// The item a presenter is asked or told about.
public struct PresentedItem: Sendable, Hashable {
    /// The item concerned (the presented path itself, or something inside or above it).
    public let path: FilePath
    /// The presenter's own path now (it follows moves).
    public let presented: FilePath
    /// For requests, the process whose access raised it.
    public let requester: Int32?
}

/// Thrown from `accommodateDeletion` (or any request method) to refuse with a reason.
public struct PresenterRefusal: Error, Sendable, CustomStringConvertible {
    public let reason: String

    public init(_ reason: String) {
        self.reason = reason
    }

    public var description: String { reason }
}

/// Takes part in coordination, as NSFilePresenter does on macOS: the mount asks a presenter
/// before others use its item, and tells it what happened after. Every method has a default
/// that does nothing and answers "ok".
///
/// Requests come one at a time, in order, each with a deadline (the server skips a presenter
/// that has not answered in time): returning answers ok, throwing refuses. Only a refused
/// `accommodateDeletion` stops anything — the deletion fails.
public protocol Presenter: Sendable {
    /// Before another process reads the item: write out unsaved changes, then return.
    func save(_ item: PresentedItem) async throws
    /// Before another process writes, moves or deletes the item: stop using it, then return.
    func relinquish(_ item: PresentedItem) async throws
    /// The access `relinquish` made way for is over.
    func reacquire(_ item: PresentedItem) async
    /// Before the item is deleted: return to let it go, throw to refuse.
    func accommodateDeletion(_ item: PresentedItem) async throws
    func didChange(_ item: PresentedItem) async
    func didMove(_ item: PresentedItem, to destination: FilePath) async
    func didDelete(_ item: PresentedItem) async
    /// The mount's version store kept version `version` of the item (or of one beneath it),
    /// as NSFilePresenter's presentedItemDidGain(_:).
    func didGainVersion(_ item: PresentedItem, version: Int64) async
    /// A version went: expired or removed.
    func didLoseVersion(_ item: PresentedItem, version: Int64) async
    /// A conflict version was marked resolved.
    func didResolveConflict(_ item: PresentedItem, version: Int64) async
}

extension Presenter {
    public func save(_ item: PresentedItem) async throws {}
    public func relinquish(_ item: PresentedItem) async throws {}
    public func reacquire(_ item: PresentedItem) async {}
    public func accommodateDeletion(_ item: PresentedItem) async throws {}
    public func didChange(_ item: PresentedItem) async {}
    public func didMove(_ item: PresentedItem, to destination: FilePath) async {}
    public func didDelete(_ item: PresentedItem) async {}
    public func didGainVersion(_ item: PresentedItem, version: Int64) async {}
    public func didLoseVersion(_ item: PresentedItem, version: Int64) async {}
    public func didResolveConflict(_ item: PresentedItem, version: Int64) async {}
}

/// A registered presenter; `stop()` unregisters it.
public final class PresenterRegistration: Sendable {
    public let id: UInt64
    public let path: FilePath
    private let connection: CoordFSConnection
    private let task: Task<Void, Never>

    init(id: UInt64, path: FilePath, connection: CoordFSConnection, task: Task<Void, Never>) {
        self.id = id
        self.path = path
        self.connection = connection
        self.task = task
    }

    public func stop() async throws(CoordFSError) {
        try await connection.unpresent(id)
        await task.value
    }
}

enum PresenterInbound: Sendable {
    case ask(AskPush)
    case notify(NotifyPush)
}

/// Where one presenter's pushes queue up; never bounded, since every ask must be answered.
final class PresenterSink: Sendable {
    let stream: AsyncStream<PresenterInbound>
    let continuation: AsyncStream<PresenterInbound>.Continuation

    init() {
        (stream, continuation) = AsyncStream.makeStream(of: PresenterInbound.self)
    }
}

enum PresenterLoop {
    /// Serves one presenter's messages in order until its stream ends.
    static func run(_ presenter: some Presenter, id: UInt64, messages: AsyncStream<PresenterInbound>, connection: CoordFSConnection) async {
        for await message in messages {
            switch message {
            case .ask(let ask):
                let item = PresentedItem(path: ask.path, presented: ask.presented, requester: ask.requester)
                var verdict = Request.Answer.Verdict.ok
                var reason: String?
                do {
                    switch ask.kind {
                    case .save: try await presenter.save(item)
                    case .relinquish: try await presenter.relinquish(item)
                    case .accommodateDeletion: try await presenter.accommodateDeletion(item)
                    }
                } catch {
                    verdict = .refuse
                    reason = "\(error)"
                }
                await connection.answer(presenter: id, request: ask.request, verdict: verdict, reason: reason)
            case .notify(let notice):
                let item = PresentedItem(path: notice.path, presented: notice.presented, requester: nil)
                switch notice.kind {
                case .didChange: await presenter.didChange(item)
                case .didMove: await presenter.didMove(item, to: notice.destination ?? notice.path)
                case .didDelete: await presenter.didDelete(item)
                case .reacquire: await presenter.reacquire(item)
                case .didGainVersion: await presenter.didGainVersion(item, version: notice.version ?? 0)
                case .didLoseVersion: await presenter.didLoseVersion(item, version: notice.version ?? 0)
                case .didResolveConflict: await presenter.didResolveConflict(item, version: notice.version ?? 0)
                }
            }
        }
    }
}
