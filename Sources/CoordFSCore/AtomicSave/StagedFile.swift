import Glibc
import SystemPackage

/// How much a commit waits for the disk before and after its rename.
///
/// Without an fsync before the rename, ext4 (data=ordered with delayed allocation) and xfs may
/// persist the rename before the temp's data blocks, and a power loss then leaves the target
/// empty or torn. A process crash (the daemon's included) never does: the page cache
/// survives it, and the rename is atomic.
///
/// Default: `.replacing`. It pays the fsync where a power loss would destroy data that was
/// already safe (a commit over an existing file), and not for a file created through the
/// mount, which on a plain disk would be just as unsynced: `tar x`, `cp -r` and checkouts
/// then cost what they cost on the bare disk, while every save of an existing file keeps the
/// atomic-save promise across power loss. `.file` syncs every commit; `.full` also syncs the
/// directory after the rename, so a commit reported done survives a power loss too; `.none`
/// renames only.
public enum Durability: String, CaseIterable, Sendable {
    /// Rename only.
    case none
    /// fsync the temp before it replaces an existing file; new files are renamed into place.
    case replacing
    /// fsync the temp, then rename.
    case file
    /// fsync the temp, rename, fsync the directory.
    case full

    public static let recommended: Durability = .replacing

    /// What this level does for one commit: `.replacing` becomes `.file` over an existing
    /// file and `.none` for a new one.
    public func forCommit(replacingExistingFile: Bool) -> Durability {
        self == .replacing ? (replacingExistingFile ? .file : .none) : self
    }

    /// What this level needs on a given backing filesystem. `.replacing` asks that a power
    /// loss never leave a replaced file torn. ext4 with a journal, in its default
    /// `data=ordered` mode (or `data=journal`) with `auto_da_alloc` (the default), already
    /// promises that for a rename over an existing file: it writes the new file's data before
    /// it commits the rename (its documentation's "replace-via-rename" pattern). There the
    /// fsync would only cost time, so `.replacing` needs nothing more than the rename.
    /// Without a journal (`journaled` false) ext4 orders nothing, and the fsync stays.
    /// Elsewhere, and at every other level, the level is what it says.
    public func needed(on filesystem: MountTable.Entry?, journaled: Bool = true) -> Durability {
        guard self == .replacing, let filesystem, filesystem.filesystemType == "ext4", journaled,
              !filesystem.hasOption("data=writeback"), !filesystem.hasOption("noauto_da_alloc") else { return self }
        return .none
    }

    public var syncsFile: Bool { self != .none }
    public var syncsDirectory: Bool { self == .full }
}

/// A hidden temp file beside the file it will replace: where the writes of an atomic save go
/// until the commit renames it over its target.
///
/// Noncopyable: it owns the temp's descriptor, and exactly one owner decides whether the temp
/// is committed or discarded. (A handle shared by several opens of the same path is the FUSE
/// layer's to build around it; this type needs no sharing of its own.) Sendable: its fields
/// are immutable, and the descriptor is only a number the kernel serialises calls on.
///
/// The temp lives in the same backing directory as its target, so the commit is one `rename`
/// within one filesystem. Where that directory is, is told on each call (the target may have
/// been renamed meanwhile); the temp is named by `name` inside it.
public struct StagedFile: ~Copyable, Sendable {
    /// The temp's name inside its directory (a `StagingName`).
    public let name: FileName
    /// A read-write descriptor of the temp. Reopen it through `/proc/self/fd` for other flags.
    public let descriptor: OwnedDescriptor

    init(name: FileName, descriptor: consuming OwnedDescriptor) {
        self.name = name
        self.descriptor = descriptor
    }

