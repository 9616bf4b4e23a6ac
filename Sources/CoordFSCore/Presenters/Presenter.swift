/// What the filesystem asks a presenter before it lets another owner at the item.
public enum PresenterRequestKind: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// Before another owner reads the item: flush unsaved changes, then answer.
    case save
    /// Before another owner writes, moves or deletes the item: step aside, then answer; told
    /// `reacquire` once the access is over.
    case relinquish
    /// Before the item is deleted: answer ok, or refuse and the deletion fails.
    case accommodateDeletion

    public var description: String { rawValue }
}

/// The change an ask holds back, as the kernel would check it. A presenter is asked only
/// about a change its own user could make (DESIGN: "a user may hold back only what it may
/// change"); otherwise it is told after the fact, and neither refuses nor delays.
public enum PresentedChange: Sendable, Hashable {
    /// Writing the item's data or attributes, or making it where it is missing: write
    /// permission on the item (on its directory, when it does not exist yet).
    case write
    /// Removing or replacing the item's name: write and search permission on its directory,
    /// and under a sticky directory, owning the item or the directory.
    case removal

    /// What an ask of `kind` holds back when the operation does not say otherwise: a save ask
    /// goes only to presenters that could write the file (only they can have unsaved changes
    /// of it); a deletion is a removal.
    public init(defaultFor kind: PresenterRequestKind) {
        self = kind == .accommodateDeletion ? .removal : .write
    }
}

/// A set of request kinds as bits, so the registry's "does anyone answer this?" is one load.
public struct PresenterRequestKinds: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8

    public init(rawValue: UInt8) {
        self.rawValue = rawValue
    }

    public init(_ kind: PresenterRequestKind) {
        switch kind {
        case .save: rawValue = 1 << 0
        case .relinquish: rawValue = 1 << 1
        case .accommodateDeletion: rawValue = 1 << 2
        }
    }

    public init(_ kinds: some Sequence<PresenterRequestKind>) {
        rawValue = kinds.reduce(0) { $0 | PresenterRequestKinds($1).rawValue }
    }

    public static let save = PresenterRequestKinds(PresenterRequestKind.save)
    public static let relinquish = PresenterRequestKinds(PresenterRequestKind.relinquish)
    public static let accommodateDeletion = PresenterRequestKinds(PresenterRequestKind.accommodateDeletion)
    public static let all = PresenterRequestKinds(PresenterRequestKind.allCases)

    public func contains(_ kind: PresenterRequestKind) -> Bool {
        rawValue & PresenterRequestKinds(kind).rawValue != 0
    }

    public var kinds: [PresenterRequestKind] { PresenterRequestKind.allCases.filter { contains($0) } }
}

/// What a presenter is told after the fact; it answers none of these.
public enum PresenterNotificationKind: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    case didChange
    case didMove
    case didDelete
    /// The access it relinquished for is over: it may take the item up again.
    case reacquire
    /// The version store kept a version of the item (or of an item beneath it).
    case didGainVersion
    /// A version went (expired or removed).
    case didLoseVersion
    /// A conflict version was marked resolved.
    case didResolveConflict

    public var description: String { rawValue }
}

/// Who a presenter is, for answers, status and the log.
public struct PresenterInfo: Sendable, Hashable {
    public var id: UInt64
    /// The presented path when the information was taken (it follows moves).
    public var path: MountPath
    public var ownerPid: Int32
    public var answers: PresenterRequestKinds
    /// A free-form name given at registration (the control socket puts the client's there).
    public var label: String
}

/// One question to one presenter.
public struct PresenterRequest: Sendable, Hashable {
    /// The request's number: the same for every presenter asked about one access.
    public var id: UInt64
    public var kind: PresenterRequestKind
    /// The item being accessed (the presented item, or something inside or above it).
    public var path: MountPath
    /// The presenter's own path now.
    public var presentedPath: MountPath
    public var presenter: UInt64
    /// The process whose access raised the request.
    public var requester: Int32
    /// After this the request goes on without this presenter's answer.
    public var deadline: ContinuousClock.Instant
}

public struct PresenterNotification: Sendable, Hashable {
    public var kind: PresenterNotificationKind
    public var path: MountPath
    /// For `didMove`, the new path.
    public var destination: MountPath?
    public var presentedPath: MountPath
    public var presenter: UInt64
    /// For the version notices, the version's id.
    public var version: Int64? = nil
}

public enum PresenterMessage: Sendable, Hashable {
    case request(PresenterRequest)
    case notification(PresenterNotification)
}

public struct PresenterRefusal: Sendable, Hashable {
    public var presenter: PresenterInfo
    public var reason: String?
}

/// How an `ask` ended.
public struct PresenterVerdict: Sendable, Hashable {
    public enum Decision: Sendable, Hashable {
        case proceed
        /// Only `accommodateDeletion` can be refused; the deletion must then fail.
        case refused(by: [PresenterRefusal])
    }

    public var request: UInt64
    public var kind: PresenterRequestKind
    public var path: MountPath
    public var decision: Decision
    /// Every presenter that was sent the request.
    public var asked: [PresenterInfo]
    /// Presenters that did not answer before the deadline (they were skipped; log them).
    public var timedOut: [PresenterInfo]
    /// Presenters that went away (disconnected) before answering.
    public var vanished: [PresenterInfo]
    /// How long the access waited.
    public var waited: Duration

    public var mayProceed: Bool {
        if case .proceed = decision { return true }
        return false
    }
}

/// A presenter as status shows it.
public struct PresenterStatus: Sendable, Hashable {
    public var info: PresenterInfo
    /// Requests sent and not yet answered.
    public var pending: Int
    public var asked: UInt64
    public var answered: UInt64
    public var timedOut: UInt64
    public var refused: UInt64
    /// Let an ask time out and answered nothing since: not asked until it answers.
    public var unresponsive: Bool
}

/// A request still waiting for answers, as status shows it.
public struct PendingPresenterRequest: Sendable, Hashable {
    public var id: UInt64
    public var kind: PresenterRequestKind
    public var path: MountPath
    public var requester: Int32
    public var awaiting: [UInt64]
    public var waiting: Duration
}
