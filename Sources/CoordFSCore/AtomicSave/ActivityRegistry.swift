import Synchronization

/// What the mount tracks about a regular file while it is open: its pending save, and the
/// readers that read through the kernel's page cache.
///
/// The kernel keeps one page cache per inode, and a file keeps its inode across commits (so
/// locks and identity carry on). Readers that opened before a commit read the old version
/// through their own descriptors; if readers of the new version filled the same cache, an old
/// reader could read a mix. So after a commit, while any older cached reader is still open,
/// new readers bypass the cache (direct I/O), and once the last older reader closes the cache
/// is dropped and used again.
///
/// Not Sendable on its own: only touched under `ActivityRegistry`'s lock.
final class FileActivity {
    var save: Save?
    /// The save's owner mapped the file: the kernel's page cache, which every mapping and
    /// cached reader of the file shares, holds the save's pages (see `pageCacheSource` in
    /// CoordFSFuse/PageCacheVersions.swift).
    var saveIsMapped = false
    /// Open handles reading through the page cache, by owner.
    var cachedReaderOwners: [ClaimOwner: Int] = [:]
    var cachedReaders = 0
    /// The version the cached readers read (they all read the same one), while any is open.
    var cachedVersion: SharedDescriptor?
    var cachedVersionIdentity: FileIdentity?
    /// The page cache may hold pages of a version older than the committed one.
    var cacheIsStale = false
    /// Drops of the page cache asked for (by a commit, or by the last older reader's close)
    /// that the kernel has not confirmed yet (`cacheDropped`). The cache is good again only
    /// once the last of them is done: the confirmation of an earlier drop must not clear the
    /// mark a later commit set, whose own drop is still to come.
    var dropsPending = 0

    var isIdle: Bool { save == nil && cachedReaders == 0 && !cacheIsStale }
}

/// A name in a directory, for saves whose target does not exist in the backing yet.
public struct PendingName: Hashable, Sendable {
    public let directory: UInt64
    public let name: FileName

    public init(directory: UInt64, name: FileName) {
        self.directory = directory
        self.name = name
    }
}

/// Every file with a pending save or cached readers, and the names of files created through
/// the mount that only their creator sees until their first commit.
///
/// Sendable: all state is behind one lock; counts are atomics so hot paths (getattr, lookup)
/// skip the lock when nothing is pending.
public final class ActivityRegistry: Sendable {
    private struct State {
        var files: [UInt64: FileActivity] = [:]
        var pendingNames: [PendingName: Save] = [:]
    }

    /// Guards both maps and every `FileActivity` in them. Lock order 1 (Docs/LOCKING.md, "The
    /// daemon's own locks"): while held, only a save's lock may be taken (to add or count its
    /// writers); never held across a system call.
    private let state = Mutex(State())
    /// Saves in progress; lets getattr skip the lock when there are none.
    private let saveCount = Atomic<Int>(0)
    /// Pending names; lets lookups that miss skip the lock when there are none.
    private let pendingNameCount = Atomic<Int>(0)

    /// Files whose page cache may hold an older version.
    private let staleCount = Atomic<Int>(0)
    /// Saves whose owner mapped the file; lets reads and lookups skip the lock when there are none.
    private let mappedSaveCount = Atomic<Int>(0)

    public init() {}

    public var hasSaves: Bool { saveCount.load(ordering: .relaxed) > 0 }

    /// Whether the kernel must not cache the node's attributes: a save is pending (its owner and
    /// everyone else see different sizes) or readers of different versions are open.
    public func needsFreshAttributes(_ node: Node) -> Bool {
        guard hasSaves || staleCount.load(ordering: .relaxed) > 0 else { return false }
        return state.withLock { state in
            guard let activity = state.files[node.id] else { return false }
            return activity.save != nil || activity.cacheIsStale
        }
    }
    public var hasPendingNames: Bool { pendingNameCount.load(ordering: .relaxed) > 0 }

    public func save(of node: Node) -> Save? {
        guard hasSaves else { return nil }
        return state.withLock { $0.files[node.id]?.save }
    }

    /// Adds a writer to the node's save, if it has one that `owner` may share: its own, or one
    /// gone in place. Under the registry's lock, so a save that has just lost its last writer is
    /// either joined or ended, never both.
    ///
    /// Another owner's staged save is met only when that owner's claim was broken (its write
    /// claim keeps everyone else out until then): that save is set aside, nil is returned, and
    /// the opener starts its own from the committed file. The one set aside goes on for the
    /// handles that hold it and commits at their last close, whole, as any save does.
    public func joinSave(of node: Node, by owner: ClaimOwner) -> Save? {
        guard hasSaves else { return nil }
        return state.withLock { state in
            guard let activity = state.files[node.id], let save = activity.save else { return nil }
            if save.owner == owner || save.writesInPlace {
                save.addWriter()
                return save
            }
            activity.save = nil
            saveCount.subtract(1, ordering: .relaxed)
            if activity.saveIsMapped {
                activity.saveIsMapped = false
                mappedSaveCount.subtract(1, ordering: .relaxed)
            }
            return nil
        }
    }

