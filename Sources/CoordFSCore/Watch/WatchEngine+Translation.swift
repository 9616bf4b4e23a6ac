import Glibc

// What each kernel event means: the changes it reports (with the mount's own left out)
// and what it does to the tree of watched directories.
extension WatchEngine {
    func handle(_ event: KernelEvent<Kernel.Key>, pid: Int32?) {
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

    // MARK: Reporting

    /// Whether a change on `paths` was the mount's own: by the pid where the kernel names
    /// processes, else by what the mount noted.
    private func isOwn(_ paths: [MountPath], pid: Int32?) -> Bool {
        if Kernel.namesProcesses { return pid == ownPID }
        return paths.contains { ownChanges.isOwn($0) }
    }

    func report(_ change: BackingChange, paths: [MountPath], pid: Int32?, foundInDirectoryMadeBy maker: Int32? = nil) {
        guard !isOwn(paths, pid: pid) else { return }
        emit(change, pid: pid, foundInDirectoryMadeBy: maker)
    }

    func emit(_ change: BackingChange, pid: Int32?, foundInDirectoryMadeBy maker: Int32? = nil) {
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
