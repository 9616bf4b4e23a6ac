import Glibc
import Synchronization
import SystemPackage

/// A descriptor several handles read or write through, closed after its last user.
///
/// Sendable: immutable.
public final class SharedDescriptor: Sendable {
    public let descriptor: OwnedDescriptor

    public init(_ descriptor: consuming OwnedDescriptor) {
        self.descriptor = descriptor
    }

    public var raw: Int32 { descriptor.raw }
}

/// What a commit did, for the caller to publish and to tell the kernel.
public struct CommitReport: Sendable {
    /// True when the commit made the name appear (a file created through the mount).
    public let created: Bool
    public let path: MountPath?
    public let size: Int64
    /// The backing the node stood for before the commit (the replaced file), when it changed.
    /// Dropping the last reference closes what may be the replaced file's last descriptor, and
    /// the filesystem then frees its blocks: tens of microseconds better spent after the reply.
    public let replaced: NodeBacking?
    /// Where the version the commit found changed behind the mount was kept, when it found one
    /// (see `SaveBaseline`); the commit's own version is the file all the same.
    public var conflict: ConflictCopy? = nil
}

/// The pending atomic save of one file by one owner: every handle that owner opens for
/// writing shares it, and so do its read-only opens while it lasts, so the owner sees its
/// own uncommitted writes and everyone else the last committed version.
///
/// Until the first change it reads the committed file; the first change stages a temp (see
/// `StagedFile`: unnamed where the backing allows; a copy, or empty for O_TRUNC), and every
/// later change goes there. A commit puts the temp in place of the file; a change after a
/// commit stages again. A commit that finds the file changed behind the mount since the
/// staging first keeps that version beside it (see `SaveBaseline` and `ConflictName`).
///
/// Sendable: `node`, `owner` and `staging` never change; everything else is in `state`.
public final class Save: Sendable {
    public let node: Node
    public let owner: ClaimOwner
    /// Makes the temps (unnamed where the filesystem allows).
    let staging: TempStaging

    private struct State: ~Copyable {
        /// What the owner reads and writes: the committed file until the first change, then the temp.
        var current: SharedDescriptor
        /// The temp holding uncommitted changes, nil when there are none.
        var staged: StagedFile?
        /// Where the commit goes; moves when the owner renames the file.
        var directory: Node
        var name: FileName
        /// False for a file created through the mount until its first commit: the name does not
        /// exist in the backing yet (the node's backing object is the temp itself, unnamed or
        /// under a hidden name).
        var exists: Bool
        /// Set by a failed change (ENOSPC, EIO): the save will not commit, and the next flush says why.
        var failure: Errno?
        /// Set when the owner unlinked the file: nothing commits any more.
        var discarded = false
        /// The mount took the name the commit goes to away (the owner's unlink, or a rename
        /// over it): another file or none there is not a change behind the mount.
        var nameRemovedThroughMount = false
        /// Handles open for writing; the save ends with the last one.
        var writers = 0
        /// Whether `current` was opened for writing (the temp is; the committed file is not).
        var currentIsWritable = false
    }

    /// Guards the staged temp, the current descriptor, the target and the counters. Changes
    /// hold it while they run, so one owner's writes never race a commit or a restage. Lock
    /// order 2 (Docs/LOCKING.md): held across this file's staging, writes and commit, which only
    /// its owner waits for; while held, the node table's and nodes' backing locks may be taken.
    private let state: Mutex<State>

    /// A save of an existing file, reading `committed` until its first change.
    public init(node: Node, owner: ClaimOwner, committed: consuming OwnedDescriptor, directory: Node, name: FileName, staging: TempStaging) {
        self.node = node
        self.owner = owner
        self.staging = staging
        self.state = Mutex(State(current: SharedDescriptor(committed), staged: nil, directory: directory, name: name, exists: true))
    }

    /// A save of a file being created: `staged` is its temp, which the node already stands for,
    /// and `current` a duplicate of the temp's descriptor, for the owner's reads and writes.
    public init(node: Node, owner: ClaimOwner, creating staged: consuming StagedFile, current: consuming OwnedDescriptor,
         directory: Node, name: FileName, staging: TempStaging) {
        self.node = node
        self.owner = owner
        self.staging = staging
        var initial = State(current: SharedDescriptor(current), staged: staged, directory: directory, name: name, exists: false)
        initial.currentIsWritable = true
        self.state = Mutex(initial)
    }

