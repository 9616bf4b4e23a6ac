import CoordFSCore

import Glibc
import SystemPackage
import Logging
import Synchronization

/// The version store: a hidden folder at the backing's root (`.coordfs-versions`, never shown
/// through the mount nor reported by its watch) that holds every version kept as a hard link
/// in `objects/`, named by its id, and the index that says whose version each is
/// (`index.sqlite`). Keeping a version costs a link (or, for a delete, the rename that
/// replaces the unlink) and one record: never a copy.
///
/// A version's record is written before its link, so a crash in between leaves a record
/// without a version, which `reconcile` drops at the next start: the file it was for was not
/// replaced yet. The reverse (a link without a record, after a power cut took the last
/// records) is recorded again as a version of the mount's root.
///
/// Sendable: the descriptors are constants, the index guards itself, `live` is under its lock.
public final class VersionStore: VersionKeeping, VersionCatalog {
    /// The store's folder in the backing root, reserved there (`StagingName.isReserved`).
    public static let folderName = StagingName.versionsFolder

    private let folder: OwnedDescriptor
    private let objects: OwnedDescriptor
    private let index: VersionIndex
    private let logger: Logger
    /// The paths of live files with versions, and how many of them lie beneath each directory:
    /// a rename through the mount touches the index only when it moves one of them.
    private let live = Mutex(LivePaths())
    /// Whether a version could not be linked because the file is on another filesystem than
    /// the store: said once in the log.
    private let warnedOtherFilesystem = Atomic<Bool>(false)

    /// Opens (making it if need be) the store in the backing directory `backing`, and
    /// reconciles it with its index.
    public init(backing: String, logger: Logger) throws {
        let root = try Syscall.openAt(AT_FDCWD, backing, Linux.O_PATH | O_DIRECTORY)
        folder = try Self.openFolder(Self.folderName, in: root.raw)
        objects = try Self.openFolder(FileName("objects".utf8)!, in: folder.raw)
        index = try VersionIndex(path: (backing.hasSuffix("/") ? backing : backing + "/") + Self.folderName.description + "/index.sqlite")
        self.logger = logger
        try reconcile()
        let paths = try index.livePaths()
        live.withLock { live in for path in paths { live.insert(path) } }
    }

    // MARK: Keeping

    public func keepReplaced(_ name: FileName, in directory: Int32, path: MountPath, kind: VersionKind, origin: VersionOrigin) -> KeptVersion? {
        guard let status = try? Syscall.stat(at: directory, name), status.st_mode & S_IFMT == S_IFREG else { return nil }
        guard let id = record(path: path, status: status, kind: kind, origin: origin) else { return nil }
        let store = objects.raw
        do throws(Errno) {
            try name.withCString { (source) throws(Errno) in try Syscall.link(directory, source, to: store, Self.objectName(id), flags: 0) }
        } catch {
            notKept(path, error)
            try? index.forget(id)
            return nil
        }
        live.withLock { $0.insert(path) }
        return KeptVersion(id: id)
    }

    public func takeBack(_ kept: KeptVersion) {
        _ = try? Syscall.unlink(at: objects.raw, Self.objectName(kept.id), flags: 0)
        try? index.forget(kept.id)
    }

    public func removeKeeping(_ name: FileName, in directory: Int32, path: MountPath, origin: VersionOrigin) throws(Errno) -> Bool {
        // Only the last name of a regular file: removing another name deletes nothing, and the
        // file's link count must drop as a plain unlink's would.
        guard let status = try? Syscall.stat(at: directory, name), status.st_mode & S_IFMT == S_IFREG, status.st_nlink == 1,
              let id = record(path: path, status: status, kind: .delete, origin: origin, deletingFile: true) else { return false }
        do throws(Errno) {
            try Syscall.rename(directory, name, to: objects.raw, Self.objectName(id), flags: Linux.RENAME_NOREPLACE)
        } catch {
            try? index.forget(id, undeleting: true)
            if error == .noSuchFileOrDirectory { throw error }
            notKept(path, error)
            return false
        }
        live.withLock { $0.remove(path) }
        return true
    }

    public func moved(from source: MountPath, to destination: MountPath) {
        guard live.withLock({ $0.touches(source) || $0.contains(destination) }) else { return }
        followRename(source, destination) { try index.moved(from: source, to: destination) }
    }

    public func exchanged(_ first: MountPath, _ second: MountPath) {
        guard live.withLock({ $0.touches(first) || $0.touches(second) }) else { return }
        followRename(first, second) { try index.exchanged(first, second) }
    }

    /// Applies a rename to the index, then reads the live paths afresh (renames of versioned
    /// files are rare next to saves; the index is the one place the rules live).
    private func followRename(_ source: MountPath, _ destination: MountPath, _ change: () throws -> Void) {
        do {
            try change()
            let paths = try index.livePaths()
            live.withLock { live in
                live = LivePaths()
                for path in paths { live.insert(path) }
            }
        } catch {
            logger.error("versions: could not follow a rename in the index", metadata: [
                "from": "\(source)", "to": "\(destination)", "error": "\(error)",
            ])
        }
    }

    /// Records a version of the file at `path` with the attributes in `status`; nil (logged)
    /// when the index refuses.
    private func record(path: MountPath, status: stat, kind: VersionKind, origin: VersionOrigin, deletingFile: Bool = false) -> Int64? {
        let version = VersionIndex.NewVersion(
            path: path, size: Int64(status.st_size),
            modified: Int64(status.st_mtim.tv_sec) * 1_000_000_000 + Int64(status.st_mtim.tv_nsec),
            kept: Self.now(), kind: kind, origin: origin, mode: UInt32(status.st_mode))
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

    public func summary() -> VersionSummary {
        (try? index.summary()) ?? VersionSummary(versions: 0, files: 0, bytes: 0)
    }

    // MARK: Start

    /// Makes store and index agree after a crash: a record whose version is missing goes (its
    /// link never happened, so nothing was replaced); a version without a record is recorded.
    func reconcile() throws {
        let recorded = try index.allVersionIDs()
        var found = Set<Int64>()
        for name in try Syscall.directoryNames(objects.raw) {
            guard let text = name.string, let id = Int64(text), id > 0 else { continue }
            found.insert(id)
            if !recorded.contains(id), let status = try? Syscall.stat(at: objects.raw, name) {
                try index.recordFound(id: id, size: Int64(status.st_size),
                                      modified: Int64(status.st_mtim.tv_sec) * 1_000_000_000 + Int64(status.st_mtim.tv_nsec),
                                      mode: UInt32(status.st_mode))
                logger.notice("versions: a version without a record was found and recorded as a version of the mount's root", metadata: ["id": "\(id)"])
            }
        }
        for id in recorded.subtracting(found) { try index.forget(id) }
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

    static func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }
}

/// Live paths with versions, and a count of them beneath each directory.
struct LivePaths {
    private var paths = Set<MountPath>()
    private var beneath = [MountPath: Int]()

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

    /// Whether `path` is a live path or a directory above one.
    func touches(_ path: MountPath) -> Bool { paths.contains(path) || beneath[path] != nil }
}
