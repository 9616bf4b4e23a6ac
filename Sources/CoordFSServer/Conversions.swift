import CoordFSCore
import CoordFSProtocol
import SystemPackage

// Between the core's types and the wire's: the one mapping, in this file. It lives on the
// server's side because CoordFSProtocol is shared with clients that know nothing of the core,
// and the server is what turns one into the other. (The cluster's part of status is put
// together by the command, which links the cluster module the server does not, with
// `ClaimModeName(_:)` from here.) Paths go out as FilePaths of their exact bytes ("/a/b",
// `MountPath.filePath`), which the wire carries losslessly.

/// A wire enum that stands for one core enum, case for case. `init(_:)` from the core enum is
/// the mapping, written once as a switch so the compiler sees every core case; the way back
/// is read off it (`CaseIterable.init(_:)` below), so the two directions cannot disagree
/// (ServerConversionTests checks that every wire case has its core one).
protocol WireMirror: Equatable, CaseIterable {
    associatedtype Core: CaseIterable
    init(_ core: Core)
}

extension CaseIterable {
    /// The core case that `wire` stands for.
    init<Wire: WireMirror>(_ wire: Wire) where Wire.Core == Self {
        guard let core = Self.allCases.first(where: { Wire($0) == wire }) else {
            preconditionFailure("\(Wire.self).\(wire) stands for no \(Self.self)")
        }
        self = core
    }
}

extension EventKind: WireMirror {
    init(_ kind: ChangeKind) {
        switch kind {
        case .created: self = .created
        case .changed: self = .changed
        case .deleted: self = .deleted
        case .moved: self = .moved
        case .attributes: self = .attributes
        case .conflict: self = .conflict
        case .versionAdded: self = .versionAdded
        case .versionRemoved: self = .versionRemoved
        case .conflictResolved: self = .conflictResolved
        }
    }
}

extension AskKind: WireMirror {
    init(_ kind: PresenterRequestKind) {
        switch kind {
        case .save: self = .save
        case .relinquish: self = .relinquish
        case .accommodateDeletion: self = .accommodateDeletion
        }
    }
}

extension NoticeKind: WireMirror {
    init(_ kind: PresenterNotificationKind) {
        switch kind {
        case .didChange: self = .didChange
        case .didMove: self = .didMove
        case .didDelete: self = .didDelete
        case .reacquire: self = .reacquire
        case .didGainVersion: self = .didGainVersion
        case .didLoseVersion: self = .didLoseVersion
        case .didResolveConflict: self = .didResolveConflict
        }
    }
}

extension ClaimModeName: WireMirror {
    /// Public for the command, which shows the cluster's grants in status.
    public init(_ mode: ClaimMode) {
        switch mode {
        case .snapshotRead: self = .snapshotRead
        case .read: self = .read
        case .write: self = .write
        case .exclusive: self = .exclusive
        }
    }
}

// Events and presenters.

extension EventRecord.Origin {
    /// Unknown facts of a change behind the mount stay off the wire.
    init(_ origin: EventOrigin) {
        self.init(pid: origin.pid == 0 && origin.isOutside ? nil : origin.pid,
                  uid: origin.uid == EventOrigin.unknownUID ? nil : origin.uid,
                  process: origin.processName.isEmpty && origin.isOutside ? nil : origin.processName,
                  outside: origin.isOutside ? true : nil,
                  host: origin.host.map { Host(id: $0.id, name: $0.name) })
    }
}

extension EventRecord {
    init(_ event: ChangeEvent) {
        self.init(sequence: event.sequence, kind: EventKind(event.kind), path: event.path.filePath,
                  destination: event.destination?.filePath, directory: event.isDirectory,
                  origin: .init(event.origin),
                  size: event.size, time: event.time.secondsSince1970, version: event.version)
    }

    /// `event` as the JSON an event push carries (see `EventPushFrame`); empty only for a
    /// time JSON has no number for, which an `EventTime` (whole nanoseconds) never is.
    static func json(of event: ChangeEvent) -> [UInt8] {
        (try? JSONLineEncoder().encode(EventRecord(event))) ?? []
    }
}

extension OverflowMarker {
    init(_ overflow: EventOverflow) {
        self.init(dropped: overflow.dropped, first: overflow.firstDropped, last: overflow.lastDropped,
                  reason: overflow.backingLost ? .backing : nil)
    }
}

