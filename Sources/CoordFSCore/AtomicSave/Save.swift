import Glibc
import Synchronization
import SystemPackage

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
    /// The first commit of a file created through the mount: its name is in the backing now
    /// (`created`, unless its owner renamed it over another file, which it then replaced).
    public var namedNewFile = false
    /// The commit took effect, but syncing its directory afterwards (`--durability full`)
    /// failed: the new version is what everyone sees, and may not survive a crash.
    public var directorySyncFailure: Errno? = nil
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
    struct Appending {
        let file: FileIdentity
        let committedSize: off_t
        let slot: AppendJournal.Slot
        /// The committed file, opened for writing (what `current` is until a fallback).
        let writable: SharedDescriptor
    }

    struct State: ~Copyable {
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
        /// The file under the name is one this save's handles committed (the file it created,
        /// or a truncation committed at the open): a commit that replaces it keeps no version,
        /// as it is the save's own earlier state, not what was there before.
        var replacesOwnCommit = false
        /// A file created through the mount and not committed yet that its owner renamed onto a
        /// name that named another file (the "write a temp, rename it into place, close" pattern):
        /// its first commit replaces that file, as the rename would have on a plain disk.
        var landsOnAnotherFile = false
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
    let boundary = Mutex<AppendBoundary?>(nil)

    /// The committed end of the file while its owner appends to it; nil otherwise. Set before
    /// the first appended byte lands and cleared after the commit, so a reader that stats or
    /// reads the file first and asks this after never shows appended bytes.
    public var appendBoundary: AppendBoundary? { boundary.withLock { $0 } }

    /// Guards the staged temp, the current descriptor, the target and the counters. Changes
    /// hold it while they run, so one owner's writes never race a commit or a restage. Lock
    /// order 2 (Docs/LOCKING.md): held across this file's staging, writes and commit, which only
    /// its owner waits for; while held, the node table's and nodes' backing locks may be taken.
    let state: Mutex<State>

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

    /// A handle joins. One that joins after a commit (the same process opening the file again
    /// before its last handle's release came in) starts from the committed file, which others
    /// could read: what its first commit replaces is a version again.
    func addWriter() {
        state.withLock { state in
            state.writers += 1
            if state.exists { state.replacesOwnCommit = false }
        }
    }

    /// Whether no handle writes through the save now (read under its lock).
    var hasNoWriters: Bool { state.withLock { $0.writers == 0 } }

    /// Drops a writer; true when it was the last, so the save ends.
    public func removeWriter() -> Bool {
        state.withLock { state in
            state.writers -= 1
            return state.writers == 0
        }
    }
}

extension ChangeRange {
    public var isAnywhere: Bool {
        if case .anywhere = self { return true }
        return false
    }
}
