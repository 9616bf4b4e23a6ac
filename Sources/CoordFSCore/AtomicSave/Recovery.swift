import Glibc
import SystemPackage

/// A temp file a crash left behind, and where the sweep put it.
public struct RecoveredFile: Sendable, Equatable, CustomStringConvertible {
    /// Where it was, relative to the backing root: its directory and its staging name.
    public let originalPath: MountPath
    /// Where it is now, relative to the backing root: `.coordfs-recovery/<time>/<same path>`.
    public let recoveredPath: MountPath
    /// Its size in bytes (as stat reports it; what a staged copy got to before the crash).
    public let size: Int64

    public var description: String {
        "\(originalPath) (\(size) bytes) moved to \(recoveredPath)"
    }
}

/// Moves aside the temp files a crash left in the backing, before the mount serves anything.
///
/// Only named temps are left: those of a backing without unnamed files (or `--named-temps`),
/// and an unnamed temp caught in the microseconds between the link that names it and the
/// rename that commits it. Unnamed temps vanish with the process that held them.
///
/// The temps are what their writers had not committed yet: never a committed file, so the
/// mount's view is unchanged by the sweep. They are moved rather than deleted because they may
/// hold the only copy of someone's unsaved work (empty ones hold nothing and are deleted);
/// the folder they go to is hidden by the mount and kept by date, so an administrator can
/// look through it and remove it.
public enum Recovery {
    /// The most directory descriptors a sweep holds at once (besides the root's and a few for
    /// moments). Deeper trees are walked all the same: a directory whose descriptor was given
    /// up is reopened from its nearest open ancestor, one name at a time, when the walk comes
    /// back to it (and checked to be the same directory).
    public static let descriptorBudget = 64

    /// Walks the whole backing tree and moves every entry with a staging name into
    /// `<root>/.coordfs-recovery/<UTC time of now>/<its directory>/<its name>`.
    ///
    /// Symlinks are never followed and other filesystems (mount points below the root, a
    /// different st_dev) never entered, so every move is a rename within one filesystem. The
    /// recovery folder in the root is not searched. Directories the daemon may not read are
    /// skipped: the mount could not serve them either.
    ///
    /// - Throws: what stopped the walk (the root unreadable, the recovery folder not creatable,
    ///   EIO...); temps moved before that stay moved.
    /// - Returns: every temp moved, in walk order, for the mount to log.
    public static func sweep(backingRoot: Int32, now: time_t = time(nil)) throws(Errno) -> [RecoveredFile] {
        var statistics = Statistics()
        return try sweep(backingRoot: backingRoot, now: now, descriptorBudget: descriptorBudget, statistics: &statistics)
    }

    /// The folder a sweep at `time` fills, e.g. `2026-11-21T10-15-30Z`: UTC, ISO 8601 with
    /// dashes for colons (file managers and other systems choke on colons in names), so the
    /// folders sort by time.
    public static func folderName(at time: time_t) -> String {
        let stamp = UTCStamp(time)
        return "\(stamp.year)-\(stamp.month)-\(stamp.day)T\(stamp.hour)-\(stamp.minute)-\(stamp.second)Z"
    }

    /// What a sweep did, for tests: how many directories it held open at most, how often it reopened one.
    struct Statistics {
        var peakHeld = 0
        var reopened = 0
    }

    static func sweep(backingRoot: Int32, now: time_t, descriptorBudget: Int,
                      statistics: inout Statistics) throws(Errno) -> [RecoveredFile] {
        let root = try Syscall.openAt(backingRoot, ".", O_RDONLY | O_DIRECTORY)
        var walk = Walk(root: root.raw, rootStatus: try Syscall.stat(root.raw), folder: FileName(folderName(at: now).utf8)!,
                        budget: max(descriptorBudget, 2))
        defer {
            walk.closeAll()
            statistics = walk.statistics
        }
        try walk.run()
        return walk.recovered
    }
}

/// The state of one sweep: a depth-first walk that keeps, for each directory on the current
/// path, the subdirectories still to visit and (within the budget) a descriptor.
private struct Walk {
    /// One directory on the path from the root to where the walk stands.
    struct Frame {
        /// Its name in its parent (none for the root).
        let name: FileName
        let identity: FileIdentity
        /// A readable descriptor, or -1 when it was closed to stay within the budget.
        var descriptor: Int32
        /// Subdirectories not visited yet, last to visit first.
        var pending: [FileName]
    }

    let root: Int32
    let device: UInt64
    let folder: FileName
    let budget: Int
    var frames: [Frame]
    var held = 1
    var recovered: [RecoveredFile] = []
    var statistics = Recovery.Statistics()