    /// Creates a temp in `directory` for a save.
    ///
    /// - Parameters:
    ///   - target: a readable descriptor of the committed file being replaced, or nil when the
    ///     save creates a new file. With a target, the temp gets its mode (set-id bits
    ///     included), owner (when the daemon is root; otherwise its group where allowed) and
    ///     extended attributes (ACLs and `security.*` included), and `owner` and `mode` are
    ///     ignored.
    ///   - copyContents: start as a copy of the target (an open without `O_TRUNC`), by reflink
    ///     where the filesystem can, else `copy_file_range`, else reads and writes. False
    ///     starts empty (an open with `O_TRUNC`); metadata is carried over all the same.
    ///   - owner: a new file's owner, applied when the daemon runs as root.
    ///   - mode: a new file's mode, set-id bits included. Its permission bits are masked as
    ///     creat(2) masks them: by the calling thread's umask (see `Syscall.withCreationMask`),
    ///     or by the directory's default ACL instead.
    /// - Throws: the errno that stopped it (ENOSPC, EDQUOT, EIO...); no temp is left behind.
    public static func stage(in directory: Int32, replacing target: Int32?, copyContents: Bool,
                             owner: (uid_t, gid_t)?, mode: mode_t) throws(Errno) -> StagedFile {
        // A copy starts private (0600) until it has the target's owner and mode; a new file is
        // created with its permission bits so that a default ACL applies to them.
        let initialMode = target == nil ? mode & 0o777 : 0o600
        let staged = try create(in: directory, mode: initialMode, names: StagingName.make)
        do throws(Errno) {
            if let target {
                let status = try Syscall.stat(target)
                if copyContents { try ContentCopy.copy(from: target, to: staged.descriptor.raw) }
                try MetadataCopy.carryOver(from: target, status: status, to: staged.descriptor.raw)
            } else {
                try MetadataCopy.apply(owner: owner, mode: mode, to: staged.descriptor.raw)
            }
        } catch {
            staged.discard(in: directory)
            throw error
        }
        return staged
    }

    /// Makes a spare (an emptied file a replacing commit left, see `SpareFile`) the temp for a
    /// save: the same contents and metadata `stage` would give a fresh temp, and no change to
    /// the directory. Its modification time becomes now, as a fresh temp's is.
    ///
    /// - Parameter reopen: opens the object behind a descriptor afresh with other flags (see
    ///   `truncate(_:to:reopen:)`).
    /// - Throws: the errno that stopped it; the spare is removed then (it is half made over).
    public static func reuse(_ spare: SpareFile, replacing target: Int32, copyContents: Bool,
                             reopen: (Int32, Int32) throws(Errno) -> OwnedDescriptor) throws(Errno) -> StagedFile {
        let staged = StagedFile(name: spare.name, descriptor: try Syscall.duplicate(spare.descriptor.raw))
        do throws(Errno) {
            // Spares are emptied when they are kept; truncating again would only arm ext4's flush.
            let spareStatus = try Syscall.stat(staged.descriptor.raw)
            if spareStatus.st_size == 0 {
                try Syscall.setTimes(staged.descriptor.raw, (timespec(tv_sec: 0, tv_nsec: Linux.UTIME_OMIT), timespec(tv_sec: 0, tv_nsec: Linux.UTIME_NOW)))
            } else {
                try truncate(staged.descriptor.raw, to: 0, reopen: reopen)
            }
            let status = try Syscall.stat(target)
            if copyContents { try ContentCopy.copy(from: target, to: staged.descriptor.raw) }
            try MetadataCopy.carryOver(from: target, status: status, to: staged.descriptor.raw, tempStatus: spareStatus,
                                       replacingAttributes: true)
        } catch {
            spare.remove()
            throw error
        }
        return staged
    }

    /// Truncates a temp or a spare (not a user's file: this departs from the bare disk).
    ///
    /// ext4 (with `auto_da_alloc`, its default) takes a file truncated to zero for one being
    /// rewritten in place, and starts writing it back when an open of it next ends. For a temp
    /// that buys nothing: the commit syncs, or starts writeback, before its rename as the
    /// durability says, and that flush would come after it. It costs a block allocation and a
    /// write per save, and a discard when the replaced file is emptied to become a spare, where
    /// a version replaced before the flusher comes by would cost neither. Ending a second open
    /// of the file at once, while it holds no data, spends the flush on nothing.
    ///
    /// - Parameter reopen: opens the object behind a descriptor afresh with other flags.
    public static func truncate(_ descriptor: Int32, to length: off_t,
                                reopen: (Int32, Int32) throws(Errno) -> OwnedDescriptor) throws(Errno) {
        try Syscall.truncate(descriptor, length)
        if length == 0 { _ = try? reopen(descriptor, O_RDONLY) }
    }

    /// Creates an empty temp under a fresh name, drawing again when the name is taken.
    static func create(in directory: Int32, mode: mode_t, names: () -> FileName) throws(Errno) -> StagedFile {
        for _ in 0..<8 {
            let name = names()
            do throws(Errno) {
                let descriptor = try Syscall.openAt(directory, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, mode)
                return StagedFile(name: name, descriptor: descriptor)
            } catch where error.rawValue == EEXIST {
                continue
            }
        }
        // Eight taken names in a row do not happen by chance: something else is wrong.
        throw Errno(rawValue: EEXIST)
    }

