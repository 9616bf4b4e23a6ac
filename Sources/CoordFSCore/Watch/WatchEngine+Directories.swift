import Glibc
import SystemPackage

// Following directories: watching new ones and scanning what they hold, listing unsettled
// ones again, forgetting those that left, and starting afresh after an overflow.
extension WatchEngine {
    /// Watches the new directory at `path` (`name` in `parent`) and what lies under it.
    /// `madeBy`: the process that made the directory, where the watch names it: what the scan
    /// finds is told as found in a directory it made (`ObservedChange.foundInDirectoryMadeBy`).
    func follow(_ path: MountPath, _ parent: Kernel.Key, _ name: FileName, reportContents: Bool, madeBy: Int32? = nil) {
        guard let directory = openDirectory(path) else {
            // Gone (its deletion follows), or moved along with a directory above it before
            // that move was handled: the parent is listed again once the tree has caught up.
            unsettled[parent] = (unsettled[parent] ?? false) || reportContents
            return
        }
        var failure: Errno?
        guard let key = watch(directory.raw, failure: &failure) else {
            if failure != nil { lose() }
            return
        }
        tree.place(key, in: parent, as: name)
        scan(directory.raw, key, path, report: reportContents, madeBy: madeBy, failure: &failure)
        if failure != nil { lose() }
    }

    /// The key of the watched directory at `path` now, on disk; nil when none is there or it
    /// is not watched (a watch that asking added is removed again).
    func identify(_ path: MountPath) -> Kernel.Key? {
        guard let directory = openDirectory(path) else { return nil }
        return watchedKey(of: directory.raw)
    }

    /// The key of the directory open as `directory` if it is watched; nil otherwise (and a
    /// watch that asking added is removed again).
    private func watchedKey(of directory: Int32) -> Kernel.Key? {
        guard let key = try? kernel.watch(directory: directory) else { return nil }
        guard tree.contains(key) else {
            kernel.unwatch(key, root: root.raw)
            return nil
        }
        return key
    }

    /// Lists the unsettled directories again, where their paths lead to them now.
    func settleDirectories() {
        for (key, report) in unsettled {
            if !tree.contains(key) || relist(key, report: report) { unsettled[key] = nil }
        }
    }

    /// Watches each subdirectory of the watched directory `key` under its present name: one new
    /// to the watch with all under it (reporting what it holds when `report`), one known under
    /// another name moved here. False when the tree's path for `key` leads elsewhere for now.
    private func relist(_ key: Kernel.Key, report: Bool) -> Bool {
        guard let path = tree.path(of: key), let directory = openDirectory(path),
              watchedKey(of: directory.raw) == key,
              let stream = try? Syscall.openDirectoryStream(directory.raw) else { return false }
        defer { Syscall.closeDirectoryStream(stream) }
        var failure: Errno?
        while let entry = try? Syscall.readDirectory(stream) {
            guard let (name, isDirectory) = Self.entry(entry, in: directory.raw, inRoot: path.isRoot), isDirectory,
                  let opened = try? Syscall.openAt(directory.raw, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW),
                  let childKey = watch(opened.raw, failure: &failure),
                  tree.child(of: key, named: name) != childKey else { continue }
            let known = tree.contains(childKey)
            tree.place(childKey, in: key, as: name)
            if !known { scan(opened.raw, childKey, path.appending(name), report: report, failure: &failure) }
        }
        if failure != nil { lose() }
        return true
    }