    init(root: Int32, rootStatus: stat, folder: FileName, budget: Int) {
        self.root = root
        self.device = UInt64(rootStatus.st_dev)
        self.folder = folder
        self.budget = budget
        // The root's descriptor belongs to the caller of the sweep, who closes it.
        self.frames = [Frame(name: .empty, identity: FileIdentity(rootStatus), descriptor: root, pending: [])]
        statistics.peakHeld = 1
    }

    mutating func run() throws(Errno) {
        frames[0].pending = try scan(root, components: [])
        while let top = frames.indices.last {
            guard let next = frames[top].pending.popLast() else {
                close(top)
                frames.removeLast()
                continue
            }
            guard let parent = try descriptor(of: top) else { continue }
            makeRoom()
            guard let child = try openSubdirectory(parent, next) else { continue }
            frames.append(Frame(name: next, identity: child.identity, descriptor: child.descriptor, pending: []))
            held += 1
            statistics.peakHeld = max(statistics.peakHeld, held)
            let components = frames.dropFirst().map(\.name)
            frames[frames.count - 1].pending = try scan(child.descriptor, components: components)
        }
    }

    /// Opens a subdirectory to descend into; nil when it is to be skipped: gone or replaced
    /// meanwhile, not readable, on another filesystem, or one of its own ancestors (a bind
    /// mount looping back).
    func openSubdirectory(_ parent: Int32, _ name: FileName) throws(Errno) -> (descriptor: Int32, identity: FileIdentity)? {
        let descriptor: OwnedDescriptor
        do throws(Errno) {
            descriptor = try Syscall.openAt(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
        } catch where Self.isSkippable(error) {
            return nil
        }
        let status = try Syscall.stat(descriptor.raw)
        let identity = FileIdentity(status)
        guard identity.device == device, !frames.contains(where: { $0.identity == identity }) else { return nil }
        return (descriptor.release(), identity)
    }

    /// Reads a directory whole (moving entries out of a directory while reading it could skip
    /// others), moves the temps found in it, and returns its subdirectories to visit.
    mutating func scan(_ directory: Int32, components: [FileName]) throws(Errno) -> [FileName] {
        var subdirectories: [FileName] = []
        var temps: [FileName] = []
        let stream: OpaquePointer
        do throws(Errno) {
            stream = try Syscall.openDirectoryStream(directory)
        } catch where Self.isSkippable(error) {
            return []
        }
        defer { Syscall.closeDirectoryStream(stream) }
        let inRoot = components.isEmpty
        while let entry = try Syscall.readDirectory(stream) {
            let type = entry.pointee.d_type
            let kind: Kind? = withUnsafePointer(to: &entry.pointee.d_name) { tuple in
                tuple.withMemoryRebound(to: CChar.self, capacity: Int(NAME_MAX) + 1) { name in
                    if StagingName.isStaging(name) { return .temp(FileName(cString: name)) }
                    if name[0] == 0x2E && (name[1] == 0 || (name[1] == 0x2E && name[2] == 0)) { return nil }
                    if inRoot && StagingName.isReserved(name: name, inRoot: true) { return nil }
                    if Int(type) == DT_DIR { return .directory(FileName(cString: name)) }
                    if Int(type) == DT_UNKNOWN, let status = try? Syscall.stat(at: directory, name),
                       status.st_mode & S_IFMT == S_IFDIR {
                        return .directory(FileName(cString: name))
                    }
                    return nil // files, and symlinks, which are never followed
                }
            }
            switch kind {
            case .temp(let name): temps.append(name)
            case .directory(let name): subdirectories.append(name)
            case nil: break
            }
        }
        if !temps.isEmpty { try moveAside(temps, from: directory, components: components) }
        return subdirectories.reversed()
    }

    enum Kind {
        case temp(FileName)
        case directory(FileName)
    }

    /// Moves the temps of one directory into its mirror under the recovery folder.
    mutating func moveAside(_ temps: [FileName], from directory: Int32, components: [FileName]) throws(Errno) {
        var destination: OwnedDescriptor? = nil
        for name in temps {
            let status: stat
            do throws(Errno) {
                status = try Syscall.stat(at: directory, name)
            } catch where Self.isSkippable(error) {
                continue
            }
            if UInt64(status.st_dev) != device { continue } // something mounted on it: not ours to move
            if status.st_mode & S_IFMT == S_IFREG && status.st_size == 0 {
                // Nothing to recover: a save that wrote nothing yet.
                _ = try? Syscall.unlink(at: directory, name, flags: 0)
                continue
            }
            if destination == nil { destination = try mirror(of: components) }
            guard let target = destination?.raw else { continue }
            guard let movedName = try rename(name, from: directory, to: target) else { continue }
            recovered.append(RecoveredFile(
                originalPath: MountPath(components: components + [name]),
                recoveredPath: MountPath(components: [StagingName.recoveryFolder, folder] + components + [movedName]),
                size: Int64(status.st_size)))
        }
    }

    /// Renames without replacing anything (a name taken by an earlier sweep in the same second
    /// gets a suffix); nil when the entry cannot be moved (gone, or behind a bind mount).
    func rename(_ name: FileName, from directory: Int32, to destination: Int32) throws(Errno) -> FileName? {
        var candidate = name
        var flags = Linux.RENAME_NOREPLACE
        for attempt in 1...100 {
            do throws(Errno) {
                if flags == 0, (try? Syscall.stat(at: destination, candidate)) != nil { throw Errno(rawValue: EEXIST) }
                try Syscall.rename(directory, name, to: destination, candidate, flags: flags)
                return candidate
            } catch where error.rawValue == EINVAL && flags != 0 {
                flags = 0 // no RENAME_NOREPLACE on this filesystem: look before renaming (the tree is quiet)
                continue
            } catch where error.rawValue == EEXIST {
                candidate = name.appending(".\(attempt)")
            } catch where error.rawValue == ENOENT || error.rawValue == EXDEV || error.rawValue == EBUSY {
                return nil
            }
        }
        throw Errno(rawValue: EEXIST)
    }

    /// `.coordfs-recovery/<folder>/<components>` in the root, created as needed (0700: the
    /// temps are other people's unsaved work), opened `O_PATH`.
    func mirror(of components: [FileName]) throws(Errno) -> OwnedDescriptor {
        var current = try Self.openOrMake(root, StagingName.recoveryFolder)
        current = try Self.openOrMake(current.raw, folder)
        for name in components {
            current = try Self.openOrMake(current.raw, name)
        }
        return current
    }

    static func openOrMake(_ directory: Int32, _ name: FileName) throws(Errno) -> OwnedDescriptor {
        do throws(Errno) {
            try Syscall.makeDirectory(at: directory, name, 0o700)
        } catch where error.rawValue == EEXIST {
        }
        return try Syscall.openAt(directory, name, Linux.O_PATH | O_DIRECTORY | O_NOFOLLOW)
    }

    /// The descriptor of frame `index` (the top), reopened from its nearest open ancestor when
    /// it was closed; nil (and the frame emptied) when that path no longer leads to it.
    mutating func descriptor(of index: Int) throws(Errno) -> Int32? {
        if frames[index].descriptor >= 0 { return frames[index].descriptor }
        statistics.reopened += 1
        var start = index - 1
        while frames[start].descriptor < 0 { start -= 1 } // the root is always open
        var current: OwnedDescriptor? = nil
        for step in (start + 1)...index {
            let base = current?.raw ?? frames[start].descriptor
            do throws(Errno) {
                current = try Syscall.openAt(base, frames[step].name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
            } catch where Self.isSkippable(error) {
                frames[index].pending = []
                return nil
            }
        }
        guard let opened = current.take(), FileIdentity(try Syscall.stat(opened.raw)) == frames[index].identity else {
            frames[index].pending = [] // moved or replaced while the walk was below it
            return nil
        }
        makeRoom()
        frames[index].descriptor = opened.release()
        held += 1
        statistics.peakHeld = max(statistics.peakHeld, held)
        return frames[index].descriptor
    }

    /// Before another directory is held: closes the shallowest held descriptors (never the
    /// root's, never the top's) until there is room for one more within the budget. The
    /// shallowest are the directories the walk comes back to last.
    mutating func makeRoom() {
        var index = 1
        while held >= budget && index < frames.count - 1 {
            close(index)
            index += 1
        }
    }

    mutating func close(_ index: Int) {
        guard index > 0, frames[index].descriptor >= 0 else { return }
        Glibc.close(frames[index].descriptor)
        frames[index].descriptor = -1
        held -= 1
    }

    mutating func closeAll() {
        for index in frames.indices { close(index) }
    }

    /// Errors that mean "leave this one alone" rather than "the sweep failed": it vanished or
    /// changed type meanwhile, or the daemon may not enter it.
    static func isSkippable(_ error: Errno) -> Bool {
        switch error.rawValue {
        case ENOENT, ENOTDIR, ELOOP, EACCES, EPERM: return true
        default: return false
        }
    }
}
