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
    /// (see `SaveBaseline`); the commit's own version is the file all the same. With
    /// `fencedOff`, where the save's own version was kept instead.
    public var conflict: ConflictCopy? = nil
    /// The commit was refused: the claims the save was made under lost their coverage by other
    /// hosts (fencing, Docs/LOCKING.md "Across hosts"), so the file was not replaced; the
    /// save's version is kept at `conflict`, and the save has failed (EIO).
    public var fencedOff = false
    /// For an append committed in place: the size others saw until now. The kernel's pages
    /// from there on may hold what a reader was shown of the end then (zeros past it).
    public var appendedFrom: Int64? = nil
}

/// Where a change of a save's contents lands, so that appends can skip the staged copy.
public enum ChangeRange: Sendable {
    /// Anywhere, or more than bytes (a truncate, an allocation): never an append.
    case anywhere
    /// Bytes from an offset on (a write, a copy into the file, a mapping's writeback).
    case from(off_t)
    /// Bytes at the end of the owner's version (an O_APPEND write).
    case atEnd
}

/// The committed end of a file while its owner appends to it: everyone else reads and sees
/// the file only up to `committedSize` until the commit.
public struct AppendBoundary: Sendable, Equatable {
    public let file: FileIdentity
    public let committedSize: Int64
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
/// Appends are the exception: while every change lands at or past the committed end
/// (O_APPEND, writes at EOF), the changes go to the committed file itself, beyond the size
/// everyone else keeps seeing (`appendBoundary`), and the commit only publishes the new size;
/// the journal records the append so that the next mount cuts it back after a crash. Any
/// other change first stages a copy of what the owner sees (committed prefix and appended
/// bytes) and puts the file back to its committed size: a normal save from then on.
///
/// Sendable: `node`, `owner`, `staging` and `journal` never change; everything else is in
/// `state` and `boundary`.
public final class Save: Sendable {
    public let node: Node
    public let owner: ClaimOwner
    /// Makes the temps (unnamed where the filesystem allows).
    let staging: TempStaging
    /// Records appends in flight; nil: every change stages (no append path).
    let journal: AppendJournal?

    /// An append in progress: every change so far landed at or past `committedSize` and went
    /// to the committed file itself.
    private struct Appending {
        let file: FileIdentity
        let committedSize: off_t
        let slot: AppendJournal.Slot
        /// The committed file, opened for writing (what `current` is until a fallback).
        let writable: SharedDescriptor
    }

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
        /// Whether `current` was opened for writing (the temp is; the committed file is not,
        /// but while appending to it).
        var currentIsWritable = false
        /// Set while appending (then `current` is the committed file, opened for writing, and
        /// `staged` nil).
        var appending: Appending?
        /// Set once the file turned out to coordinate itself (it is locked, or a database):
        /// changes go to the committed file itself, as for in-place files.
        var inPlace = false
    }

    /// `appendBoundary`, apart from `state` because readers of the committed version ask for
    /// it on every read and stat, and must not wait for the owner's writes. A leaf
    /// (Docs/LOCKING.md), held only to copy the value.
    private let boundary = Mutex<AppendBoundary?>(nil)

    /// The committed end of the file while its owner appends to it; nil otherwise. Set before
    /// the first appended byte lands and cleared after the commit, so a reader that stats or
    /// reads the file first and asks this after never shows appended bytes.
    public var appendBoundary: AppendBoundary? { boundary.withLock { $0 } }

    /// Guards the staged temp, the current descriptor, the target and the counters. Changes
    /// hold it while they run, so one owner's writes never race a commit or a restage. Lock
    /// order 2 (Docs/LOCKING.md): held across this file's staging, writes and commit, which only
    /// its owner waits for; while held, the node table's and nodes' backing locks may be taken.
    private let state: Mutex<State>