    /// Installs `candidate` as the node's save with one writer, or joins the one in force.
    public func installSave(_ candidate: Save, pendingName: PendingName? = nil) -> Save {
        state.withLock { state in
            let activity = state.files[candidate.node.id] ?? FileActivity()
            state.files[candidate.node.id] = activity
            if let existing = activity.save {
                existing.addWriter()
                return existing
            }
            candidate.addWriter()
            activity.save = candidate
            saveCount.add(1, ordering: .relaxed)
            if let pendingName {
                state.pendingNames[pendingName] = candidate
                pendingNameCount.add(1, ordering: .relaxed)
            }
            return candidate
        }
    }

    /// Whether readers (other than `owner`) read the committed version through the page cache.
    public func hasCachedReaders(_ node: Node, besides owner: ClaimOwner? = nil) -> Bool {
        state.withLock { state in
            guard let activity = state.files[node.id] else { return false }
            return activity.cachedReaders > (owner.flatMap { activity.cachedReaderOwners[$0] } ?? 0)
        }
    }

    /// Ends a save that has no writers: it no longer stands for the node, and its pending
    /// name (if any) goes. A save a writer joined meanwhile stays.
    public func endSave(_ save: Save) {
        state.withLock { state in
            guard let activity = state.files[save.node.id], activity.save === save, save.hasNoWriters else { return }
            activity.save = nil
            saveCount.subtract(1, ordering: .relaxed)
            if activity.saveIsMapped {
                activity.saveIsMapped = false
                mappedSaveCount.subtract(1, ordering: .relaxed)
            }
            Self.dropPendingNames(of: save, in: &state, count: pendingNameCount)
            if activity.isIdle { state.files[save.node.id] = nil }
        }
    }

    /// The save whose not-yet-committed file is named `name` in `directory`, if any.
    public func pendingSave(_ name: PendingName) -> Save? {
        guard hasPendingNames else { return nil }
        return state.withLock { $0.pendingNames[name] }
    }

    /// Whether a file created through the mount and not committed yet is to appear in `directory`.
    public func hasPendingNames(in directory: UInt64) -> Bool {
        guard hasPendingNames else { return false }
        return state.withLock { $0.pendingNames.keys.contains { $0.directory == directory } }
    }

    /// The files created in `directory` that are not committed yet, by name.
    public func pendingSaves(in directory: UInt64) -> [(name: FileName, save: Save)] {
        guard hasPendingNames else { return [] }
        return state.withLock { state in
            state.pendingNames.compactMap { key, save in key.directory == directory ? (key.name, save) : nil }
        }
    }

    /// The file now exists under its name (first commit), or was unlinked: no longer pending.
    public func clearPendingName(of save: Save) {
        state.withLock { state in Self.dropPendingNames(of: save, in: &state, count: pendingNameCount) }
    }

    /// The owner renamed a pending file: it is pending under the new name.
    public func movePendingName(of save: Save, to name: PendingName) {
        state.withLock { state in
            Self.dropPendingNames(of: save, in: &state, count: pendingNameCount)
            state.pendingNames[name] = save
            pendingNameCount.add(1, ordering: .relaxed)
        }
    }

    private static func dropPendingNames(of save: Save, in state: inout State, count: borrowing Atomic<Int>) {
        for (name, pending) in state.pendingNames where pending === save {
            state.pendingNames[name] = nil
            count.subtract(1, ordering: .relaxed)
        }
    }

    // MARK: Mapped saves

    /// A handle of `save` filled the kernel's page cache: its owner mapped the file, and the
    /// cache follows the save from now on. True the first time for the save in force.
    public func noteMapped(_ save: Save) -> Bool {
        guard hasSaves else { return false }
        return state.withLock { state in
            guard let activity = state.files[save.node.id], activity.save === save, !activity.saveIsMapped else { return false }
            activity.saveIsMapped = true
            mappedSaveCount.add(1, ordering: .relaxed)
            return true
        }
    }

    /// The node's pending save, when its owner mapped the file.
    public func mappedSave(of node: Node) -> Save? {
        guard mappedSaveCount.load(ordering: .relaxed) > 0 else { return nil }
        return state.withLock { state in
            guard let activity = state.files[node.id], activity.saveIsMapped else { return nil }
            return activity.save
        }
    }

    // MARK: Page-cache readers

