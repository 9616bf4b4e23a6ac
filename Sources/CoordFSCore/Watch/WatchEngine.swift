import Glibc
import Synchronization
import SystemPackage

/// What the watcher's thread and its owner share.
///
/// Sendable: atomics, and a descriptor fixed at init.
final class WatchControl: Sendable {
    let stopped = Atomic<Bool>(false)
    /// How many directories are watched, as of the last batch.
    let directories = Atomic<Int>(0)
    /// Written to wake the thread from its poll; closed when both sides let go.
    let wake: Int32

    init(wake: consuming OwnedDescriptor) {
        self.wake = wake.release()
    }

    deinit {
        close(wake)
    }
}

/// The state behind a watch and its one thread: the tree of watched directories, the moves
/// waiting for their other half, and the changes of the batch being read. Used by that thread
/// alone once started (and by `start` before).
final class WatchEngine<Kernel: KernelWatch> {
    let kernel: Kernel
    private let root: OwnedDescriptor
    private var tree = DirectoryTree<Kernel.Key>()
    private let ownChanges: OwnChanges
    private let ownPID = getpid()
    private let facts = ProcessFacts()

    /// Paths a scan of a new directory reported as created, each with the number of the read
    /// during which it was scanned: their own create events, if still queued, are not reported
    /// again. An entry goes when its event comes; when a delete or a move away of it or above it
    /// shows that a later create is a new one; and once a later read has emptied the queue (any
    /// event made before the scan has been read then).
    private var reportedByScan: [MountPath: Int] = [:]
    /// The number of the read whose events are being handled.
    private var currentRead = 0
    /// inotify's IN_MOVED_FROM, until the next event tells whether its IN_MOVED_TO follows.
    private var pendingMove: (key: Kernel.Key, name: FileName, isDirectory: Bool, cookie: UInt32)?
    /// Directories whose subdirectories may not all be watched under their present names, to
    /// be listed again after each batch until that works: a new directory could not be opened
    /// at the path the tree gave it (it, or a directory above it, moved meanwhile, in an event
    /// not yet handled), or a move was matched by names alone (inotify). The flag: whether what
    /// the listing finds in a directory new to the watch is reported as created.
    private var unsettled: [Kernel.Key: Bool] = [:]
    /// The second move of two directories that traded places, which the tree shows already.
    private var exchangeSecondHalf: (from: MountPath, to: MountPath)?
    /// A directory could not be watched (a limit): reported as one overflow per batch.
    private var lostTrack = false
    private var batch: [ObservedChange] = []
    /// Who made the changes of this batch, read from /proc once per process.
    private var processes: [Int32: OutsideProcess] = [:]

    /// Watches every directory under `root` (open as a directory). Fails with the errno of the
    /// first directory that could not be watched for a reason other than being gone or closed
    /// to this process.
    init(kernel: Kernel, root: consuming OwnedDescriptor, ownChanges: OwnChanges) throws(Errno) {
        self.kernel = kernel
        self.root = root
        self.ownChanges = ownChanges
        let key = try kernel.watch(directory: self.root.raw)
        tree.setRoot(key)
        var failure: Errno?
        scan(self.root.raw, key, .root, report: false, failure: &failure)
        if let failure { throw failure }
    }

    var watchedDirectories: Int { tree.count }

    // MARK: Reading

    /// The shortest time between a read that held only the mount's own changes and the next.
    /// The kernel queues the mount's own changes as it does anyone's, one event per request
    /// the mount serves: waking for each would take the CPU from the requests that make them.
    /// So after such a read the thread lets them gather and takes them in one read; after a
    /// read that reported something (and after a quiet spell) it reads at once, so a change
    /// behind the mount waits at most this long behind a stream of the mount's own.
    static var readInterval: Duration { .milliseconds(5) }