    // MARK: Handles

    func addWriter() { state.withLock { $0.writers += 1 } }

    /// Whether no handle writes through the save now (read under its lock).
    var hasNoWriters: Bool { state.withLock { $0.writers == 0 } }

    /// Drops a writer; true when it was the last, so the save ends.
    public func removeWriter() -> Bool {
        state.withLock { state in
            state.writers -= 1
            return state.writers == 0
        }
    }

    // MARK: Reading and changing

    /// The descriptor the owner's reads go to now (held by the caller for the read's duration).
    public var current: SharedDescriptor { state.withLock { $0.current } }

    /// The attributes of the owner's version (see `shownToOwner`). A discarded save shows what
    /// its unlinked file really has.
    public func currentStatus() throws(Errno) -> stat {
        let (current, isTemp) = state.withLock { ($0.current, $0.staged != nil && !$0.discarded) }
        let status = try withExtendedLifetime(current) { () throws(Errno) -> stat in try Syscall.stat(current.raw) }
        return isTemp ? Self.shownToOwner(status) : status
    }

    /// A temp's attributes as its owner sees them: an unnamed temp has no link yet, and is
    /// shown the one its commit gives it, as its file (new or saved) has on a plain disk.
    public static func shownToOwner(_ status: stat) -> stat {
        var shown = status
        if shown.st_nlink == 0 { shown.st_nlink = 1 }
        return shown
    }

    /// Where the commit will go, and whether that name exists in the backing yet.
    public var target: (directory: Node, name: FileName, exists: Bool) {
        state.withLock { ($0.directory, $0.name, $0.exists) }
    }

    public var hasUncommittedChanges: Bool { state.withLock { $0.staged != nil } }

    /// A failed save will not commit: new opens, even the owner's, see the committed version.
    public var hasFailed: Bool { state.withLock { $0.failure != nil } }

    /// Runs a change (write, fallocate, copy, metadata) against the temp, staging it first.
    /// A failure of the change itself marks the save failed: it will not commit.
    public func change<R>(reopen: (Int32, Int32) throws(Errno) -> OwnedDescriptor,
                   _ body: (Int32) throws(Errno) -> R) throws(Errno) -> R {
        try change(truncating: false, reopen: reopen) { (descriptor, _) throws(Errno) -> R in try body(descriptor) }
    }

    /// Truncates the owner's version to `length` (a setattr, or O_TRUNC at open), then runs
    /// `then` on it. A temp staged for this very truncation to zero starts empty, with its times
    /// set by the staging: truncating it again would cost three system calls and show nothing.
    public func truncate(to length: off_t, reopen: (Int32, Int32) throws(Errno) -> OwnedDescriptor,
                  then: (Int32) throws(Errno) -> Void = { _ throws(Errno) in }) throws(Errno) {
        try change(truncating: length == 0, reopen: reopen) { (descriptor, stagedEmpty) throws(Errno) in
            if !stagedEmpty { try StagedFile.truncate(descriptor, to: length, reopen: reopen) }
            try then(descriptor)
        }
    }

    /// `change`, where `truncating` stages an empty temp instead of a copy when nothing is staged
    /// yet, and `body` learns whether this call did so.
    private func change<R>(truncating: Bool, reopen: (Int32, Int32) throws(Errno) -> OwnedDescriptor,
                           _ body: (Int32, _ stagedEmpty: Bool) throws(Errno) -> R) throws(Errno) -> R {
        try state.withLock { (state) throws(Errno) -> R in
            if let failure = state.failure { throw failure }
            if state.discarded {
                // The file was unlinked: nobody else can reach it, so changes go straight to it.
                if !state.currentIsWritable {
                    state.current = SharedDescriptor(try reopen(state.current.raw, O_RDWR))
                    state.currentIsWritable = true
                }
                return try body(state.current.raw, false)
            }
            var stagedEmpty = false
            if state.staged == nil {
                let staged = try staging.stage(in: state.directory, replacing: state.current.raw, copyContents: !truncating,
                                               owner: nil, mode: 0)
                // A duplicate, not a reopen through /proc: cheaper, and one open file, so the
                // temp's descriptor closes at the commit without ending it (an end can cost: NFS
                // flushes, ext4 may write back); it ends with the save, after the replies.
                state.current = SharedDescriptor(try Syscall.duplicate(staged.descriptor.raw))
                state.currentIsWritable = true
                state.staged = consume staged
                stagedEmpty = truncating
            }
            do throws(Errno) {
                return try body(state.current.raw, stagedEmpty)
            } catch {
                state.failure = error
                throw error
            }
        }
    }

