import Glibc
import Synchronization
import CoordFSCore
import SystemPackage

/// A descriptor several handles read or write through, closed after its last user.
///
/// Sendable: immutable.
final class SharedDescriptor: Sendable {
    let descriptor: OwnedDescriptor

    init(_ descriptor: consuming OwnedDescriptor) {
        self.descriptor = descriptor
    }

    var raw: Int32 { descriptor.raw }
}

/// What a commit did, for the caller to publish and to tell the kernel.
struct CommitReport: Sendable {
    /// True when the commit made the name appear (a file created through the mount).
    let created: Bool
    let path: MountPath?
    let size: Int64
    /// The backing the node stood for before the commit (the replaced file), when it changed.
    /// Dropping the last reference closes what may be the replaced file's last descriptor, and
    /// the filesystem then frees its blocks: tens of microseconds better spent after the reply.
    let replaced: NodeBacking?
    /// The replaced file, kept under the temp's name to become a spare (see `SpareFile`).
    let spare: SpareCandidate?
}

/// A file a commit replaced and kept, under the temp's name in `directory`: nobody had it
/// open and it had no other name, so once emptied it can be the next temp there.
struct SpareCandidate: Sendable {
    let name: FileName
    /// The node's backing before the commit: its `O_PATH` descriptor reaches the file.
    let version: NodeBacking
    let directory: Node
}

/// The pending atomic save of one file by one owner: every handle that owner opens for
/// writing shares it, and so do its read-only opens while it lasts, so the owner sees its
/// own uncommitted writes and everyone else the last committed version.
///
/// Until the first change it reads the committed file; the first change stages a hidden temp
/// beside the file (a copy, or empty for O_TRUNC; a spare of the directory when there is one),
/// and every later change goes there. A commit renames the temp over the file, or exchanges
/// the two to keep the replaced file as a spare; a change after a commit stages again.
///
/// Sendable: `node`, `owner` and `spares` never change; the handle count is atomic;
/// everything else is in `state`.
final class Save: Sendable {
    let node: Node
    let owner: ClaimOwner
    /// Where staging takes a spare from, instead of creating a temp.
    let spares: SparePool
    /// Open handles that read or write through this save (its writers, and its owner's readers
    /// while it lasts). A commit compares it with the node's open handles: when they are equal,
    /// nobody else can be reading the version it replaces.
    private let boundHandles = Atomic<Int>(0)

    private struct State: ~Copyable {
        /// What the owner reads and writes: the committed file until the first change, then the temp.
        var current: SharedDescriptor
        /// The temp holding uncommitted changes, nil when there are none.
        var staged: StagedFile?
        /// Where the commit goes; moves when the owner renames the file.
        var directory: Node
        var name: FileName
        /// False for a file created through the mount until its first commit: the name does not
        /// exist in the backing yet (the node's backing object is the temp itself).
        var exists: Bool
        /// Set by a failed change (ENOSPC, EIO): the save will not commit, and the next flush says why.
        var failure: Errno?
        /// Set when the owner unlinked the file: nothing commits any more.
        var discarded = false
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
    init(node: Node, owner: ClaimOwner, committed: consuming OwnedDescriptor, directory: Node, name: FileName, spares: SparePool) {
        self.node = node
        self.owner = owner
        self.spares = spares
        self.state = Mutex(State(current: SharedDescriptor(committed), staged: nil, directory: directory, name: name, exists: true))
    }

    /// A save of a file being created: `staged` is its temp, which the node already stands for.
    init(node: Node, owner: ClaimOwner, creating staged: consuming StagedFile, directory: Node, name: FileName, spares: SparePool) throws(Errno) {
        self.node = node
        self.owner = owner
        self.spares = spares
        let current = try Syscall.duplicate(staged.descriptor.raw)
        var initial = State(current: SharedDescriptor(current), staged: staged, directory: directory, name: name, exists: false)
        initial.currentIsWritable = true
        self.state = Mutex(initial)
    }