    /// Waits until `readInterval` has passed since `last` when `onlyOwn` (the last read held
    /// nothing to report), then notes now as the last read.
    private func pace(_ last: inout ContinuousClock.Instant, onlyOwn: Bool) {
        let clock = ContinuousClock()
        let due = last + Self.readInterval
        if onlyOwn, clock.now < due {
            let wait = due - clock.now
            let (seconds, attoseconds) = wait.components
            var request = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
            var remaining = timespec()
            while nanosleep(&request, &remaining) != 0 && errno == EINTR { request = remaining }
        }
        last = clock.now
    }

    /// Reads and reports until `control` is stopped or the descriptor fails.
    func run(control: WatchControl, report: ([ObservedChange]) -> Void) {
        var lastRead = ContinuousClock.now - Self.readInterval
        var lastReadOnlyOwn = false
        let capacity = 64 * 1024
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 8)
        defer { buffer.deallocate() }
        var events: [(event: KernelEvent<Kernel.Key>, pid: Int32?)] = []
        while !control.stopped.load(ordering: .acquiring) {
            let ready: [Int]
            do {
                ready = try Syscall.waitReadable([kernel.descriptor, control.wake], timeout: -1)
            } catch {
                report([ObservedChange(.overflow)])
                return
            }
            if ready.contains(1) { return }
            pace(&lastRead, onlyOwn: lastReadOnlyOwn)
            var count: Int
            do {
                count = try Syscall.readAvailable(kernel.descriptor, into: buffer)
            } catch {
                report([ObservedChange(.overflow)]) // the watch ends: say that anything may change from now on
                return
            }
            while count > 0 {
                currentRead += 1
                events.removeAll(keepingCapacity: true)
                kernel.decode(UnsafeRawBufferPointer(rebasing: buffer[..<count]), into: &events)
                for (event, pid) in events { take(event, pid: pid) }
                // A read that left room for more emptied the queue (records are far shorter than that).
                if count <= capacity - 4096, !reportedByScan.isEmpty {
                    reportedByScan = reportedByScan.filter { $0.value == currentRead }
                }
                count = 0
                // A move's first half ends the read: its second is likely on its way. Wait for it briefly.
                if pendingMove != nil, (try? Syscall.waitReadable([kernel.descriptor], timeout: 5))?.isEmpty == false {
                    count = (try? Syscall.readAvailable(kernel.descriptor, into: buffer)) ?? 0
                }
            }
            if let move = pendingMove {
                pendingMove = nil
                take(.moved(from: (move.key, move.name), to: nil, isDirectory: move.isDirectory, object: nil), pid: nil)
            }
            settleDirectories()
            control.directories.store(tree.count, ordering: .relaxed)
            let changes = batch
            batch.removeAll(keepingCapacity: true)
            processes.removeAll(keepingCapacity: true)
            lostTrack = false
            lastReadOnlyOwn = changes.isEmpty
            if !changes.isEmpty { report(changes) }
        }
    }

    /// One event, after pairing inotify's move halves.
    func take(_ event: KernelEvent<Kernel.Key>, pid: Int32?) {
        if let move = pendingMove {
            pendingMove = nil
            if case .movedTo(let key, let name, let isDirectory, let cookie) = event, cookie == move.cookie {
                handle(.moved(from: (move.key, move.name), to: (key, name), isDirectory: isDirectory, object: nil), pid: pid)
                return
            }
            handle(.moved(from: (move.key, move.name), to: nil, isDirectory: move.isDirectory, object: nil), pid: nil)
        }
        switch event {
        case .movedFrom(let key, let name, let isDirectory, let cookie):
            pendingMove = (key, name, isDirectory, cookie)
        case .movedTo(let key, let name, let isDirectory, _):
            handle(.moved(from: nil, to: (key, name), isDirectory: isDirectory, object: nil), pid: pid)
        default:
            handle(event, pid: pid)
        }
    }

    // MARK: Meaning

    private func handle(_ event: KernelEvent<Kernel.Key>, pid: Int32?) {
        switch event {
        case .overflow:
            emit(.overflow, pid: nil)
            resynchronize()
        case .created(let key, let name, let isDirectory):
            guard let path = visiblePath(key, name) else { return }
            if reportedByScan.removeValue(forKey: path) == nil {
                report(.created(path, isDirectory: isDirectory), paths: [path], pid: pid)
            }
            if isDirectory, tree.child(of: key, named: name) == nil {
                // What the scan finds in a directory the mount made is its own too, where only
                // the pid can tell; where the mount notes paths, each entry is judged by its own.
                follow(path, key, name, reportContents: !Kernel.namesProcesses || !isOwn([path], pid: pid), madeBy: pid)
            }
        case .deleted(let key, let name, let isDirectory):
            guard let path = visiblePath(key, name) else { return }
            if let child = tree.child(of: key, named: name) { forget(child) }
            settle(path)
            report(.deleted(path, isDirectory: isDirectory), paths: [path], pid: pid)
        case .contentsChanged(let key, let name):
            guard let path = eventPath(key, name) else { return }
            report(.contentsChanged(path), paths: [path], pid: pid)
        case .attributesChanged(let key, let name, let isDirectory):
            guard let path = eventPath(key, name) else { return }
            report(.attributesChanged(path, isDirectory: name == nil || isDirectory), paths: [path], pid: pid)
        case .moved(let from, let to, let isDirectory, let object):
            move(from: from, to: to, isDirectory: isDirectory, object: object, pid: pid)
        case .gone(let key):
            guard tree.contains(key) else { return }
            if key == tree.root {
                tree.forget(key)
                emit(.deleted(.root, isDirectory: true), pid: nil)
            } else {
                forget(key)
            }
        case .movedFrom, .movedTo:
            break // paired in `take`
        }
    }

    private func move(from: (Kernel.Key, FileName)?, to: (Kernel.Key, FileName)?, isDirectory: Bool, object: Kernel.Key?, pid: Int32?) {
        // A side is outside the watch when its directory is unknown; a reserved side is the
        // mount's own staging, never reported.
        let fromParent = from.flatMap { tree.path(of: $0.0) }
        let toParent = to.flatMap { tree.path(of: $0.0) }
        let fromReserved = from.map { StagingName.isReserved(name: $0.1, inRoot: fromParent?.isRoot ?? false) } ?? false
        let toReserved = to.map { StagingName.isReserved(name: $0.1, inRoot: toParent?.isRoot ?? false) } ?? false
        let source = fromReserved ? nil : from.flatMap { from in fromParent.map { (from.0, from.1, $0.appending(from.1)) } }
        let target = toReserved ? nil : to.flatMap { to in toParent.map { (to.0, to.1, $0.appending(to.1)) } }
        // The moved directory: by its own key where the kernel gives one (not watched: a new
        // one to follow), else by its old name.
        let moving: Kernel.Key? = if !isDirectory { nil } else if let object { tree.contains(object) ? object : nil }
            else { from.flatMap { tree.child(of: $0.0, named: $0.1) } }

        if let source { settle(source.2) }
        if let target { settle(target.2) }
        if isDirectory, object == nil {
            // Names alone may have matched the wrong directory (one made again under the old
            // name meanwhile): both parents are checked against the disk after the batch.
            if let source { unsettled[source.0] = unsettled[source.0] ?? false }
            if let target { unsettled[target.0] = unsettled[target.0] ?? false }
        }
        switch (source, target) {
        case let (source?, target?):
            if let half = exchangeSecondHalf, half.from == source.2, half.to == target.2 {
                exchangeSecondHalf = nil // the tree was set right by the first half
            } else if let moving, let previous = tree.child(of: target.0, named: target.1), previous != moving,
                      identify(source.2) == previous {
                // The directory the move replaced now stands where the moved one was: an exchange.
                tree.exchange(moving, previous)
                exchangeSecondHalf = (target.2, source.2)
            } else if let moving {
                tree.place(moving, in: target.0, as: target.1)
            } else if isDirectory {
                follow(target.2, target.0, target.1, reportContents: false)
            }
            report(.moved(from: source.2, to: target.2, isDirectory: isDirectory), paths: [source.2, target.2], pid: pid)
        case let (source?, nil):
            if let moving { forget(moving) }
            if !toReserved {
                report(.deleted(source.2, isDirectory: isDirectory), paths: [source.2], pid: pid)
            }
        case let (nil, target?):
            if let moving {
                tree.place(moving, in: target.0, as: target.1) // from a reserved name: still the same directory
            } else if isDirectory, tree.child(of: target.0, named: target.1) == nil {
                follow(target.2, target.0, target.1, reportContents: false)
            }
            if !fromReserved {
                report(.created(target.2, isDirectory: isDirectory), paths: [target.2], pid: pid)
            }
        case (nil, nil):
            if let moving { forget(moving) }
        }
    }

    /// The path of `name` in the watched directory `key`; nil when the directory is unknown or
    /// the name is reserved.
    private func visiblePath(_ key: Kernel.Key, _ name: FileName) -> MountPath? {
        guard let parent = tree.path(of: key),
              !StagingName.isReserved(name: name, inRoot: parent.isRoot) else { return nil }
        return parent.appending(name)
    }

    /// The path an event on `name` in `key`, or on `key` itself, is about; nil when it is not
    /// to be reported (an event on a subdirectory itself that its parent reports too).
    private func eventPath(_ key: Kernel.Key, _ name: FileName?) -> MountPath? {
        if let name { return visiblePath(key, name) }
        if Kernel.selfEventsRepeatParent, key != tree.root { return nil }
        return tree.path(of: key)
    }

    // MARK: Following directories

    /// Watches the new directory at `path` (`name` in `parent`) and what lies under it.
    /// `madeBy`: the process that made the directory, where the watch names it: what the scan
    /// finds is told as found in a directory it made (`ObservedChange.foundInDirectoryMadeBy`).
    private func follow(_ path: MountPath, _ parent: Kernel.Key, _ name: FileName, reportContents: Bool, madeBy: Int32? = nil) {
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
    private func identify(_ path: MountPath) -> Kernel.Key? {
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
    private func settleDirectories() {
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
    private func scan(_ directory: Int32, _ key: Kernel.Key, _ path: MountPath, report: Bool, madeBy: Int32? = nil,
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
    private func forget(_ key: Kernel.Key) {
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
    private func resynchronize() {
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
    private func settle(_ path: MountPath) {
        guard !reportedByScan.isEmpty else { return }
        reportedByScan = reportedByScan.filter { !$0.key.isWithin(path) }
    }

    // MARK: Reporting

    /// Whether a change on `paths` was the mount's own: by the pid where the kernel names
    /// processes, else by what the mount noted.
    private func isOwn(_ paths: [MountPath], pid: Int32?) -> Bool {
        if Kernel.namesProcesses { return pid == ownPID }
        return paths.contains { ownChanges.isOwn($0) }
    }

    private func report(_ change: BackingChange, paths: [MountPath], pid: Int32?, foundInDirectoryMadeBy maker: Int32? = nil) {
        guard !isOwn(paths, pid: pid) else { return }
        emit(change, pid: pid, foundInDirectoryMadeBy: maker)
    }

    private func emit(_ change: BackingChange, pid: Int32?, foundInDirectoryMadeBy maker: Int32? = nil) {
        let observed = ObservedChange(change, process: pid.map(process), foundInDirectoryMadeBy: maker)
        if case .contentsChanged = change, batch.last == observed { return } // one write after another
        batch.append(observed)
    }

    private func process(_ pid: Int32) -> OutsideProcess {
        if let known = processes[pid] { return known }
        let found = OutsideProcess(pid: pid, uid: ProcessFacts.owner(of: pid), name: facts.name(of: pid))
        processes[pid] = found
        return found
    }
}

private enum WatchNames {
    static let dot = FileName(CollectionOfOne(UInt8(ascii: ".")))!
    static let dotDot = FileName([UInt8(ascii: "."), UInt8(ascii: ".")])!
}
