/// The operations on the mount, told apart as the claim rules tell them apart, and for each
/// what it asks the presenters and what it claims.
///
/// This is the code's copy of the two tables in Docs/LOCKING.md, "What each operation takes"
/// and "Presenters come before claims"; `OperationTableDocTests` reads the document and fails
/// when the two disagree. The FUSE layer derives every operation's asks and claims from here.
public enum MountOperation: CaseIterable, Sendable {
    /// An open for reading only.
    case openForReading
    /// An open for writing or with O_TRUNC, and a create.
    case openForWriting
    /// setattr: truncate, chmod, chown, utimens, by path or on a handle.
    case changeAttributes
    /// setxattr, removexattr.
    case changeExtendedAttributes
    /// unlink, rmdir.
    case remove
    /// rename, with any flags.
    case rename
    /// mkdir, mknod, symlink, link: a new name.
    case makeName
    /// read, write, fsync on an open handle.
    case handleIO
    /// The operations that never block: getattr, readdir, readlink, statfs, access, getxattr, listxattr.
    case inspect

    /// The system calls and accesses it stands for, as Docs/LOCKING.md names them.
    public var names: [String] {
        switch self {
        case .openForReading: ["open for reading"]
        case .openForWriting: ["open for writing", "create"]
        case .changeAttributes: ["truncate", "chmod", "chown", "utimens"]
        case .changeExtendedAttributes: ["setxattr", "removexattr"]
        case .remove: ["unlink", "rmdir"]
        case .rename: ["rename"]
        case .makeName: ["mkdir", "mknod", "symlink", "link"]
        case .handleIO: ["read", "write", "fsync"]
        case .inspect: ["getattr", "readdir", "readlink", "statfs", "access", "getxattr", "listxattr"]
        }
    }
}

/// Which of an operation's paths a question or a claim is about.
public enum OperationPath: Sendable, Hashable {
    /// The one path an operation other than rename names: the file it opens, the item it
    /// changes or removes, the new path it makes.
    case item
    /// A rename's source.
    case source
    /// A rename's destination.
    case destination
}

/// One question an operation puts to the presenters before it requests its claims.
public struct PresenterQuestion: Sendable, Hashable {
    /// When a question is put; the FUSE layer knows the facts, the table says which matter.
    public enum Condition: Sendable, Hashable {
        case always
        /// Only when the destination exists and the rename replaces it: an exchange and a
        /// RENAME_NOREPLACE delete nothing.
        case ifDestinationIsReplaced
        /// Not when the caller has the item open for writing: its open asked already, and
        /// asking again would wait for a silent presenter twice.
        case unlessCallerWritesIt
    }

    public let kind: PresenterRequestKind
    public let path: OperationPath
    public let condition: Condition
    /// The change it holds back: only presenters whose user could make it are asked.
    public let change: PresentedChange

    public init(_ kind: PresenterRequestKind, _ path: OperationPath, _ condition: Condition = .always,
                holdingBack change: PresentedChange? = nil) {
        self.kind = kind
        self.path = path
        self.condition = condition
        self.change = change ?? PresentedChange(defaultFor: kind)
    }
}

/// The claim an operation takes: one request, all of its paths in one mode.
public struct OperationClaim: Sendable, Hashable {
    /// How long the claim is held.
    public enum Span: Sendable, Hashable {
        /// Released when the operation is done (for an open, before the handle exists).
        case operation
        /// Held by the handle the open makes, until its last release.
        case handle
    }

    public let mode: ClaimMode
    public let paths: [OperationPath]
    public let span: Span

    public init(_ mode: ClaimMode, on paths: [OperationPath], for span: Span) {
        self.mode = mode
        self.paths = paths
        self.span = span
    }
}

extension MountOperation {
    /// The questions it puts to the presenters, in the order it puts them.
    public var presenterQuestions: [PresenterQuestion] {
        switch self {
        case .openForReading: Self.saveItem
        case .openForWriting, .changeExtendedAttributes, .makeName: Self.relinquishItem
        case .changeAttributes: Self.relinquishItemUnlessWriting
        case .remove: Self.deleteItem
        case .rename: Self.renameQuestions
        case .handleIO, .inspect: []
        }
    }

    /// The claim it takes, nil for none. `strictReads` is the mount's `--strict-reads`;
    /// `inPlace` says whether the in-place policy covers the file opened.
    public func claim(strictReads: Bool, inPlace: Bool) -> OperationClaim? {
        switch self {
        case .openForReading: strictReads ? Self.readUntilRelease : Self.snapshotReadForTheOpen
        case .openForWriting: inPlace ? Self.writeItem : Self.writeUntilRelease
        case .changeAttributes, .changeExtendedAttributes, .remove, .makeName: Self.writeItem
        case .rename: Self.writeBothSides
        case .handleIO, .inspect: nil
        }
    }

    // Built once: operations run by the million, and these are all they read.
    private static let saveItem = [PresenterQuestion(.save, .item)]
    private static let relinquishItem = [PresenterQuestion(.relinquish, .item)]
    private static let relinquishItemUnlessWriting = [PresenterQuestion(.relinquish, .item, .unlessCallerWritesIt)]
    private static let deleteItem = [PresenterQuestion(.accommodateDeletion, .item),
                                     PresenterQuestion(.relinquish, .item, holdingBack: .removal)]
    private static let renameQuestions = [
        PresenterQuestion(.accommodateDeletion, .destination, .ifDestinationIsReplaced),
        PresenterQuestion(.relinquish, .source, holdingBack: .removal),
        PresenterQuestion(.relinquish, .destination, holdingBack: .removal),
    ]
    private static let snapshotReadForTheOpen = OperationClaim(.snapshotRead, on: [.item], for: .operation)
    private static let readUntilRelease = OperationClaim(.read, on: [.item], for: .handle)
    private static let writeUntilRelease = OperationClaim(.write, on: [.item], for: .handle)
    private static let writeItem = OperationClaim(.write, on: [.item], for: .operation)
    private static let writeBothSides = OperationClaim(.write, on: [.source, .destination], for: .operation)
}