    /// Replaces `targetName` in `directory` (where the temp is) with the temp, in one rename.
    ///
    /// - Throws: only when nothing changed in the backing (the fsync or the rename failed);
    ///   the temp is still there then, to discard or to commit again.
    /// - Returns: nil, or the error of the directory sync (`.full`) when it failed after the
    ///   rename took effect: the new contents are in place but may not survive a power loss.
    @discardableResult
    public func commit(in directory: Int32, as targetName: FileName, durability: Durability) throws(Errno) -> Errno? {
        try commit(from: directory, to: directory, as: targetName, durability: durability)
    }

    /// The same when the target now lives in another directory of the same filesystem than
    /// the temp (its owner moved it); `.full` syncs both directories.
    @discardableResult
    public func commit(from stagingDirectory: Int32, to directory: Int32, as targetName: FileName,
                       durability: Durability) throws(Errno) -> Errno? {
        if durability.syncsFile {
            try Syscall.synchronize(descriptor.raw, dataOnly: false)
        }
        try Syscall.rename(stagingDirectory, name, to: directory, targetName, flags: 0)
        guard durability.syncsDirectory else { return nil }
        do throws(Errno) {
            try Self.synchronizeDirectory(directory)
            if stagingDirectory != directory { try Self.synchronizeDirectory(stagingDirectory) }
        } catch {
            return error
        }
        return nil
    }

    /// Commits by swapping the temp with `targetName` in one `renameat2(RENAME_EXCHANGE)`:
    /// the target gets the new contents as atomically as with `commit`, and the file it had
    /// stays under the temp's name, for the caller to keep as a spare or remove.
    ///
    /// `startingWriteback` stands in for ext4's `auto_da_alloc`, which writes a file's data
    /// before a rename that replaces another file commits, but not before an exchange: the
    /// same early writeback keeps a power loss from leaving the target empty. `durability`
    /// syncs as for `commit`.
    ///
    /// - Returns: false when nothing changed because the filesystem cannot exchange (EINVAL)
    ///   or the target is gone (ENOENT): `commit` is the way then.
    /// - Throws: when nothing changed (the sync or the exchange failed otherwise).
    public func exchange(in directory: Int32, with targetName: FileName, durability: Durability, startingWriteback: Bool) throws(Errno) -> Bool {
        if durability.syncsFile {
            try Syscall.synchronize(descriptor.raw, dataOnly: false)
        } else if startingWriteback {
            try Syscall.startWriteback(descriptor.raw)
        }
        do throws(Errno) {
            try Syscall.rename(directory, name, to: directory, targetName, flags: Linux.RENAME_EXCHANGE)
        } catch where error.rawValue == EINVAL || error.rawValue == ENOENT {
            return false
        }
        if durability.syncsDirectory { try? Self.synchronizeDirectory(directory) }
        return true
    }

    /// Moves the temp, under the same name, from `directory` to `newDirectory` (same
    /// filesystem): when the owner renames its pending file into another directory, the temp
    /// follows it, and the directory it leaves can be removed.
    public func move(from directory: Int32, to newDirectory: Int32) throws(Errno) {
        do throws(Errno) {
            try Syscall.rename(directory, name, to: newDirectory, name, flags: Linux.RENAME_NOREPLACE)
        } catch where error.rawValue == EINVAL {
            // A filesystem without RENAME_NOREPLACE (older NFS, some FUSE backings): a temp
            // name is never there already unless a 64-bit name collided, so a plain rename.
            try Syscall.rename(directory, name, to: newDirectory, name, flags: 0)
        }
    }

    /// Removes the temp from `directory`; a temp already gone is fine. The target is untouched.
    /// - Returns: nil, or the error unlink failed with (the next mount's recovery finds the temp).
    @discardableResult
    public func discard(in directory: Int32) -> Errno? {
        do throws(Errno) {
            try Syscall.unlink(at: directory, name, flags: 0)
        } catch where error.rawValue == ENOENT {
            return nil
        } catch {
            return error
        }
        return nil
    }

    /// fsync on a directory; descriptors opened `O_PATH` (how the node table holds directories)
    /// cannot be synced, so those are reopened for reading first.
    static func synchronizeDirectory(_ directory: Int32) throws(Errno) {
        do throws(Errno) {
            try Syscall.synchronize(directory, dataOnly: false)
        } catch where error.rawValue == EBADF {
            let readable = try Syscall.openAt(directory, ".", O_RDONLY | O_DIRECTORY)
            try Syscall.synchronize(readable.raw, dataOnly: false)
        }
    }
}