    // MARK: Handles

    func addWriter() { state.withLock { $0.writers += 1 } }

    func bindHandle() { boundHandles.add(1, ordering: .relaxed) }
    func unbindHandle() { boundHandles.subtract(1, ordering: .relaxed) }

    /// Whether no handle writes through the save now (read under its lock).
    var hasNoWriters: Bool { state.withLock { $0.writers == 0 } }

    /// Drops a writer; true when it was the last, so the save ends.
    func removeWriter() -> Bool {
        state.withLock { state in
            state.writers -= 1
            return state.writers == 0
        }
    }

    // MARK: Reading and changing

    /// The descriptor the owner's reads go to now (held by the caller for the read's duration).
    var current: SharedDescriptor { state.withLock { $0.current } }

    /// Where the commit will go, and whether that name exists in the backing yet.
    var target: (directory: Node, name: FileName, exists: Bool) {
        state.withLock { ($0.directory, $0.name, $0.exists) }
    }

    var hasUncommittedChanges: Bool { state.withLock { $0.staged != nil } }

    /// A failed save will not commit: new opens, even the owner's, see the committed version.
    var hasFailed: Bool { state.withLock { $0.failure != nil } }

    /// Runs a change (write, fallocate, copy, metadata) against the temp, staging it first.
    /// A failure of the change itself marks the save failed: it will not commit.
    func change<R>(reopen: (Int32, Int32) throws(Errno) -> OwnedDescriptor,
                   _ body: (Int32) throws(Errno) -> R) throws(Errno) -> R {
        try change(truncating: false, reopen: reopen) { (descriptor, _) throws(Errno) -> R in try body(descriptor) }
    }