    /// Registers a reader of the committed version, which it reads through `version` (the file
    /// `identity` names, opened before this call); true when it may use the page cache.
    public func openReader(of node: Node, owner: ClaimOwner, version: SharedDescriptor, identity: FileIdentity) -> Bool {
        state.withLock { state in
            let activity = state.files[node.id] ?? FileActivity()
            state.files[node.id] = activity
            // During a save, or while older readers hold the cache, read around the cache.
            if activity.cacheIsStale || activity.save != nil { return false }
            // Nor when the node stands for another file by now: a commit (this host's, or
            // another host's that the node followed) came between the reader's open of its
            // version and this registration, and its whole round (stale, dropped, good again)
            // may be over already, so nothing above says so. Counted as a cached reader, this
            // one would fill the cache with the replaced version while readers of the new one
            // fill it too, and a read of either would mix pages of both. (Checked here, under
            // the lock: a commit swaps the node's backing before it looks for cached readers,
            // and a follower marks the cache stale before it swaps, so a reader registered
            // before the swap is always seen, and one registered after it sees the swap.)
            if node.identity != identity {
                if activity.isIdle { state.files[node.id] = nil }
                return false
            }
            Self.countCachedReader(activity, owner: owner, version: version, identity: identity)
            return true
        }
    }

    /// A reader around the page cache filled it (it mapped the file): when it reads the version
    /// the cache stands for, it counts as a cached reader from now on (`joined` is set, once),
    /// and true is the answer. `identity` is its version's.
    public func joinCachedReaders(_ node: Node, owner: ClaimOwner, version: SharedDescriptor, identity: FileIdentity,
                           joined: borrowing Atomic<Bool>) -> Bool {
        state.withLock { state in
            if joined.load(ordering: .relaxed) { return true }
            let activity = state.files[node.id] ?? FileActivity()
            state.files[node.id] = activity
            // With no cached reader and no stale mark, the cache stands for the node's file as
            // the node stands now, read under this lock (as `openReader` checks it).
            let cacheVersion = activity.cachedReaders > 0 ? activity.cachedVersionIdentity : activity.cacheIsStale ? nil : node.identity
            guard !activity.saveIsMapped, cacheVersion == identity else {
                if activity.isIdle { state.files[node.id] = nil }
                return false
            }
            Self.countCachedReader(activity, owner: owner, version: version, identity: identity)
            joined.store(true, ordering: .relaxed)
            return true
        }
    }

    private static func countCachedReader(_ activity: FileActivity, owner: ClaimOwner, version: SharedDescriptor, identity: FileIdentity) {
        if activity.cachedReaders == 0 {
            activity.cachedVersion = version
            activity.cachedVersionIdentity = identity
        }
        activity.cachedReaders += 1
        activity.cachedReaderOwners[owner, default: 0] += 1
    }

    /// A cached reader closed; true when the page cache must now be dropped (it may hold an
    /// older version and the last reader of that version is gone). It stays marked stale
    /// until the kernel has dropped it (`cacheDropped`).
    public func closeReader(of node: Node, owner: ClaimOwner) -> Bool {
        state.withLock { state in
            guard let activity = state.files[node.id] else { return false }
            activity.cachedReaders -= 1
            if activity.cachedReaders == 0 {
                activity.cachedVersion = nil
                activity.cachedVersionIdentity = nil
            }
            if let count = activity.cachedReaderOwners[owner] {
                activity.cachedReaderOwners[owner] = count > 1 ? count - 1 : nil
            }
            let mustDrop = activity.cacheIsStale && activity.cachedReaders == 0
            if mustDrop { activity.dropsPending += 1 }
            if activity.isIdle { state.files[node.id] = nil }
            return mustDrop
        }
    }

    /// The version the node's cached readers read, while any is open.
    public func cachedVersion(of node: Node) -> SharedDescriptor? {
        state.withLock { $0.files[node.id]?.cachedVersion }
    }

    /// A commit replaced the node's version: until the kernel has dropped the cache and every
    /// reader of an older version has closed, new readers bypass the cache. The caller asks
    /// the kernel to drop the cache and calls `cacheDropped` once it has (every call of this
    /// is paired with one of that, as is every `closeReader` that answers true).
    public func noteCommit(of node: Node) {
        state.withLock { state in
            let activity = state.files[node.id] ?? FileActivity()
            state.files[node.id] = activity
            if !activity.cacheIsStale { staleCount.add(1, ordering: .relaxed) }
            activity.cacheIsStale = true
            activity.dropsPending += 1
        }
    }

    /// The kernel dropped the node's cache (one drop asked for by `noteCommit` or
    /// `closeReader`); with no older reader left and no later drop still to come, the cache is
    /// good again. A drop that the kernel made before a later commit, or before the last older
    /// reader closed (it may have read the older version into the cache again meanwhile),
    /// leaves it stale: that later drop clears it.
    public func cacheDropped(of node: Node) {
        state.withLock { state in
            guard let activity = state.files[node.id] else { return }
            if activity.dropsPending > 0 { activity.dropsPending -= 1 }
            guard activity.cachedReaders == 0, activity.dropsPending == 0 else { return }
            if activity.cacheIsStale { staleCount.subtract(1, ordering: .relaxed) }
            activity.cacheIsStale = false
            if activity.isIdle { state.files[node.id] = nil }
        }
    }
}