    /// Commits uncommitted changes: fsync as `durability` asks, then the temp in place of the
    /// target (see `StagedFile.commit`). Returns nil when there was nothing to commit; throws
    /// the failure of an earlier change. With `onlyWithoutWriters`, commits only if no writer
    /// joined meanwhile (the last writer's release): a writer that joined commits at its own close.
    /// `reopen` opens the object behind a descriptor afresh with other flags; `willKeep` hears
    /// the name a conflict copy is about to be linked under.
    public func commit(durability: Durability, nodes: NodeTable, onlyWithoutWriters: Bool = false,
                reopen: (Int32, Int32) throws(Errno) -> OwnedDescriptor,
                willKeep: (_ directory: Node, FileName) -> Void = { _, _ in }) throws(Errno) -> CommitReport? {
        try state.withLock { (state) throws(Errno) -> CommitReport? in
            if onlyWithoutWriters && state.writers > 0 { return nil }
            if let failure = state.failure { throw failure }
            guard !state.discarded, let staged = state.staged.take() else { return nil }
            let directory = state.directory.directory
            var replacing = state.exists
            var keptAs: FileName?
            if state.exists {
                // The one fstatat a commit costs: what the name names now.
                let found = try? Syscall.stat(at: directory, state.name)
                switch FoundAtCommit.classify(found, file: node.identity, baseline: staged.baseline,
                                              removedThroughTheMount: state.nameRemovedThroughMount) {
                case .asStaged:
                    break
                case .removedThroughTheMount:
                    return try Self.commitWithoutItsName(staged, of: node, state: &state, nodes: nodes, reopen: reopen)
                case .goneBehindTheMount:
                    replacing = false
                case .changedBehindTheMount:
                    do throws(Errno) {
                        let folder = state.directory
                        keptAs = try ConflictName.keep(state.name, in: directory, willLink: { willKeep(folder, $0) })
                    } catch .noSuchFileOrDirectory {
                        replacing = false // deleted meanwhile
                    } catch {
                        // Nothing changed in the backing: the outside version stays, the save fails.
                        state.failure = error
                        staged.discard(in: directory)
                        throw error
                    }
                }
            }
            do throws(Errno) {
                try staged.commit(in: directory, as: state.name, replacingExistingFile: replacing,
                                  durability: durability.forCommit(replacingExistingFile: replacing))
            } catch {
                state.failure = error
                staged.discard(in: directory)
                throw error
            }
            state.exists = true
            let status = try Syscall.stat(state.current.raw)
            let identity = FileIdentity(status)
            var replaced: NodeBacking?
            if identity != node.identity {
                replaced = nodes.replaceBacking(of: node, with: try reopen(state.current.raw, Linux.O_PATH), identity: identity)
            }
            var report = CommitReport(created: !replacing, path: nodes.path(of: node), size: Int64(status.st_size), replaced: replaced)
            if let keptAs {
                let folder = state.directory
                report.conflict = ConflictCopy(directory: folder, name: keptAs, path: nodes.path(of: folder)?.appending(keptAs))
            }
            return report
        }
    }

