import Dispatch
import Glibc
import Synchronization
import SystemPackage

/// Stages the temps of one mount's saves: unnamed wherever the backing's filesystem has
/// unnamed files, named where it has not, and made ahead where that spares a save the wait.
///
/// A filesystem that refuses unnamed files once is remembered by its device, so that its
/// later saves go straight to a named temp instead of paying a failed open each.
///
/// Made ahead: a new file costs the filesystem an inode, and ext4 without a journal skips
/// every inode freed in the last minutes, reading the inode table to tell which: 100 to 300 µs
/// here, the largest single cost of a small save, and one that grows with the saves (each frees
/// the inode of the version it replaces). So from the second save of an existing file in a
/// directory on, a background queue keeps unnamed files made in that directory ready for the
/// next saves there, and the save's thread does not wait for the allocation (a few per
/// directory, a bound in all, the directories saved in least recently giving theirs up first).
/// Unnamed, they leave nothing in the backing; unused ones go with the daemon. Files being
/// created get their temp on the spot: its mode and ACL come from the creator's umask and the
/// directory's default ACL as they are then.
///
/// Whether a staged copy is a clone (a reflink, `FICLONE`) is also a fact of the filesystem:
/// asked by the in-place policy only for files above its size threshold, probed once per
/// filesystem with two empty temps (see `clonesCopies`), and remembered by device.
///
/// Sendable: the refusing devices are behind a lock that a count lets every save skip while
/// no filesystem refused; the files made ahead behind another, held by a save of an existing
/// file for a few map operations; the probed filesystems behind a third. Files are made and
/// closed outside all three, on the maker's queue or by the prober.
public final class TempStaging: Sendable {
    /// False: every temp is named, as on a filesystem without unnamed files (`--named-temps`).
    public let triesUnnamed: Bool
    /// Unnamed files kept ready per directory, and in all.
    public let perDirectory: Int
    public let capacity: Int
    /// Devices of filesystems that refused an unnamed file.
    private let refusing = Mutex<Set<UInt64>>([])
    private let refusals = Atomic<Int>(0)
    private let ready: Mutex<ReadyFiles>
    private let readyCount = Atomic<Int>(0)
    /// Whether each probed filesystem (by device) clones: a leaf lock, held for one map operation.
    private let cloning = Mutex<[UInt64: Bool]>([:])
    private let maker = DispatchQueue(label: "coordfs.temp-maker", qos: .utility)

    /// Unnamed files made ahead, by directory (the kernel's node id: never reused, so a
    /// directory that went and another that took its inode never share them).
    private struct ReadyFiles {
        /// Raw descriptors this pool owns, each of an empty unnamed file made with `StagedFile.copyMode`.
        var byDirectory: [UInt64: [Int32]] = [:]
        /// Directories a maker is filling now.
        var filling: Set<UInt64> = []
        /// When each directory last saw a save of an existing file or got files, on `clock`:
        /// a directory seen once gets files made ahead at its next save.
        var lastUse: [UInt64: UInt64] = [:]
        var clock: UInt64 = 0

        /// Notes a save in `directory`; returns whether it had one before.
        mutating func noteSave(in directory: UInt64, remembering limit: Int) -> Bool {
            clock += 1
            let seen = lastUse.updateValue(clock, forKey: directory) != nil
            if lastUse.count > limit {
                // Forget the directories that hold nothing ready, the one saved in now aside.
                lastUse = lastUse.filter { $0.key == directory || byDirectory[$0.key] != nil || filling.contains($0.key) }
            }
            return seen
        }
    }

    public init(unnamed: Bool = true, perDirectory: Int = 2, capacity: Int = 64) {
        self.triesUnnamed = unnamed
        self.perDirectory = perDirectory
        self.capacity = capacity
        self.ready = Mutex(ReadyFiles())
    }

    /// `StagedFile.stage` in `directory`: unnamed unless its filesystem refused before, from a
    /// file made ahead when one is ready.
    public func stage(in directory: Node, replacing target: Int32?, copyContents: Bool,
                      owner: (uid_t, gid_t)?, mode: mode_t) throws(Errno) -> StagedFile {
        guard let target else {
            return try stageNamingRefusals(in: directory, replacing: nil, copyContents: copyContents, owner: owner, mode: mode)
        }
        let made = takeReady(in: directory.id)
        defer { makeAhead(in: directory) }
        if let made {
            return try StagedFile.stage(madeAhead: made, in: directory.directory, replacing: target, copyContents: copyContents)
        }
        return try stageNamingRefusals(in: directory, replacing: target, copyContents: copyContents, owner: owner, mode: mode)
    }

    /// Whether a save on the filesystem of `device` tries an unnamed temp.
    public func mayStageUnnamed(on device: UInt64) -> Bool {
        guard triesUnnamed else { return false }
        guard refusals.load(ordering: .relaxed) > 0 else { return true }
        return !refusing.withLock { $0.contains(device) }
    }

