import CoordFSCore

import Glibc
import SystemPackage
import Logging
import Dispatch
import Synchronization

/// The version store: a hidden folder at the backing's root (`.coordfs-versions`, never shown
/// through the mount nor reported by its watch) that holds every version kept as a hard link
/// in `objects/`, named by its id, and the index that says whose version each is
/// (`index.sqlite`, or the cluster's database for the hosts of a cluster, which share the
/// folder). Keeping a version costs a link (or, for a delete, the rename that
/// replaces the unlink) and one record: never a copy.
///
/// A version's record is written before its link, so a crash in between leaves a record
/// without a version, which `reconcile` drops at the next start: the file it was for was not
/// replaced yet. The reverse (a link without a record, after a power cut took the last
/// records) is recorded again as a version of the mount's root.
///
/// Sendable: the descriptors are constants, the index guards itself, `live` is under its lock.
/// With a shared index (a cluster's), other hosts change the index too: `live` is not
/// trusted to skip renames, and a recent record without its version is not dropped.
public final class VersionStore: VersionKeeping, VersionCatalog {
    /// The store's folder in the backing root, reserved there (`StagingName.isReserved`).
    public static let folderName = StagingName.versionsFolder

    private let folder: OwnedDescriptor
    private let objects: OwnedDescriptor
    private let index: any VersionIndexing
    private let logger: Logger
    /// The paths of live files with versions, and how many of them lie beneath each directory:
    /// a rename through the mount touches the index only when it moves one of them. Kept only
    /// beside an index of this mount's own (`followLive`): a shared one changes under it.
    private let live = Mutex(LivePaths())
    /// Whether a version could not be linked because the file is on another filesystem than
    /// the store: said once in the log.
    private let warnedOtherFilesystem = Atomic<Bool>(false)
    private let retention: VersionRetention
    /// Nanoseconds since the epoch: when a version is kept, and what retention measures ages
    /// against. Tests pass their own, to live a day in a second.
    private let clock: @Sendable () -> Int64
    /// The backing's free space, read at most once a second (`isShortOfSpace`), and whether
    /// it was below the floor then.
    private let space = Mutex((readAt: ContinuousClock.Instant?.none, short: false))
    /// When each file's versions were last thinned (by `clock`): at most once per step.
    private let thinnedAt = Mutex([Int64: Int64]())
    /// Devices where a clone failed for want of reflinks (ext4, tmpfs): in-place files there
    /// keep no versions, and are not tried again.
    private let cannotClone = Mutex(Set<UInt64>())
    /// Who hears of versions kept, removed and resolved (`observe`).
    /// Boxed: a closure read out of a Mutex by `withLock { $0 }` comes back re-wrapped, and is
    /// stored so; a chain one thunk deeper per notice made every notice slower than the one
    /// before (3 ms per save after 40,000) and would at last have overflowed a thread's stack.
    private let observer = Mutex<VersionObserver?>(nil)
    /// Thinning and sweeping, off the saves' path, one at a time.
    private let upkeep = DispatchQueue(label: "coordfs versions upkeep")

    /// Opens (making it if need be) the store in the backing directory `backing`, and
    /// reconciles it with its index: `sharedIndex`, or else its own in SQLite.
    /// `retention`: how long versions are kept and how much room they may take; `clock`:
    /// nanoseconds since the epoch (tests inject theirs); `sweepEvery`: how often every file's
    /// versions are thinned and the store's share of the disk enforced (nil: only on request).
    public init(backing: String, sharedIndex: (any VersionIndexing)? = nil, retention: VersionRetention = VersionRetention(), clock: @escaping @Sendable () -> Int64 = VersionStore.now,
                sweepEvery: Duration? = .seconds(600), logger: Logger) throws {
        let root = try Syscall.openAt(AT_FDCWD, backing, Linux.O_PATH | O_DIRECTORY)
        folder = try Self.openFolder(Self.folderName, in: root.raw)
        objects = try Self.openFolder(FileName("objects".utf8)!, in: folder.raw)
        index = try sharedIndex ?? VersionIndex(path: (backing.hasSuffix("/") ? backing : backing + "/") + Self.folderName.description + "/index.sqlite")
        self.logger = logger
        self.retention = retention
        self.clock = clock
        try reconcile()
        if !index.isShared {
            let paths = try index.livePaths()
            live.withLock { $0 = LivePaths(paths) }
        }
        if let sweepEvery { scheduleSweep(after: .seconds(60), every: sweepEvery) }
    }