    /// The commit of a file whose name its owner took away before it closed (an unlink, or a
    /// rename of another file over it) while the file kept another hard link: on a plain disk
    /// the owner's writes reach that other name, and neither bring the removed name back nor
    /// replace the file now there. The node does not know that name (the kernel opens by
    /// inode), so the temp's contents are written into the file itself, which every name it has
    /// left shows. Not atomic for readers of those names: the price of keeping their link.
    /// A file with no name left has nowhere to go: its changes are dropped.
    private static func commitWithoutItsName(_ staged: consuming StagedFile, of node: Node, state: inout State, nodes: NodeTable,
                                             reopen: (Int32, Int32) throws(Errno) -> OwnedDescriptor) throws(Errno) -> CommitReport? {
        let directory = state.directory.directory
        defer { staged.discard(in: directory) }
        let committed = node.backing
        let links = withExtendedLifetime(committed) { (try? Syscall.statOfPathDescriptor(committed.descriptor.raw).st_nlink) ?? 0 }
        guard links > 0 else {
            state.discarded = true
            return nil
        }
        do throws(Errno) {
            let file = try withExtendedLifetime(committed) { () throws(Errno) -> OwnedDescriptor in
                try reopen(committed.descriptor.raw, O_RDWR | O_TRUNC)
            }
            try staged.copyContents(into: file.raw)
            state.current = SharedDescriptor(file)
            state.currentIsWritable = true
        } catch {
            state.failure = error
            throw error
        }
        let size = (try? Syscall.stat(state.current.raw).st_size).map(Int64.init) ?? 0
        return CommitReport(created: false, path: nodes.path(of: node), size: size, replaced: nil)
    }

    /// Throws away uncommitted changes (the owner unlinked the file, or the save failed).
    public func discard() {
        state.withLock { state in
            state.discarded = true
            if let staged = state.staged.take() { staged.discard(in: state.directory.directory) }
        }
    }

    /// Throws away uncommitted changes of a failed save at its end, keeping the committed file.
    public func discardIfFailed() {
        state.withLock { state in
            guard state.failure != nil, state.writers == 0, let staged = state.staged.take() else { return }
            staged.discard(in: state.directory.directory)
        }
    }

    /// The owner renamed the file: the pending commit goes to the new name.
    public func retarget(directory: Node, name: FileName) {
        state.withLock { state in
            // A named temp lives beside its target: when the directory changes, it moves too.
            if state.directory !== directory, let staged = state.staged.take() {
                _ = try? staged.move(from: state.directory.directory, to: directory.directory)
                state.staged = consume staged
            }
            state.directory = directory
            state.name = name
            // The new name names the file, and the rename moved its change time.
            state.nameRemovedThroughMount = false
            rebaseline(&state)
        }
    }

    // MARK: Changes through the mount to the committed file

    /// The mount removed `directory`/`name`, a name of this save's file (an unlink, or a
    /// rename over it). When it is the name the commit goes to, the owner took it away (only
    /// the owner gets past its write claim on it): the commit then does what a plain disk
    /// does (see `commitWithoutItsName`) and finds no change behind the mount. Another name of
    /// the file (a hard link) changed its link count and with it its change time, through the
    /// mount: the save takes the file as it is now.
    public func nameRemovedThroughMount(_ name: FileName, in directory: Node) {
        state.withLock { state in
            if state.directory.identity == directory.identity && state.name == name {
                state.nameRemovedThroughMount = true
            } else {
                rebaseline(&state)
            }
        }
    }

    /// The mount changed the committed file without going through this save: a hard link
    /// made to it, or an attribute changed by another of its names (claims are per path, and
    /// hard links are other paths). That moved its change time through the mount, not behind
    /// it: the save takes the file as it is now.
    public func committedFileChangedThroughMount() {
        state.withLock { state in rebaseline(&state) }
    }

    /// Takes the committed file as it is now for the staged temp's baseline, when the node
    /// still stands for the file the temp was staged from. (A change behind the mount between
    /// the mount's change and this fstat passes for the mount's: microseconds, once.)
    private func rebaseline(_ state: inout State) {
        guard var staged = state.staged.take() else { return }
        if let baseline = staged.baseline {
            let committed = node.backing
            let status = withExtendedLifetime(committed) { try? Syscall.statOfPathDescriptor(committed.descriptor.raw) }
            if let status, FileIdentity(status) == baseline.identity { staged.baseline = SaveBaseline(status) }
        }
        state.staged = consume staged
    }
}
