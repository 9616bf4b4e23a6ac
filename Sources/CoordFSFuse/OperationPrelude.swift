import CFuse
import CoordFSCore
import SystemPackage

// What every coordinated operation does before it acts, in one place: resolve what the kernel
// named (nodes, reserved names), compute its paths once, and ask the presenters and take the
// claims that `MountOperation` lists for it.

/// A name in a directory, as the kernel gives what an operation makes, removes or renames.
struct DirectoryEntry: Sendable {
    let directory: Node
    let name: FileName
}

/// A path an operation names: resolved once when the operation starts, and again from its
/// nodes after any wait, when a rename granted meanwhile may have moved it.
struct NamedPath: Sendable {
    private enum Anchor: Sendable {
        case node(Node)
        case entry(DirectoryEntry)
    }

    private let anchor: Anchor
    /// The path when the operation started; nil for an item with no name (unlinked, or
    /// reachable only through a descriptor): nobody presents it and nobody claims it.
    let resolved: MountPath?
    /// Whether a node that loses its name while the operation waits is still claimed by the
    /// path it started with (see `init`).
    private let keepsStartingPath: Bool

    /// `keepsStartingPath`: with other hosts, a report of another host's commit (a rename
    /// over the name) takes the name from the node an open waits with; the open must still
    /// claim that name, never go on with no claim at all (it then finds the new file).
    init(_ node: Node, in nodes: NodeTable, keepsStartingPath: Bool = false) {
        anchor = .node(node)
        resolved = nodes.path(of: node)
        self.keepsStartingPath = keepsStartingPath
    }

    /// A node whose name went away behind the mount while the kernel may still reach it by
    /// that name (`NodeTable.formerName(of:)`): the open is about the name, and claims it.
    init(_ node: Node, formerPath: MountPath) {
        anchor = .node(node)
        resolved = formerPath
        keepsStartingPath = true
    }

    init(_ entry: DirectoryEntry, in nodes: NodeTable) {
        anchor = .entry(entry)
        resolved = nodes.path(of: entry.directory)?.appending(entry.name)
        keepsStartingPath = false
    }

    /// The path now, from the nodes.
    func current(in nodes: NodeTable) -> MountPath? {
        switch anchor {
        case .node(let node): nodes.path(of: node) ?? (keepsStartingPath ? resolved : nil)
        case .entry(let entry): nodes.path(of: entry.directory)?.appending(entry.name)
        }
    }

    /// Whether the backing has the item: only an entry can be missing (a node is there).
    func exists() -> Bool {
        switch anchor {
        case .node: true
        case .entry(let entry): (try? Syscall.stat(at: entry.directory.directory, entry.name)) != nil
        }
    }
}

/// The paths of one operation, by the roles the table gives them.
struct OperationPaths: Sendable {
    private var item: NamedPath?
    private var source: NamedPath?
    private var destination: NamedPath?

    static func item(_ path: NamedPath) -> OperationPaths { OperationPaths(item: path) }

    static func rename(from source: NamedPath, to destination: NamedPath) -> OperationPaths {
        OperationPaths(source: source, destination: destination)
    }

    subscript(_ role: OperationPath) -> NamedPath? {
        let named: NamedPath? = switch role {
        case .item: item
        case .source: source
        case .destination: destination
        }
        assert(named != nil, "the table names a path (\(role)) this operation does not have")
        return named
    }
}

/// The facts the table's conditional questions depend on, for one call. Each is looked up
/// only when a presenter would be asked the question that depends on it.
struct AskFacts {
    var destinationIsReplaced: () -> Bool = { false }
    var callerWritesItem: () -> Bool = { false }

    static var none: AskFacts { AskFacts() }
}

/// The claims an operation takes: as derived from the paths it started with, and a way to
/// derive them again from its nodes (see `withClaims`).
struct OperationClaimRequests: Sendable {
    let resolved: [ClaimRequest]
    let now: @Sendable () -> [ClaimRequest]
}

extension FileSystem {
    // MARK: Resolving what the kernel named

    /// A name the caller means to exist (unlink, rename's source): a reserved name is not there.
    func existingEntry(_ directoryID: fuse_ino_t, _ name: UnsafePointer<CChar>) throws(Errno) -> DirectoryEntry {
        let directory = try node(directoryID)
        if StagingName.isReserved(name: name, inRoot: directory.id == NodeTable.rootID) { throw .noSuchFileOrDirectory }
        return DirectoryEntry(directory: directory, name: FileName(cString: name))
    }