    // MARK: Keeping

    /// `unlessLinkedElsewhere`: a file that has another name lives on under it, so nothing is
    /// lost (a rename over one of its names); a link of the store's would show in its link count.
    public func keepReplaced(_ name: FileName, in directory: Int32, path: MountPath, kind: VersionKind, origin: VersionOrigin,
                             unlessLinkedElsewhere: Bool = false) -> KeptVersion? {
        guard mayKeep(path), let status = try? Syscall.stat(at: directory, name), status.st_mode & S_IFMT == S_IFREG,
              !(unlessLinkedElsewhere && status.st_nlink > 1) else { return nil }
        guard let recorded = record(path: path, status: status, kind: kind, origin: origin) else { return nil }
        let id = recorded.id
        let store = objects.raw
        do throws(Errno) {
            try name.withCString { (source) throws(Errno) in try Syscall.link(directory, source, to: store, Self.objectName(id), flags: 0) }
        } catch {
            notKept(path, error)
            try? index.forget(id, undeleting: false)
            return nil
        }
        followLive { $0.insert(path) }
        tell(.versionAdded, path, id, Int64(status.st_size), origin)
        thinSoon(recorded, fileExists: true)
        return KeptVersion(id: id)
    }

    public func keepsContents(onDevice device: UInt64) -> Bool {
        retention.copiesUpTo > 0 || !cannotClone.withLock { $0.contains(device) }
    }

    public func keepContents(of file: Int32, length: Int64?, path: MountPath, origin: VersionOrigin) -> Bool {
        guard mayKeep(path), var status = try? Syscall.stat(file), status.st_mode & S_IFMT == S_IFREG else { return false }
        let length = min(length ?? Int64(status.st_size), Int64(status.st_size))
        guard length > 0 else { return false }
        let device = UInt64(status.st_dev)
        let mayCopy = length <= retention.copiesUpTo
        guard keepsContents(onDevice: device) else { return false }
        guard let copy = try? Syscall.openUnnamed(in: objects.raw, mode: mode_t(status.st_mode & 0o7777)) else { return false }
        do throws(Errno) {
            if try cloned(file, into: copy.raw, device: device, path: path) {
                if length < Int64(status.st_size) { try Syscall.truncate(copy.raw, off_t(length)) }
            } else if mayCopy {
                try Self.copy(length, from: file, into: copy.raw)
            } else {
                return false
            }
        } catch {
            notKept(path, error)
            return false
        }
        status.st_size = off_t(length)
        _ = try? Syscall.changeOwner(copy.raw, status.st_uid, status.st_gid)
        guard let recorded = record(path: path, status: status, kind: .save, origin: origin) else { return false }
        let id = recorded.id
        do throws(Errno) {
            try Syscall.link(descriptor: copy.raw, to: objects.raw, Self.objectName(id))
        } catch {
            notKept(path, error)
            try? index.forget(id, undeleting: false)
            return false
        }
        followLive { $0.insert(path) }
        tell(.versionAdded, path, id, length, origin)
        thinSoon(recorded, fileExists: true)
        return true
    }

    /// Clones `file` into `copy`; false when this backing cannot clone (remembered for
    /// `device`, and logged once), so that the caller may copy instead.
    private func cloned(_ file: Int32, into copy: Int32, device: UInt64, path: MountPath) throws(Errno) -> Bool {
        guard !cannotClone.withLock({ $0.contains(device) }) else { return false }
        do throws(Errno) {
            try Syscall.cloneContents(of: file, into: copy)
            return true
        } catch {
            // No reflinks here (EOPNOTSUPP, EINVAL), or another filesystem than the store's (EXDEV).
            guard [.notSupported, .invalidArgument, .improperLink, .inappropriateIOCTLForDevice].contains(error) else { throw error }
            if cannotClone.withLock({ $0.insert(device).inserted }) {
                logger.info(retention.copiesUpTo > 0
                                ? "versions: the backing cannot clone files here; files written in place or appended to are copied for their versions up to the copy limit"
                                : "versions: the backing cannot clone files here; files written in place or appended to keep no versions",
                            metadata: ["path": "\(path)", "copy limit": "\(retention.copiesUpTo)"])
            }
            return false
        }
    }