    /// The directory at `path` (not a symlink to one), opened to be listed and watched.
    private func openDirectory(_ path: MountPath) -> OwnedDescriptor? {
        var relative = path.isRoot ? [CChar(bitPattern: UInt8(ascii: "."))] : path.bytes.dropFirst().map { CChar(bitPattern: $0) }
        relative.append(0)
        return try? Syscall.openAt(root.raw, relative, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
    }

    /// Watches every directory under the one open as `directory` (watched as `key`, at `path`);
    /// reports each entry as created when `report`.
    func scan(_ directory: Int32, _ key: Kernel.Key, _ path: MountPath, report: Bool, madeBy: Int32? = nil,
                      failure: inout Errno?) {
        guard let stream = try? Syscall.openDirectoryStream(directory) else { return }
        defer { Syscall.closeDirectoryStream(stream) }
        while let entry = try? Syscall.readDirectory(stream) {
            guard let (name, isDirectory) = Self.entry(entry, in: directory, inRoot: path.isRoot) else { continue }
            let child = path.appending(name)
            if report {
                reportedByScan[child] = currentRead
                self.report(.created(child, isDirectory: isDirectory), paths: [child], pid: nil, foundInDirectoryMadeBy: madeBy)
            }
            guard isDirectory,
                  let opened = try? Syscall.openAt(directory, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW),
                  let childKey = watch(opened.raw, failure: &failure) else { continue }
            tree.place(childKey, in: key, as: name)
            scan(opened.raw, childKey, child, report: report, madeBy: madeBy, failure: &failure)
        }
    }

    /// A directory entry's name and whether it is a directory; nil for "." and "..", and for
    /// the mount's reserved names.
    private static func entry(_ entry: UnsafeMutablePointer<dirent>, in directory: Int32, inRoot: Bool) -> (FileName, Bool)? {
        let type = entry.pointee.d_type
        let name = withUnsafePointer(to: &entry.pointee.d_name) {
            $0.withMemoryRebound(to: CChar.self, capacity: 256) { FileName(cString: $0) }
        }
        if name.isEmpty || name == WatchNames.dot || name == WatchNames.dotDot { return nil }
        if StagingName.isReserved(name: name, inRoot: inRoot) { return nil }
        if type == UInt8(DT_UNKNOWN), let status = try? Syscall.stat(at: directory, name) {
            return (name, status.st_mode & S_IFMT == S_IFDIR)
        }
        return (name, type == UInt8(DT_DIR))
    }

    /// The key of the directory open as `directory`; nil when it cannot be watched. A directory
    /// closed to this process, or gone meanwhile, is passed over; any other refusal (a limit)
    /// is kept in `failure`.
    private func watch(_ directory: Int32, failure: inout Errno?) -> Kernel.Key? {
        do {
            return try kernel.watch(directory: directory)
        } catch {
            switch error {
            case .noSuchFileOrDirectory, .notDirectory, .permissionDenied, .notPermitted, .tooManySymbolicLinkLevels:
                break
            default:
                if failure == nil { failure = error }
            }
            return nil
        }
    }

    /// Forgets a directory that left the watch, and everything under it.
    func forget(_ key: Kernel.Key) {
        for forgotten in tree.forget(key) { kernel.unwatch(forgotten, root: root.raw) }
    }

    /// A directory could not be followed: changes in it will be missed, which only an
    /// overflow can say.
    private func lose() {
        guard !lostTrack else { return }
        lostTrack = true
        emit(.overflow, pid: nil)
    }

    /// After an overflow nothing is known: watch the whole tree afresh (new directories were
    /// missed, gone ones may linger), and forget what scans reported.
    func resynchronize() {
        guard let rootKey = tree.root else { return }
        let before = Set(tree.allKeys)
        tree = DirectoryTree()
        tree.setRoot(rootKey)
        reportedByScan.removeAll()
        pendingMove = nil
        exchangeSecondHalf = nil
        unsettled.removeAll()
        var failure: Errno?
        scan(root.raw, rootKey, .root, report: false, failure: &failure)
        if failure != nil { lostTrack = true } // the overflow just reported says it already
        for key in before where !tree.contains(key) { kernel.unwatch(key, root: root.raw) }
    }

    /// A path was deleted or moved away: a later create of it, or below it, is a new one.
    func settle(_ path: MountPath) {
        guard !reportedByScan.isEmpty else { return }
        reportedByScan = reportedByScan.filter { !$0.key.isWithin(path) }
    }
}

private enum WatchNames {
    static let dot = FileName(CollectionOfOne(UInt8(ascii: ".")))!
    static let dotDot = FileName([UInt8(ascii: "."), UInt8(ascii: ".")])!
}