    /// A save of an existing file, reading `committed` until its first change.
    public init(node: Node, owner: ClaimOwner, committed: consuming OwnedDescriptor, directory: Node, name: FileName, staging: TempStaging,
                journal: AppendJournal? = nil) {
        self.node = node
        self.owner = owner
        self.staging = staging
        self.journal = journal
        self.state = Mutex(State(current: SharedDescriptor(committed), staged: nil, directory: directory, name: name, exists: true))
    }

    /// A save of a file being created: `staged` is its temp, which the node already stands for,
    /// and `current` a duplicate of the temp's descriptor, for the owner's reads and writes.
    public init(node: Node, owner: ClaimOwner, creating staged: consuming StagedFile, current: consuming OwnedDescriptor,
         directory: Node, name: FileName, staging: TempStaging) {
        self.node = node
        self.owner = owner
        self.staging = staging
        self.journal = nil
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

    public var hasUncommittedChanges: Bool { state.withLock { $0.staged != nil || $0.appending != nil } }

    /// Whether the owner's changes so far are an append to the committed file (for tests).
    public var isAppending: Bool { state.withLock { $0.appending != nil } }

    /// A failed save will not commit: new opens, even the owner's, see the committed version.
    public var hasFailed: Bool { state.withLock { $0.failure != nil } }

    /// Runs a change (write, fallocate, copy, metadata) against the temp, staging it first; a
    /// change `range` says lands at or past the committed end goes to the file itself instead,
    /// as an append (see the type's notes). A failure of the change itself marks the save
    /// failed: it will not commit.
    public func change<R>(at range: ChangeRange = .anywhere,
                   _ body: (Int32) throws(Errno) -> R) throws(Errno) -> R {
        try change(truncating: false, range: range) { (descriptor, _) throws(Errno) -> R in try body(descriptor) }
    }

    /// Truncates the owner's version to `length` (a setattr, or O_TRUNC at open), then runs
    /// `then` on it. A temp staged for this very truncation to zero starts empty, with its times
    /// set by the staging: truncating it again would cost three system calls and show nothing.
    public func truncate(to length: off_t,
                  then: (Int32) throws(Errno) -> Void = { _ throws(Errno) in }) throws(Errno) {
        try change(truncating: length == 0, range: .anywhere) { (descriptor, stagedEmpty) throws(Errno) in
            if !stagedEmpty { try StagedFile.truncate(descriptor, to: length) }
            try then(descriptor)
        }
    }

    /// `change`, where `truncating` stages an empty temp instead of a copy when nothing is staged
    /// yet, and `body` learns whether this call did so.
    private func change<R>(truncating: Bool, range: ChangeRange,
                           _ body: (Int32, _ stagedEmpty: Bool) throws(Errno) -> R) throws(Errno) -> R {
        try state.withLock { (state) throws(Errno) -> R in
            if let failure = state.failure { throw failure }
            if state.discarded || state.inPlace {
                // The file was unlinked (nobody else can reach it), or it coordinates itself:
                // changes go straight to it.
                if !state.currentIsWritable {
                    state.current = SharedDescriptor(try Syscall.reopen(state.current.raw, O_RDWR))
                    state.currentIsWritable = true
                }
                return try body(state.current.raw, false)
            }
            var stagedEmpty = false
            if state.staged == nil && appends(range, &state) {
                do throws(Errno) {
                    return try body(state.current.raw, false)
                } catch {
                    state.failure = error
                    throw error
                }
            }
            if state.staged == nil {
                // While appending, `current` holds the committed prefix and the appended bytes: the
                // copy takes both.
                let staged = try staging.stage(in: state.directory, replacing: state.current.raw, copyContents: !truncating,
                                               owner: nil, mode: 0)
                // A duplicate, not a reopen through /proc: cheaper, and one open file, so the
                // temp's descriptor closes at the commit without ending it (an end can cost: NFS
                // flushes, ext4 may write back); it ends with the save, after the replies.
                state.current = SharedDescriptor(try Syscall.duplicate(staged.descriptor.raw))
                state.currentIsWritable = true
                state.staged = consume staged
                stagedEmpty = truncating
                if let appending = state.appending { try endAppendByStaging(appending, &state) }
            }
            do throws(Errno) {
                return try body(state.current.raw, stagedEmpty)
            } catch {
                state.failure = error
                throw error
            }
        }
    }

    /// Whether a change in `range` goes to the committed file as an append: nothing is staged,
    /// the file exists under its name, and the change lands at or past the committed end. The
    /// first such change starts the append: records it in the journal, reopens the file for
    /// writing and sets the boundary, before any byte lands. Whatever stops that (no journal,
    /// a file the daemon may not reopen, a path too long to record) leaves staging to do.
    private func appends(_ range: ChangeRange, _ state: inout State) -> Bool {
        if let appending = state.appending {
            switch range {
            case .anywhere: return false
            case .atEnd: return true
            case .from(let offset): return offset >= appending.committedSize
            }
        }
        guard let journal, state.exists, !state.nameRemovedThroughMount, !range.isAnywhere,
              let status = try? Syscall.stat(state.current.raw), status.st_mode & S_IFMT == S_IFREG else { return false }
        if case .from(let offset) = range, offset < status.st_size { return false }
        let file = FileIdentity(status)
        do throws(Errno) {
            let writable = try Syscall.reopen(state.current.raw, O_RDWR)
            let slot = try journal.begin(file: file, committedSize: Int64(status.st_size), directory: state.directory, name: state.name)
            let shared = SharedDescriptor(writable)
            state.current = shared
            state.currentIsWritable = true
            state.appending = Appending(file: file, committedSize: status.st_size, slot: slot, writable: shared)
            boundary.withLock { $0 = AppendBoundary(file: file, committedSize: Int64(status.st_size)) }
            return true
        } catch {
            return false
        }
    }

    /// An append turned into a staged save (a change inside the committed range, a truncate,
    /// or a commit that found the name no longer naming the file): the temp just staged from
    /// the appended file holds what the owner sees; the file goes back to its committed size, so
    /// the commit replaces an intact committed version, and the temp's baseline is that version.
    private func endAppendByStaging(_ appending: Appending, _ state: inout State) throws(Errno) {
        do throws(Errno) {
            try Syscall.truncate(appending.writable.raw, appending.committedSize)
            if var staged = state.staged.take() {
                staged.baseline = SaveBaseline(try Syscall.stat(appending.writable.raw))
                state.staged = consume staged
            }
        } catch {
            state.failure = error
            throw error
        }
        endAppend(appending, &state)
    }

    /// The append is over (committed, rolled back, or turned into a staged save): its record
    /// and boundary go. A record that cannot be cleared is left for recovery, which finds the
    /// file at its committed size or no longer the same (a rollback or a staged save), or
    /// would cut back a committed append (the caller fails the commit instead).
    private func endAppend(_ appending: Appending, _ state: inout State) {
        state.appending = nil
        try? journal?.end(appending.slot)
        boundary.withLock { $0 = nil }
    }

    /// Cuts an append that will not commit (a failed save, an unlinked file's) back to the
    /// committed size when the file still has a name, and ends it.
    private func rollBackAppend(_ state: inout State) {
        guard let appending = state.appending else { return }
        if !state.discarded { try? Syscall.truncate(appending.writable.raw, appending.committedSize) }
        endAppend(appending, &state)
    }

    /// Commits an append in place: no rename (nothing is replaced), an fsync only when the
    /// durability syncs every commit (`file`, `full`: an append over nothing is like a new
    /// file for `replacing`), then the record goes and the new size is everyone's.
    private func commitAppend(_ appending: Appending, durability: Durability, nodes: NodeTable,
                              _ state: inout State) throws(Errno) -> CommitReport {
        do throws(Errno) {
            if durability.forCommit(replacingExistingFile: false).syncsFile {
                try Syscall.synchronize(state.current.raw, dataOnly: false)
            }
            try journal?.end(appending.slot)
        } catch {
            state.failure = error
            throw error
        }
        state.appending = nil
        boundary.withLock { $0 = nil }
        let size = Int64(try Syscall.stat(state.current.raw).st_size)
        var report = CommitReport(created: false, path: nodes.path(of: node), size: size, replaced: nil)
        report.appendedFrom = Int64(appending.committedSize)
        return report
    }

    /// Commits uncommitted changes: fsync as `durability` asks, then the temp in place of the
    /// target (see `StagedFile.commit`). Returns nil when there was nothing to commit; throws
    /// the failure of an earlier change. With `onlyWithoutWriters`, commits only if no writer
    /// joined meanwhile (the last writer's release): a writer that joined commits at its own close.
    /// `reopen` opens the object behind a descriptor afresh with other flags; `willKeep` hears
    /// the name a conflict copy is about to be linked under. `stillCovered` is asked just
    /// before the backing changes: false refuses the commit (see `CommitReport.fencedOff`).
    /// `thenInPlace`: the file turned out to coordinate itself (see `writesInPlace`): once
    /// committed, every later change of this save goes to the file itself.
    public func commit(durability: Durability, nodes: NodeTable, onlyWithoutWriters: Bool = false, thenInPlace: Bool = false,
                willKeep: (_ directory: Node, FileName) -> Void = { _, _ in },
                stillCovered: () -> Bool = { true }) throws(Errno) -> CommitReport? {
        try state.withLock { (state) throws(Errno) -> CommitReport? in
            let report = try commitLocked(&state, durability: durability, nodes: nodes, onlyWithoutWriters: onlyWithoutWriters, willKeep: willKeep, stillCovered: stillCovered)
            if thenInPlace && !state.discarded && state.failure == nil && (!onlyWithoutWriters || state.writers == 0) {
                try writeInPlaceFromNowOn(&state)
            }
            return report
        }
    }

    /// `commit`'s work, under the save's lock.
    private func commitLocked(_ state: inout State, durability: Durability, nodes: NodeTable, onlyWithoutWriters: Bool,
                              willKeep: (_ directory: Node, FileName) -> Void,
                              stillCovered: () -> Bool) throws(Errno) -> CommitReport? {
        if onlyWithoutWriters && state.writers > 0 { return nil }
        if let failure = state.failure { throw failure }
        if let appending = state.appending, !state.discarded {
            let found = try? Syscall.stat(at: state.directory.directory, state.name)
            if found.map(FileIdentity.init) == appending.file { return try commitAppend(appending, durability: durability, nodes: nodes, &state) }
            if state.nameRemovedThroughMount {
                // The owner took the name away: the appended bytes are in the file, which
                // the names it has left show, as on a plain disk.
                endAppend(appending, &state)
                return nil
            }
            // Moved, replaced or deleted behind the mount: the append commits as a save would,
            // from a copy, with what it found kept beside it (see `FoundAtCommit`).
            do throws(Errno) {
                let staged = try staging.stage(in: state.directory, replacing: appending.writable.raw, copyContents: true,
                                               owner: nil, mode: 0)
                state.current = SharedDescriptor(try Syscall.duplicate(staged.descriptor.raw))
                state.staged = consume staged
            } catch {
                state.failure = error
                throw error
            }
            try endAppendByStaging(appending, &state)
        }
        guard !state.discarded, let staged = state.staged.take() else { return nil }
        let directory = state.directory.directory
        if !stillCovered() { return try keepFencedOff(staged, &state, nodes: nodes, willKeep: willKeep) }
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
                return try Self.commitWithoutItsName(staged, of: node, state: &state, nodes: nodes)
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
        if !replacing {
            // The name is the node's again (a watch of the backing may have seen it deleted
            // behind the mount, and the node table marked the node unlinked).
            nodes.moved(node, to: state.directory, name: state.name)
        }
        let status = try Syscall.stat(state.current.raw)
        let identity = FileIdentity(status)
        var replaced: NodeBacking?
        if identity != node.identity {
            replaced = nodes.replaceBacking(of: node, with: try Syscall.reopen(state.current.raw, Linux.O_PATH), identity: identity)
        }
        var report = CommitReport(created: !replacing, path: nodes.path(of: node), size: Int64(status.st_size), replaced: replaced)
        if let keptAs {
            let folder = state.directory
            report.conflict = ConflictCopy(directory: folder, name: keptAs, path: nodes.path(of: folder)?.appending(keptAs))
        }
        return report
    }

    /// After a commit: the committed file is what the owner reads and writes from now on.
    private func writeInPlaceFromNowOn(_ state: inout State) throws(Errno) {
        guard !state.inPlace else { return }
        if !state.currentIsWritable {
            state.current = SharedDescriptor(try Syscall.reopen(state.current.raw, O_RDWR))
            state.currentIsWritable = true
        }
        state.inPlace = true
    }

    /// Whether changes go to the file itself now (see `commit(thenInPlace:)`).
    public var writesInPlace: Bool { state.withLock { $0.inPlace } }

    /// A commit refused by fencing: the staged version is kept beside the file under a conflict
    /// name, the file stays as it is (another host may be writing it), and the save fails with
    /// EIO. Should the link fail too, the temp stays staged until the save ends.
    private func keepFencedOff(_ staged: consuming StagedFile, _ state: inout State, nodes: NodeTable,
                               willKeep: (_ directory: Node, FileName) -> Void) throws(Errno) -> CommitReport {
        let folder = state.directory
        state.failure = .ioError
        let keptAs: FileName
        do throws(Errno) {
            keptAs = try ConflictName.keep(file: staged.descriptor.raw, besides: state.name, in: folder.directory,
                                           willLink: { willKeep(folder, $0) })
        } catch {
            state.staged = consume staged
            throw .ioError
        }
        let size = (try? Syscall.stat(staged.descriptor.raw).st_size).map(Int64.init) ?? 0
        staged.discard(in: folder.directory)
        var report = CommitReport(created: false, path: nodes.path(of: node), size: size, replaced: nil)
        report.conflict = ConflictCopy(directory: folder, name: keptAs, path: nodes.path(of: folder)?.appending(keptAs))
        report.fencedOff = true
        return report
    }

    /// The commit of a file whose name its owner took away before it closed (an unlink, or a
    /// rename of another file over it) while the file kept another hard link: on a plain disk
    /// the owner's writes reach that other name, and neither bring the removed name back nor
    /// replace the file now there. The node does not know that name (the kernel opens by
    /// inode), so the temp's contents are written into the file itself, which every name it has
    /// left shows. Not atomic for readers of those names: the price of keeping their link.
    /// A file with no name left has nowhere to go: its changes are dropped.
    private static func commitWithoutItsName(_ staged: consuming StagedFile, of node: Node, state: inout State, nodes: NodeTable) throws(Errno) -> CommitReport? {
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
                try Syscall.reopen(committed.descriptor.raw, O_RDWR | O_TRUNC)
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
        let threwAway = state.withLock { state in
            let first = !state.discarded
            let appended = state.appending != nil
            state.discarded = true
            rollBackAppend(&state)
            guard let staged = state.staged.take() else { return first && appended }
            staged.discard(in: state.directory.directory)
            return first
        }
        if threwAway { Instruments.savesDiscarded.increment() }
    }

    /// Throws away uncommitted changes of a failed save at its end, keeping the committed file.
    public func discardIfFailed() {
        let threwAway = state.withLock { state in
            guard state.failure != nil, state.writers == 0 else { return false }
            rollBackAppend(&state)
            guard let staged = state.staged.take() else { return false }
            staged.discard(in: state.directory.directory)
            return true
        }
        if threwAway { Instruments.savesDiscarded.increment() }
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
            if let appending = state.appending {
                journal?.move(appending.slot, file: appending.file, committedSize: Int64(appending.committedSize), directory: directory, name: name)
            }
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

extension ChangeRange {
    public var isAnywhere: Bool {
        if case .anywhere = self { return true }
        return false
    }
}
