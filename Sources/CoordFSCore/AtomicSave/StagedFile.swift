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

/// The temp file of an atomic save: where its writes go until the commit puts it in place of
/// its target.
///
/// Unnamed where the backing allows it (O_TMPFILE: ext4, XFS, btrfs, tmpfs): no directory
/// lists it, a crash or a discard leaves nothing behind, and it gets a name only to commit,
/// for the microseconds between a link and a rename. Elsewhere it is a hidden file beside
/// its target (a `StagingName`), which the mount hides and the next mount's recovery moves
/// aside after a crash.
///
/// Noncopyable: it owns the temp's descriptor, and exactly one owner decides whether the temp
/// is committed or discarded. (A handle shared by several opens of the same path is the FUSE
/// layer's to build around it; this type needs no sharing of its own.) Sendable: its fields
/// are immutable, and the descriptor is only a number the kernel serialises calls on.
///
/// The temp lives on the same filesystem as its target, so the commit is one `rename` (an
/// unnamed temp is linked under a staging name first) or, for a new unnamed file, one `link`.
/// Where the target's directory is, is told on each call (the
/// target may have been renamed meanwhile); a named temp is named by `name` inside the
/// directory it was staged in, and follows its target there (`move`).
public struct StagedFile: ~Copyable, Sendable {
    /// The temp's name inside its directory (a `StagingName`), or nil for an unnamed temp.
    public let name: FileName?
    /// A read-write descriptor of the temp. Reopen it through `/proc/self/fd` for other flags.
    public let descriptor: OwnedDescriptor
    /// The file this temp replaces as the staging found it, nil for a new file: what the
    /// commit compares with to tell a change made behind the mount (see `SaveBaseline`).
    public internal(set) var baseline: SaveBaseline?