    /// Copies the first `length` bytes of `file` into `copy` (in the kernel: copy_file_range).
    private static func copy(_ length: Int64, from file: Int32, into copy: Int32) throws(Errno) {
        var done: Int64 = 0
        while done < length {
            let count = try Syscall.copyRange(from: file, at: off_t(done), to: copy, at: off_t(done),
                                              length: Int(min(length - done, 1 << 30)), flags: 0)
            if count == 0 { throw .ioError } // the file shrank under the copy: no version of a torn file
            done += Int64(count)
        }
    }

    public func takeBack(_ kept: KeptVersion) {
        let told = try? index.describe([kept.id]).first
        _ = try? Syscall.unlink(at: objects.raw, Self.objectName(kept.id), flags: 0)
        try? index.forget(kept.id, undeleting: false)
        if let told { tell(.versionRemoved, told.path, kept.id, told.size, nil) }
    }

    public func observe(_ observer: @escaping @Sendable (VersionNotice) -> Void) {
        self.observer.withLock { $0 = VersionObserver(observer) }
    }

    private func tell(_ kind: ChangeKind, _ path: MountPath, _ id: Int64, _ size: Int64, _ origin: VersionOrigin?) {
        guard let observer = observer.withLock({ $0 }) else { return }
        observer.call(VersionNotice(kind: kind, path: path, version: id, size: size, origin: origin))
    }

    public func removeKeeping(_ name: FileName, in directory: Int32, path: MountPath, origin: VersionOrigin) throws(Errno) -> Bool {
        // Only the last name of a regular file: removing another name deletes nothing, and the
        // file's link count must drop as a plain unlink's would.
        guard mayKeep(path), let status = try? Syscall.stat(at: directory, name), status.st_mode & S_IFMT == S_IFREG, status.st_nlink == 1,
              let recorded = record(path: path, status: status, kind: .delete, origin: origin, deletingFile: true) else { return false }
        let id = recorded.id
        do throws(Errno) {
            try Syscall.rename(directory, name, to: objects.raw, Self.objectName(id), flags: Linux.RENAME_NOREPLACE)
        } catch {
            try? index.forget(id, undeleting: true)
            if error == .noSuchFileOrDirectory { throw error }
            notKept(path, error)
            return false
        }
        followLive { $0.remove(path) }
        tell(.versionAdded, path, id, Int64(status.st_size), origin)
        thinSoon(recorded, fileExists: false)
        return true
    }

    public func moved(from source: MountPath, to destination: MountPath) {
        // rename(2) refuses a move into or out of the path's own subtree, and one onto itself changes nothing.
        guard !source.isWithin(destination), !destination.isWithin(source),
              mayConcern({ $0.touches(source) || $0.touches(destination) }) else { return }
        followRename(source, destination, index: { try index.moved(from: source, to: destination) },
                     live: { $0.moved(from: source, to: destination) })
    }

    public func deletedBehind(_ path: MountPath) {
        guard mayConcern({ $0.touches(path) }) else { return }
        followRename(path, path, index: { try index.deleted(path) }, live: { $0.removeAll(within: path) })
    }

    public func exchanged(_ first: MountPath, _ second: MountPath) {
        guard !first.isWithin(second), !second.isWithin(first), mayConcern({ $0.touches(first) || $0.touches(second) }) else { return }
        followRename(first, second, index: { try index.exchanged(first, second) }, live: { $0.exchanged(first, second) })
    }

    /// Whether a change of names may concern a file with versions: a shared index keeps no
    /// copy of the live paths here (another host may have kept versions of any path), so every
    /// change goes to it; one of this mount's own is asked only when `touches` says so.
    private func mayConcern(_ touches: (borrowing LivePaths) -> Bool) -> Bool {
        index.isShared || live.withLock { touches($0) }
    }