    /// A name the caller means to make (create, mkdir, mknod, symlink, link, rename's
    /// destination): a reserved name cannot be made.
    func newEntry(_ directoryID: fuse_ino_t, _ name: UnsafePointer<CChar>) throws(Errno) -> DirectoryEntry {
        let directory = try node(directoryID)
        try refuseReservedName(directory, name)
        return DirectoryEntry(directory: directory, name: FileName(cString: name))
    }

    // MARK: The table, applied

    /// The questions `operation` puts, about its paths as they were resolved. A conditional
    /// question is put only when someone answers its kind and its condition holds; the same
    /// question about the same path is put once (a rename onto itself).
    private func presenterAsks(_ operation: MountOperation, _ paths: OperationPaths, _ facts: AskFacts) -> [PresenterAsk] {
        var asks: [PresenterAsk] = []
        for question in operation.presenterQuestions {
            switch question.condition {
            case .always: break
            case .ifDestinationIsReplaced:
                guard presenters.hasPresenters(answering: question.kind), facts.destinationIsReplaced() else { continue }
            case .unlessCallerWritesIt:
                guard presenters.hasPresenters(answering: question.kind), !facts.callerWritesItem() else { continue }
            }
            let path = paths[question.path]?.resolved
            if asks.contains(where: { $0.kind == question.kind && $0.path == path }) { continue }
            asks.append(PresenterAsk(question.kind, path, holdingBack: question.change))
        }
        return asks
    }

    /// The claim requests of `claim` on `paths`: from the resolved paths, and afresh from the nodes.
    private func claimRequests(_ claim: OperationClaim?, _ paths: OperationPaths) -> OperationClaimRequests {
        guard let claim else { return OperationClaimRequests(resolved: [], now: { [] }) }
        let named = claim.paths.compactMap { paths[$0] }
        let mode = claim.mode
        return OperationClaimRequests(
            resolved: named.compactMap { $0.resolved.map { ClaimRequest($0, mode) } },
            now: { [nodes] in named.compactMap { $0.current(in: nodes).map { ClaimRequest($0, mode) } } })
    }

    // MARK: Coordinating

    /// Coordinates an operation that holds its claim while it runs (every operation but an
    /// open): asks the presenters and takes the claims its table row names, runs `body`
    /// (which replies, with the caller as read once here), then releases the claims and tells
    /// the presenters that stepped aside.
    func coordinated(_ request: fuse_req_t, _ operation: MountOperation, _ paths: OperationPaths, facts: AskFacts = .none,
                     _ body: @escaping @Sendable (_ caller: ChangeOrigin) -> Void) {
        let claim = operation.claim(strictReads: options.strictReads, inPlace: false)
        assert(claim?.span != .handle, "\(operation) makes no handle to hold its claim")
        let requests = claimRequests(claim, paths)
        let caller = origin(of: request)
        withPresentersAndClaims(request, caller: caller, asking: presenterAsks(operation, paths, facts), claims: requests) { [self] held, consent in
            noteOwnChanges(held)
            body(caller)
            if let held { authority.release(held) }
            reacquire(consent)
        }
    }

    /// Tells a watch of the backing that names no process which paths the mount is about to
    /// change (the ones it holds write claims on), so that it can tell them from changes made
    /// behind the mount.
    private func noteOwnChanges(_ held: HeldClaims?) {
        guard mount.notesOwnChanges, let held else { return }
        for request in held.grant.requests where request.mode == .write || request.mode == .exclusive {
            mount.noteOwnChange(request.path)
        }
    }

    /// Coordinates an open (or create) of one item: asks the presenters and takes the claim
    /// its table row names, then runs `body` with the grant to keep until the handle's last
    /// release (nil when the claim lasts for the open only: it is released before `body`) and
    /// the presenters' consent. `inPlace` is whether the in-place policy covers the file (it
    /// matters to writers only); `caller`: who opens, read once (`origin(of:)`).
    func coordinatedOpen(_ request: fuse_req_t, _ operation: MountOperation, _ item: NamedPath, inPlace: Bool = false, nonblocking: Bool,
                         caller: ChangeOrigin, _ body: @escaping @Sendable (_ handleClaims: HeldClaims?, PresenterConsent) -> Void) {
        let paths = OperationPaths.item(item)
        let claim = operation.claim(strictReads: options.strictReads, inPlace: inPlace)
        let keeps = claim?.span == .handle
        let requests = claimRequests(claim, paths)
        withPresentersAndClaims(request, caller: caller, asking: presenterAsks(operation, paths, .none), claims: requests,
                                nonblocking: nonblocking) { [self] held, consent in
            noteOwnChanges(held)
            if !keeps, let held { authority.release(held) }
            body(keeps ? held : nil, consent)
        }
    }
}