    /// Truncates the owner's version to `length` (a setattr, or O_TRUNC at open), then runs
    /// `then` on it. A temp staged for this very truncation to zero starts empty, with its times
    /// set by the staging: truncating it again would cost three system calls and show nothing.
    func truncate(to length: off_t, reopen: (Int32, Int32) throws(Errno) -> OwnedDescriptor,
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
                let directory = state.directory.directory
                let current = state.current.raw
                let staged: StagedFile
                if let spare = spares.take(in: state.directory.identity) {
                    staged = try StagedFile.reuse(spare, replacing: current, copyContents: !truncating, reopen: reopen)
                } else {
                    staged = try DirectoryTimes.keeping(of: directory) { () throws(Errno) -> StagedFile in
                        try StagedFile.stage(in: directory, replacing: current, copyContents: !truncating, owner: nil, mode: 0)
                    }
                }
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

    /// Commits uncommitted changes: fsync as `durability` asks, then one rename over the target.
    /// Returns nil when there was nothing to commit; throws the failure of an earlier change.
    /// With `onlyWithoutWriters`, commits only if no writer joined meanwhile (the last writer's
    /// release): a writer that joined commits at its own close.
    ///
    /// With a spare pool, a commit over a file that nobody else has open exchanges the temp with
    /// it instead, and reports the replaced file as a spare candidate. `startingWriteback`:
    /// see `StagedFile.exchange`.
    func commit(durability: Durability, startingWriteback: Bool, nodes: NodeTable, onlyWithoutWriters: Bool = false,
                reopenAsPath: (Int32) throws(Errno) -> OwnedDescriptor) throws(Errno) -> CommitReport? {
        try state.withLock { (state) throws(Errno) -> CommitReport? in
            if onlyWithoutWriters && state.writers > 0 { return nil }
            if let failure = state.failure { throw failure }
            guard !state.discarded, let staged = state.staged.take() else { return nil }
            let directory = state.directory.directory
            let name = state.name
            // The version this commit replaces, when it may be kept: no handle but ours is open.
            let keepable = state.exists && node.openHandleCount == boundHandles.load(ordering: .relaxed)
                ? node.backing : nil
            var kept: NodeBacking?
            do throws(Errno) {
                if state.exists {
                    let level = durability.forCommit(replacingExistingFile: true)
                    try DirectoryTimes.keeping(of: directory) { () throws(Errno) in
                        if let keepable, try staged.exchange(in: directory, with: name, durability: level, startingWriteback: startingWriteback) {
                            kept = try Self.checkExchanged(keepable, in: directory, as: staged.name, target: name)
                        } else {
                            try staged.commit(in: directory, as: name, durability: level)
                        }
                    }
                } else {
                    // A new name: the directory did change.
                    try staged.commit(in: directory, as: name, durability: durability.forCommit(replacingExistingFile: false))
                }
            } catch {
                state.failure = error
                staged.discard(in: state.directory.directory)
                throw error
            }
            let created = !state.exists
            state.exists = true
            var spare: SpareCandidate?
            defer {
                // A kept file that will not be a spare (someone opened it meanwhile, or the
                // commit's bookkeeping failed) goes as a rename over it would have removed it.
                if kept != nil && spare == nil {
                    DirectoryTimes.keeping(of: directory) { () -> Void in _ = staged.discard(in: directory) }
                }
            }
            let status = try Syscall.stat(state.current.raw)
            let identity = FileIdentity(status)
            var replaced: NodeBacking?
            var openHandles = 0
            if identity != node.identity {
                (replaced, openHandles) = nodes.replaceBacking(of: node, with: try reopenAsPath(state.current.raw), identity: identity)
            }
            if let kept, kept === replaced && openHandles == boundHandles.load(ordering: .relaxed) {
                spare = SpareCandidate(name: staged.name, version: kept, directory: state.directory)
                // Announced before the reply: a removal of the directory that comes before
                // `finish` has emptied it must find it.
                spares.expect(staged.name, in: state.directory)
            }
            return CommitReport(created: created, path: nodes.path(of: node), size: Int64(status.st_size),
                                replaced: replaced, spare: spare)
        }
    }

    /// After an exchange: the temp's name holds what the target had. Returns `expected` when
    /// that is it, with no other name, to keep. Anything else (the backing changed behind the
    /// mount) goes as a rename over it would have removed it; a directory is swapped back,
    /// and the commit fails as a rename over a directory does.
    private static func checkExchanged(_ expected: NodeBacking, in directory: Int32, as name: FileName, target: FileName) throws(Errno) -> NodeBacking? {
        let status = try? Syscall.stat(at: directory, name)
        if let status, status.st_mode & S_IFMT == S_IFDIR {
            try? Syscall.rename(directory, name, to: directory, target, flags: Linux.RENAME_EXCHANGE)
            throw .isDirectory
        }
        if let status, FileIdentity(status) == expected.identity, status.st_mode & S_IFMT == S_IFREG, status.st_nlink == 1 {
            return expected
        }
        _ = try? Syscall.unlink(at: directory, name, flags: 0)
        return nil
    }

    /// Throws away uncommitted changes (the owner unlinked the file, or the save failed).
    func discard() {
        state.withLock { state in
            state.discarded = true
            if let staged = state.staged.take() {
                let directory = state.directory.directory
                DirectoryTimes.keeping(of: directory) { () -> Void in staged.discard(in: directory) }
            }
        }
    }

    /// Throws away uncommitted changes of a failed save at its end, keeping the committed file.
    func discardIfFailed() {
        state.withLock { state in
            guard state.failure != nil, state.writers == 0, let staged = state.staged.take() else { return }
            let directory = state.directory.directory
            DirectoryTimes.keeping(of: directory) { () -> Void in staged.discard(in: directory) }
        }
    }

    /// The owner renamed the file: the pending commit goes to the new name.
    func retarget(directory: Node, name: FileName) {
        state.withLock { state in
            // A temp lives beside its target: when the directory changes, move the temp too.
            if state.directory !== directory, let staged = state.staged.take() {
                _ = try? staged.move(from: state.directory.directory, to: directory.directory)
                state.staged = consume staged
            }
            state.directory = directory
            state.name = name
        }
    }
}