    /// Applies a rename to the index, then the same to the live paths: each save of an editor
    /// that renames over its file comes here, so neither may cost more than the files moved.
    /// Should the index refuse, the live paths are read from it afresh.
    private func followRename(_ source: MountPath, _ destination: MountPath, index change: () throws -> Void,
                              live follow: (inout LivePaths) -> Void) {
        do {
            try change()
            followLive(follow)
        } catch {
            logger.error("versions: could not follow a rename in the index", metadata: [
                "from": "\(source)", "to": "\(destination)", "error": "\(error)",
            ])
            if !index.isShared, let paths = try? index.livePaths() {
                live.withLock { $0 = LivePaths(paths) }
            }
        }
    }

    /// Applies a change to the live paths, which only an index of this mount's own keeps.
    private func followLive(_ change: (inout LivePaths) -> Void) {
        guard !index.isShared else { return }
        live.withLock { change(&$0) }
    }

    /// Records a version of the file at `path` with the attributes in `status`; nil (logged)
    /// when the index refuses.
    private func record(path: MountPath, status: stat, kind: VersionKind, origin: VersionOrigin, deletingFile: Bool = false) -> RecordedVersion? {
        let version = NewVersionRecord(
            path: path, size: Int64(status.st_size),
            modified: Self.nanoseconds(status.st_mtim),
            kept: clock(), kind: kind, origin: origin, mode: UInt32(status.st_mode))
        do {
            return try index.record(version, deletingFile: deletingFile)
        } catch {
            logger.error("versions: the index refused a record; the version is not kept", metadata: ["path": "\(path)", "error": "\(error)"])
            return nil
        }
    }

    private func notKept(_ path: MountPath, _ error: Errno) {
        if error == .improperLink {
            if !warnedOtherFilesystem.exchange(true, ordering: .relaxed) {
                logger.warning("versions: files on another filesystem than the backing's root are not versioned (a version is kept by a hard link)",
                               metadata: ["path": "\(path)"])
            }
            return
        }
        logger.warning("versions: a version could not be kept", metadata: ["path": "\(path)", "error": "\(error)"])
    }

    // MARK: Retention

    /// Whether a version of `path` is kept at all: not excluded, and the backing not short of space.
    private func mayKeep(_ path: MountPath) -> Bool {
        !retention.exclusions.matches(path) && !isShortOfSpace()
    }

    /// Whether the backing's free space is below the floor, read at most once a second. Below
    /// it, versions pause rather than a save fail for want of room; the log says so when it
    /// starts and ends.
    func isShortOfSpace() -> Bool {
        let now = ContinuousClock.now
        if let known = space.withLock({ $0.readAt.map { now - $0 < .seconds(1) } == true ? $0.short : nil }) { return known }
        let short = freeBytes().map { $0 < retention.minimumFreeBytes } ?? false
        let was = space.withLock { space in
            defer { space = (now, short) }
            return space.short
        }
        if short != was {
            if short {
                logger.warning("versions paused: the backing has less free space than the floor; saves go on without keeping versions",
                               metadata: ["floor": "\(retention.minimumFreeBytes)"])
            } else {
                logger.notice("versions resumed: the backing has room again")
            }
        }
        return short
    }

    /// Free space in the backing for an unprivileged writer, nil when it cannot be read.
    private func freeBytes() -> Int64? {
        guard let status = try? Syscall.statfs(folder.raw) else { return nil }
        return Int64(status.f_bavail) * Int64(status.f_frsize)
    }

    /// Thins the file's versions off the saves' path, at most once per 30 seconds of `clock`
    /// (the narrowest step: nothing more can expire sooner but by the maximum age); not at
    /// all after its first version (every delete of a file never saved), which has nothing to thin.
    private func thinSoon(_ recorded: RecordedVersion, fileExists: Bool) {
        guard !recorded.isFirstOfFile else { return }
        let file = recorded.file
        let now = clock()
        let due = thinnedAt.withLock { thinned in
            guard now - (thinned[file] ?? .min / 2) >= 30 * 1_000_000_000 else { return false }
            thinned[file] = now
            return true
        }
        guard due else { return }
        upkeep.async { [self] in thin(file, fileExists: fileExists, now: now) }
    }