extension AskPush {
    init(_ request: PresenterRequest, now: ContinuousClock.Instant) {
        self.init(presenter: request.presenter, request: request.id, kind: AskKind(request.kind),
                  path: request.path.filePath, presented: request.presentedPath.filePath,
                  requester: request.requester, timeout: max(0, (request.deadline - now).seconds))
    }
}

extension NotifyPush {
    init(_ notification: PresenterNotification) {
        self.init(presenter: notification.presenter, kind: NoticeKind(notification.kind), path: notification.path.filePath,
                  destination: notification.destination?.filePath, presented: notification.presentedPath.filePath,
                  version: notification.version)
    }
}

// Claims: the core's owners and holders as status and conflict errors show them (a `claim`
// request's lists name their modes where the session reads them).

extension ClaimOwnerRecord {
    init(_ owner: ClaimOwner) {
        switch owner {
        case .process(let pid): self.init(kind: .process, pid: pid)
        case .client(let session, let tree): self.init(kind: .client, pid: tree, session: session)
        }
    }
}

extension ClaimHolderRecord {
    init(_ holder: ClaimHolder, now: ContinuousClock.Instant) {
        self.init(path: holder.path.filePath, mode: ClaimModeName(holder.mode), owner: ClaimOwnerRecord(holder.owner),
                  held: (now - holder.since).seconds)
    }
}

extension StatusReport.ClaimWaiter {
    /// One line per waiter: all its paths, and its strongest mode.
    init(_ waiter: CoordFSCore.ClaimWaiter, now: ContinuousClock.Instant) {
        let strongest = waiter.requests.map(\.mode).max { $0.strength < $1.strength } ?? .read
        self.init(paths: waiter.requests.map(\.path.filePath), mode: ClaimModeName(strongest),
                  owner: ClaimOwnerRecord(waiter.owner), waiting: (now - waiter.since).seconds)
    }
}

extension ClaimMode {
    /// How much a mode keeps others out, for naming a waiter by its strongest request.
    fileprivate var strength: Int {
        switch self {
        case .snapshotRead: 0
        case .read: 1
        case .write: 2
        case .exclusive: 3
        }
    }
}

extension Duration {
    /// Seconds as a Double, for the wire.
    var seconds: Double {
        let (whole, fraction) = components
        return Double(whole) + Double(fraction) / 1e18
    }

    /// A number of seconds from the wire, clamped to what a Duration holds.
    static func seconds(clamping value: Double) -> Duration {
        guard value.isFinite, value > 0 else { return .zero }
        return value >= 1e12 ? .seconds(1_000_000_000_000) : .nanoseconds(Int64(value * 1e9))
    }
}

/// Reads a wire path: mount-relative, beginning with "/", without "..", NUL or overlong names.
func parseWirePath(_ wire: FilePath) -> Result<MountPath, ErrorDetail> {
    let bytes = WirePath.bytes(of: wire)
    guard bytes.first == UInt8(ascii: "/") else {
        return .failure(ErrorDetail(code: .invalidPath, message: "\"\(String(wire.description.prefix(200)))\": paths are mount-relative and begin with /"))
    }
    guard bytes.count <= 4096 else {
        return .failure(ErrorDetail(code: .invalidPath, message: "a path may not be longer than 4096 bytes"))
    }
    guard let path = MountPath(bytes: bytes) else {
        return .failure(ErrorDetail(code: .invalidPath, message: "\"\(String(wire.description.prefix(200)))\": \"..\" may not appear in a path"))
    }
    if let long = path.components.first(where: { $0.count > 255 }) {
        return .failure(ErrorDetail(code: .invalidPath, message: "the name \"\(long.description.prefix(40))…\" is longer than 255 bytes"))
    }
    return .success(path)
}

extension VersionInfo {
    /// A kept version as the wire shows it.
    init(_ record: VersionRecord) {
        self.init(id: record.id, path: record.path.filePath, size: record.size, modified: record.modified, kept: record.kept,
                  kind: record.kind.rawValue, pid: record.origin.pid, uid: record.origin.uid, process: record.origin.process,
                  host: record.origin.host, mode: record.mode, resolved: record.resolved, pinned: record.pinned)
    }
}