    init(name: FileName?, descriptor: consuming OwnedDescriptor) {
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
    ///   - unnamed: stage in an unnamed file where the filesystem has them; false, or a
    ///     filesystem without them, gives a named temp (`name` tells which it got).
    /// - Throws: the errno that stopped it (ENOSPC, EDQUOT, EIO...); no temp is left behind.
    public static func stage(in directory: Int32, replacing target: Int32?, copyContents: Bool,
                             owner: (uid_t, gid_t)?, mode: mode_t, unnamed: Bool = true) throws(Errno) -> StagedFile {
        // A new file is created with its permission bits so that a default ACL applies to them.
        let initialMode = target == nil ? mode & 0o777 : copyMode
        let staged = try create(in: directory, mode: initialMode, unnamed: unnamed, beside: target != nil)
        return try prepare(staged, in: directory, replacing: target, copyContents: copyContents, owner: owner, mode: mode)
    }

    /// The mode a temp for a file that exists starts with: private until it has the target's
    /// owner and mode.
    static let copyMode: mode_t = 0o600

    /// The temp for a save of `target` from an unnamed file made earlier in the same directory
    /// with `copyMode` (see `TempStaging`): the same temp `stage` would give, dated now as a
    /// file created now is.
    public static func stage(madeAhead descriptor: consuming OwnedDescriptor, in directory: Int32, replacing target: Int32,
                             copyContents: Bool) throws(Errno) -> StagedFile {
        let staged = StagedFile(name: nil, descriptor: descriptor)
        let now = timespec(tv_sec: 0, tv_nsec: Linux.UTIME_NOW)
        try Syscall.setTimes(staged.descriptor.raw, (now, now))
        return try prepare(staged, in: directory, replacing: target, copyContents: copyContents, owner: nil, mode: 0)
    }

    /// Gives an empty temp the contents and metadata `stage` describes; discards it on failure.
    private static func prepare(_ staged: consuming StagedFile, in directory: Int32, replacing target: Int32?, copyContents: Bool,
                                owner: (uid_t, gid_t)?, mode: mode_t) throws(Errno) -> StagedFile {
        var staged = staged
        do throws(Errno) {
            if let target {
                // Before the copy: a change behind the mount during the copy then shows at the commit.
                let status = try Syscall.stat(target)
                staged.baseline = SaveBaseline(status)
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

    /// Truncates a temp (not a user's file: this departs from the bare disk).
    ///
    /// ext4 (with `auto_da_alloc`, its default) takes a file truncated to zero for one being
    /// rewritten in place, and starts writing it back when an open of it next ends. For a temp
    /// that buys nothing: the commit syncs before its rename as the durability says (and
    /// ext4 with a journal writes the data before a rename over a file commits), and that
    /// flush would come after it. It costs a block allocation and a write per save, where a
    /// version replaced before the flusher comes by would cost neither. Ending a second open
    /// of the file at once, while it holds no data, spends the flush on nothing.
    ///
    public static func truncate(_ descriptor: Int32, to length: off_t) throws(Errno) {
        try Syscall.truncate(descriptor, length)
        if length == 0 { _ = try? Syscall.reopen(descriptor, O_RDONLY) }
    }

    /// Creates an empty temp: unnamed when asked and the filesystem allows, else under a fresh
    /// name. `beside`: the temp is for a file that exists, whose directory a save leaves
    /// alone on a plain disk, so a named temp puts the directory's time back.
    static func create(in directory: Int32, mode: mode_t, unnamed: Bool, beside: Bool) throws(Errno) -> StagedFile {
        if unnamed {
            do throws(Errno) {
                return StagedFile(name: nil, descriptor: try Syscall.openUnnamed(in: directory, mode: mode))
            } catch where refusesUnnamedFiles(error) {
                // This filesystem has none: a named temp below.
            }
        }
        guard beside else { return try createNamed(in: directory, mode: mode, names: StagingName.make) }
        return try DirectoryTimes.keeping(of: directory) { () throws(Errno) -> StagedFile in
            try createNamed(in: directory, mode: mode, names: StagingName.make)
        }
    }

    /// The errors with which an open of an unnamed file says the filesystem (or the kernel)
    /// has none, rather than that this open failed: EOPNOTSUPP from the filesystem, EISDIR or
    /// EINVAL from kernels that do not know the flag.
    public static func refusesUnnamedFiles(_ error: Errno) -> Bool {
        switch error.rawValue {
        case EOPNOTSUPP, EISDIR, EINVAL: return true
        default: return false
        }
    }

    /// Creates an empty named temp under a fresh name, drawing again when the name is taken.
    static func createNamed(in directory: Int32, mode: mode_t, names: () -> FileName) throws(Errno) -> StagedFile {
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

    /// Puts the temp in place as `targetName` in `directory` (where it was staged).
    ///
    /// - Throws: only when nothing changed in the backing (the fsync, the link or the rename
    ///   failed); the temp is still there then, to discard or to commit again.
    /// - Returns: nil, or the error of the directory sync (`.full`) when it failed after the
    ///   commit took effect: the new contents are in place but may not survive a power loss.
    @discardableResult
    public func commit(in directory: Int32, as targetName: FileName, replacingExistingFile: Bool,
                       durability: Durability) throws(Errno) -> Errno? {
        try commit(from: directory, to: directory, as: targetName, replacingExistingFile: replacingExistingFile, durability: durability)
    }

    /// The same when the target now lives in another directory of the same filesystem than
    /// the one the temp was staged in (its owner moved it); `.full` syncs both directories.
    ///
    /// `replacingExistingFile`: the save is of a file that exists. The temp then replaces it in
    /// one rename (an unnamed temp is linked under a staging name first, for the microseconds
    /// until that rename), and the directory keeps its modification time, as a save leaves it
    /// on a plain disk. Otherwise the temp is a new file: an unnamed one is linked straight to
    /// its name, and should the name have appeared meanwhile, replaces it as a rename would.
    @discardableResult
    public func commit(from stagingDirectory: Int32, to directory: Int32, as targetName: FileName,
                       replacingExistingFile: Bool, durability: Durability) throws(Errno) -> Errno? {
        if durability.syncsFile {
            try Syscall.synchronize(descriptor.raw, dataOnly: false)
        }
        if replacingExistingFile {
            try DirectoryTimes.keeping(of: directory) { () throws(Errno) in
                try putInPlace(from: stagingDirectory, to: directory, as: targetName, replacing: true)
            }
        } else {
            try putInPlace(from: stagingDirectory, to: directory, as: targetName, replacing: false)
        }
        guard durability.syncsDirectory else { return nil }
        do throws(Errno) {
            try Self.synchronizeDirectory(directory)
            if name != nil && stagingDirectory != directory { try Self.synchronizeDirectory(stagingDirectory) }
        } catch {
            return error
        }
        return nil
    }

    /// The namespace part of a commit: a rename of a named temp; a link of an unnamed one,
    /// straight to a new name, or under a staging name and renamed over the target.
    private func putInPlace(from stagingDirectory: Int32, to directory: Int32, as targetName: FileName, replacing: Bool) throws(Errno) {
        if let name {
            try Syscall.rename(stagingDirectory, name, to: directory, targetName, flags: 0)
            return
        }
        if !replacing {
            do throws(Errno) {
                try Syscall.link(descriptor: descriptor.raw, to: directory, targetName)
                return
            } catch where error.rawValue == EEXIST {
                // The name appeared meanwhile: replace it, as a rename would.
            }
        }
        let linked = try linkUnderStagingName(in: directory, names: StagingName.make)
        do throws(Errno) {
            try Syscall.rename(directory, linked, to: directory, targetName, flags: 0)
        } catch {
            _ = try? Syscall.unlink(at: directory, linked, flags: 0)
            throw error
        }
    }

    /// Links the unnamed temp into `directory` under a fresh staging name, drawing again when
    /// the name is taken; returns the name.
    func linkUnderStagingName(in directory: Int32, names: () -> FileName) throws(Errno) -> FileName {
        for _ in 0..<8 {
            let name = names()
            do throws(Errno) {
                try Syscall.link(descriptor: descriptor.raw, to: directory, name)
                return name
            } catch where error.rawValue == EEXIST {
                continue
            }
        }
        throw Errno(rawValue: EEXIST)
    }

    /// Writes the temp's contents into `file` (empty, opened for writing): a commit in place,
    /// for a file whose name is gone but which other links still show.
    public func copyContents(into file: Int32) throws(Errno) {
        try ContentCopy.copy(from: descriptor.raw, to: file)
    }

    /// Moves a named temp, under the same name, from `directory` to `newDirectory` (same
    /// filesystem): when the owner renames its pending file into another directory, the temp
    /// follows it, and the directory it leaves can be removed. An unnamed temp is in no
    /// directory and needs no move.
    public func move(from directory: Int32, to newDirectory: Int32) throws(Errno) {
        guard let name else { return }
        do throws(Errno) {
            try Syscall.rename(directory, name, to: newDirectory, name, flags: Linux.RENAME_NOREPLACE)
        } catch where error.rawValue == EINVAL {
            // A filesystem without RENAME_NOREPLACE (older NFS, some FUSE backings): a temp
            // name is never there already unless a 64-bit name collided, so a plain rename.
            try Syscall.rename(directory, name, to: newDirectory, name, flags: 0)
        }
    }

    /// Throws the temp away; the target is untouched. A named temp is removed from
    /// `directory` (a temp already gone is fine), keeping the directory's time; an unnamed
    /// one has nothing to remove and goes with its last descriptor.
    /// - Returns: nil, or the error unlink failed with (the next mount's recovery finds the temp).
    @discardableResult
    public func discard(in directory: Int32) -> Errno? {
        guard let name else { return nil }
        return DirectoryTimes.keeping(of: directory) { () -> Errno? in
            do throws(Errno) {
                try Syscall.unlink(at: directory, name, flags: 0)
            } catch where error.rawValue == ENOENT {
                return nil
            } catch {
                return error
            }
            return nil
        }
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