    /// Removes the versions of one file that retention says have expired.
    private func thin(_ file: Int64, fileExists: Bool, now: Int64) {
        guard let versions = try? index.versions(of: file) else { return }
        remove(retention.expired(versions, now: now, fileExists: fileExists))
    }

    /// Thins every file's versions, then, while the store takes more than its share of the
    /// backing's room, removes the oldest versions that may expire. Returns how many went.
    @discardableResult
    public func sweep() -> Int {
        let now = clock()
        guard let all = try? index.allVersions() else { return 0 }
        var byFile: [Int64: (versions: [VersionRecord], exists: Bool)] = [:]
        for (version, exists) in all { byFile[version.file, default: ([], exists)].versions.append(version) }
        var expired = Set<Int64>()
        for (_, file) in byFile {
            expired.formUnion(retention.expired(file.versions, now: now, fileExists: file.exists))
        }
        var bytes = all.reduce(Int64(0)) { $0 + (expired.contains($1.version.id) ? 0 : $1.version.size) }
        if let free = freeBytes() {
            let allowed = Int64(retention.spaceShare * Double(free + bytes))
            let newest = Set(byFile.values.compactMap { $0.exists ? $0.versions.last?.id : nil })
            for (version, _) in all where bytes > allowed && !expired.contains(version.id)
                && !newest.contains(version.id) && !VersionRetention.isProtected(version) {
                expired.insert(version.id)
                bytes -= version.size
            }
        }
        remove(Array(expired))
        return expired.count
    }

    /// Removes versions: their links first, then their records (a crash in between leaves
    /// records without versions, which the next start drops).
    /// `origin`: who asked, nil for expiry.
    private func remove(_ ids: [Int64], by origin: VersionOrigin? = nil) {
        guard !ids.isEmpty else { return }
        let told = (try? index.describe(ids)) ?? []
        for id in ids { _ = try? Syscall.unlink(at: objects.raw, Self.objectName(id), flags: 0) }
        let removed: Set<Int64>
        do {
            removed = Set(try index.remove(ids))
        } catch {
            logger.error("versions: expired versions could not be removed from the index", metadata: ["error": "\(error)"])
            return
        }
        // Another host of a cluster may have removed some first, and told of them.
        for version in told where removed.contains(version.id) { tell(.versionRemoved, version.path, version.id, version.size, origin) }
    }

    private func scheduleSweep(after delay: Duration, every period: Duration) {
        let nanoseconds = delay.components.seconds * 1_000_000_000 + delay.components.attoseconds / 1_000_000_000
        upkeep.asyncAfter(deadline: .now() + .nanoseconds(Int(nanoseconds))) { [weak self] in
            guard let self else { return }
            let removed = sweep()
            if removed > 0 { logger.info("versions: expired versions removed", metadata: ["count": "\(removed)"]) }
            scheduleSweep(after: period, every: period)
        }
    }

    // MARK: Reading

    public func versions(of path: MountPath) throws(Errno) -> FileVersions? {
        do {
            guard let file = try index.file(at: path) else { return nil }
            return FileVersions(file: file.id, deleted: file.deleted, versions: try index.versions(of: file.id))
        } catch {
            logger.error("versions: the index could not be read", metadata: ["error": "\(error)"])
            throw .ioError
        }
    }