    /// Whether a staged copy of a file in `directory` is a clone: its filesystem shares extents
    /// (XFS with reflinks, btrfs, bcachefs; NFS and SMB where the server clones). Probed at the
    /// first question per filesystem by cloning an empty temp into another, which a filesystem
    /// without reflinks refuses at once and one with them does in no time; both temps go at
    /// once (unnamed where the filesystem allows, so nothing shows in the backing). A probe
    /// that cannot make its temps (no space, no permission) answers no and is not remembered.
    public func clonesCopies(in directory: Node) -> Bool {
        let device = directory.identity.device
        if let known = cloning.withLock({ $0[device] }) { return known }
        guard let clones = Self.probeCloning(in: directory.directory, unnamed: mayStageUnnamed(on: device)) else { return false }
        cloning.withLock { $0[device] = clones }
        return clones
    }

    /// Clones one empty temp into another in `directory`: whether the filesystem did (any
    /// error says no: `ContentCopy.cannotClone`'s, or one of a filesystem that fails clones
    /// of empty files, whose copies then go by `copy_file_range`), or nil when the temps could
    /// not be made.
    static func probeCloning(in directory: Int32, unnamed: Bool) -> Bool? {
        do throws(Errno) {
            let source = try StagedFile.create(in: directory, mode: StagedFile.copyMode, unnamed: unnamed, beside: true)
            defer { source.discard(in: directory) }
            let destination = try StagedFile.create(in: directory, mode: StagedFile.copyMode, unnamed: unnamed, beside: true)
            defer { destination.discard(in: directory) }
            return (try? Syscall.cloneContents(of: source.descriptor.raw, into: destination.descriptor.raw)) != nil
        } catch {
            return nil
        }
    }

    /// How many files made ahead are ready now (for tests).
    public var readyFiles: Int { readyCount.load(ordering: .relaxed) }

    /// Waits until the files asked for so far are made (for tests).
    public func waitForMaking() {
        maker.sync {}
    }

    private func stageNamingRefusals(in directory: Node, replacing target: Int32?, copyContents: Bool,
                                     owner: (uid_t, gid_t)?, mode: mode_t) throws(Errno) -> StagedFile {
        let device = directory.identity.device
        let unnamed = mayStageUnnamed(on: device)
        let staged = try StagedFile.stage(in: directory.directory, replacing: target, copyContents: copyContents, owner: owner, mode: mode,
                                          unnamed: unnamed)
        if unnamed && staged.name != nil {
            refusing.withLock { devices in
                if devices.insert(device).inserted { refusals.add(1, ordering: .relaxed) }
            }
        }
        return staged
    }

    private func takeReady(in directory: UInt64) -> OwnedDescriptor? {
        guard readyCount.load(ordering: .relaxed) > 0 else { return nil }
        let raw: Int32? = ready.withLock { ready in
            guard var files = ready.byDirectory[directory], let raw = files.popLast() else { return nil }
            ready.byDirectory[directory] = files.isEmpty ? nil : files
            readyCount.subtract(1, ordering: .relaxed)
            return raw
        }
        return raw.map { OwnedDescriptor(adopting: $0) }
    }

    /// After a save of an existing file in `directory`: from its second one on, tops the
    /// directory's ready files up to `perDirectory` on the maker's queue. The closure holds
    /// the node, and with it the directory's descriptor, until it has run.
    private func makeAhead(in directory: Node) {
        guard mayStageUnnamed(on: directory.identity.device) else { return }
        let id = directory.id
        let missing = ready.withLock { ready -> Int in
            guard ready.noteSave(in: id, remembering: 4 * capacity) else { return 0 }
            let missing = perDirectory - (ready.byDirectory[id]?.count ?? 0)
            guard missing > 0, ready.filling.insert(id).inserted else { return 0 }
            return missing
        }
        guard missing > 0 else { return }
        maker.async { [self] in
            var made: [Int32] = []
            for _ in 0..<missing {
                guard let file = try? Syscall.openUnnamed(in: directory.directory, mode: StagedFile.copyMode) else { break }
                made.append(file.release())
            }
            let evicted = ready.withLock { ready -> [Int32] in
                ready.filling.remove(id)
                if !made.isEmpty { ready.byDirectory[id, default: []] += made }
                readyCount.add(made.count, ordering: .relaxed)
                var evicted: [Int32] = []
                while readyCount.load(ordering: .relaxed) > capacity,
                      let oldest = ready.byDirectory.keys.filter({ $0 != id }).min(by: { ready.lastUse[$0] ?? 0 < ready.lastUse[$1] ?? 0 }) {
                    let files = ready.byDirectory.removeValue(forKey: oldest) ?? []
                    readyCount.subtract(files.count, ordering: .relaxed)
                    evicted += files
                }
                return evicted
            }
            for raw in evicted { Glibc.close(raw) } // frees their inodes: outside the lock
        }
    }
}