    public func read(version id: Int64, of path: MountPath, offset: Int64, count: Int) throws(Errno) -> [UInt8] {
        guard let file = try versions(of: path), file.versions.contains(where: { $0.id == id }) else { throw .noSuchFileOrDirectory }
        let version = try Syscall.openAt(objects.raw, Self.objectName(id), O_RDONLY | O_NOFOLLOW)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(0, count), alignment: 1)
        defer { buffer.deallocate() }
        var filled = 0
        while filled < buffer.count {
            let got = try Syscall.read(version.raw, into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]), at: off_t(offset) + off_t(filled))
            if got == 0 { break }
            filled += got
        }
        return Array(buffer[..<filled])
    }

    public func change(version id: Int64, of path: MountPath, pinned: Bool?, resolved: Bool?, by origin: VersionOrigin) throws(Errno) -> VersionRecord {
        guard let file = try versions(of: path), file.versions.contains(where: { $0.id == id }) else { throw .noSuchFileOrDirectory }
        do {
            let before = file.versions.first { $0.id == id }
            guard try index.setFlags(of: id, pinned: pinned, resolved: resolved),
                  let changed = try index.versions(of: file.file).first(where: { $0.id == id }) else { throw Errno.noSuchFileOrDirectory }
            if changed.kind == .conflict, changed.resolved, before?.resolved == false {
                tell(.conflictResolved, (try? index.describe([id]).first?.path) ?? path, id, changed.size, origin)
            }
            return changed
        } catch let error as Errno {
            throw error
        } catch {
            logger.error("versions: the index refused a change", metadata: ["error": "\(error)"])
            throw .ioError
        }
    }

    public func remove(versions ids: [Int64]?, of path: MountPath, by origin: VersionOrigin) throws(Errno) -> Int {
        guard let file = try versions(of: path) else { throw .noSuchFileOrDirectory }
        let known = Set(file.versions.map(\.id))
        let chosen = ids ?? Array(known)
        guard chosen.allSatisfy(known.contains) else { throw .noSuchFileOrDirectory }
        // A file left without versions keeps its row: its next version joins it.
        remove(chosen, by: origin)
        return chosen.count
    }

    public func conflicts(beneath path: MountPath) throws(Errno) -> [(path: MountPath, versions: [VersionRecord])] {
        do {
            var grouped: [(path: MountPath, versions: [VersionRecord])] = []
            for (now, version) in try index.conflicts(beneath: path) {
                if grouped.last?.path == now { grouped[grouped.count - 1].versions.append(version) } else { grouped.append((now, [version])) }
            }
            return grouped
        } catch {
            logger.error("versions: the index could not be read", metadata: ["error": "\(error)"])
            throw .ioError
        }
    }

    public func restored(version id: Int64, of path: MountPath, by pid: Int32) throws(Errno) {
        do {
            // The restore's save kept its version within the last minute, if it replaced a file.
            try index.noteRestore(at: path, by: pid, since: clock() - 60 * 1_000_000_000)
            followLive { $0.insert(path) }
        } catch {
            logger.error("versions: the index refused to record a restore", metadata: ["error": "\(error)"])
            throw .ioError
        }
    }

    public func status(ofVersion id: Int64) -> stat? {
        try? Syscall.stat(at: objects.raw, Self.objectName(id))
    }

    public func summary() -> VersionSummary {
        var summary = (try? index.summary()) ?? VersionSummary(versions: 0, files: 0, bytes: 0)
        summary.paused = space.withLock { $0.short }
        return summary
    }

    // MARK: Start

    /// Makes store and index agree after a crash: a record whose version is missing goes (its
    /// link never happened, so nothing was replaced); a version without a record is recorded.
    /// In a shared index, only records over a minute old: another host may be between the
    /// record and the link of a version right now.
    func reconcile() throws {
        let recorded = try index.allVersionIDs()
        let settled = clock() - (index.isShared ? 60 * 1_000_000_000 : 0)
        var found = Set<Int64>()
        for name in try Syscall.directoryNames(objects.raw) {
            guard let text = name.string, let id = Int64(text), id > 0 else { continue }
            found.insert(id)
            if recorded[id] == nil, let status = try? Syscall.stat(at: objects.raw, name) {
                try index.recordFound(id: id, size: Int64(status.st_size),
                                      modified: Self.nanoseconds(status.st_mtim),
                                      mode: UInt32(status.st_mode))
                logger.notice("versions: a version without a record was found and recorded as a version of the mount's root", metadata: ["id": "\(id)"])
            }
        }
        for (id, kept) in recorded where !found.contains(id) && kept <= settled { try index.forget(id, undeleting: false) }
    }

    /// Opens the folder `name` in `directory`, made first (readable by the daemon's user only) if missing.
    private static func openFolder(_ name: FileName, in directory: Int32) throws(Errno) -> OwnedDescriptor {
        do throws(Errno) {
            try Syscall.makeDirectory(at: directory, name, 0o700)
        } catch where error == .fileExists {}
        return try Syscall.openAt(directory, name, O_DIRECTORY | O_NOFOLLOW | O_RDONLY)
    }

    static func objectName(_ id: Int64) -> FileName {
        FileName(String(id).utf8)!
    }

    /// A file time in nanoseconds since the epoch, held at the ends of Int64 (about the years
    /// 1678 and 2262): a file's times may be anything `touch -d` or `utime` set, far beyond.
    static func nanoseconds(_ time: timespec) -> Int64 {
        let (seconds, overflow) = Int64(time.tv_sec).multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return time.tv_sec < 0 ? .min : .max }
        let (total, past) = seconds.addingReportingOverflow(Int64(time.tv_nsec))
        return past ? .max : total
    }

    /// The real clock: nanoseconds since the epoch.
    public static func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }
}

/// The store's observer, boxed (see `VersionStore.observer`). Sendable: immutable.
final class VersionObserver: Sendable {
    let call: @Sendable (VersionNotice) -> Void

    init(_ call: @escaping @Sendable (VersionNotice) -> Void) {
        self.call = call
    }
}

/// Live paths with versions, and a count of them beneath each directory. Its changes follow
/// `VersionIndex`'s rules for renames (`moved`, `deleted`, `exchanged`) one for one.
struct LivePaths {
    private var paths = Set<MountPath>()
    private var beneath = [MountPath: Int]()

    init(_ paths: some Sequence<MountPath> = []) {
        for path in paths { insert(path) }
    }

    mutating func insert(_ path: MountPath) {
        guard paths.insert(path).inserted else { return }
        for directory in path.lineage where directory != path { beneath[directory, default: 0] += 1 }
    }

    mutating func remove(_ path: MountPath) {
        guard paths.remove(path) != nil else { return }
        for directory in path.lineage where directory != path {
            beneath[directory, default: 0] -= 1
            if beneath[directory] == 0 { beneath[directory] = nil }
        }
    }

    func contains(_ path: MountPath) -> Bool { paths.contains(path) }

    var all: Set<MountPath> { paths }

    /// `path` and the live paths beneath it (found by a scan only when it is a directory above
    /// some: a file's rename costs a lookup).
    private func all(within path: MountPath) -> [MountPath] {
        var found = paths.contains(path) ? [path] : []
        if beneath[path] != nil { found += paths.filter { $0 != path && $0.isWithin(path) } }
        return found
    }

    /// `path`, at or beneath `source`, with `source`'s part of it replaced by `destination`.
    private static func path(_ path: MountPath, movedFrom source: MountPath, to destination: MountPath) -> MountPath {
        MountPath(components: destination.components + path.components.dropFirst(source.components.count))
    }

    /// A rename of `source` to `destination`: paths beneath `destination` go (they were stale,
    /// as `VersionIndexing.moved` says); `destination` stays live if `source` was, or if
    /// nothing with versions moved (the replaced file keeps its path then).
    mutating func moved(from source: MountPath, to destination: MountPath) {
        let moving = all(within: source)
        for stale in all(within: destination) where stale != destination { remove(stale) }
        if !moving.isEmpty { remove(destination) }
        for path in moving { remove(path) }
        for path in moving { insert(Self.path(path, movedFrom: source, to: destination)) }
    }

    /// `path` and everything beneath it were deleted.
    mutating func removeAll(within path: MountPath) {
        for gone in all(within: path) { remove(gone) }
    }

    /// `first` and `second` exchanged places, each with what is beneath it.
    mutating func exchanged(_ first: MountPath, _ second: MountPath) {
        let (fromFirst, fromSecond) = (all(within: first), all(within: second))
        for path in fromFirst + fromSecond { remove(path) }
        for path in fromFirst { insert(Self.path(path, movedFrom: first, to: second)) }
        for path in fromSecond { insert(Self.path(path, movedFrom: second, to: first)) }
    }

    /// Whether `path` is a live path or a directory above one.
    func touches(_ path: MountPath) -> Bool { paths.contains(path) || beneath[path] != nil }
}
