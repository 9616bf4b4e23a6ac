import Glibc
import Synchronization
import SystemPackage

// Changes made directly in the backing, as the watch of the backing reports them (see
// CoordFSCore/Watch): the node table follows them, the kernel drops what it cached of them,
// and subscribers and presenters hear of them as they would of a change through the mount,
// marked as made outside it.
//
// Everything runs on the watch's thread, one change after another in the kernel's order. The
// kernel is told through `KernelCache`, which queues (see there); the node table
// is updated here first, so a lookup that the invalidation prompts finds the new state.
extension CoordinatedMount {
    /// Applies what the watch saw, in order.
    public func applyOutsideChanges(_ batch: [ObservedChange]) {
        for observed in batch {
            // A peer daemon of the cluster on this machine, writing to the backing they share:
            // the caches follow it here as soon as the watch sees it, but its own event tells
            // the change (RemoteChanges.swift), so none is published here.
            let maker = observed.process?.pid ?? observed.foundInDirectoryMadeBy
            let fromPeer = cluster.map { cluster in maker.map { cluster.isPeerDaemon($0) } ?? false } ?? false
            logger.debug("a change behind the mount", metadata: ["change": "\(observed.change)", "pid": "\(observed.process?.pid ?? 0)"])
            let origin = EventOrigin(pid: observed.process?.pid ?? 0, uid: observed.process?.uid ?? EventOrigin.unknownUID,
                                     processName: observed.process?.name ?? "", isOutside: true)
            func publish(_ kind: ChangeKind, path: MountPath, destination: MountPath? = nil, isDirectory: Bool,
                         origin: EventOrigin, size: @autoclosure () -> Int64?) {
                guard !fromPeer else { return }
                self.publish(kind, path: path, destination: destination, isDirectory: isDirectory, origin: origin, size: size())
            }
            switch observed.change {
            case .created(let path, let isDirectory):
                let status = followCreated(path, isDirectory: isDirectory)
                publish(.created, path: path, isDirectory: isDirectory, origin: origin,
                        size: isDirectory ? nil : status.map { Int64($0.st_size) })
            case .deleted(let path, let isDirectory):
                // A peer's delete went through its mount, which told the shared version index.
                if !fromPeer { versions?.deletedBehind(path) }
                outsideDeleted(path)
                publish(.deleted, path: path, isDirectory: isDirectory, origin: origin, size: nil)
            case .contentsChanged(let path):
                if isUnnamedTemp(path) { continue }
                if let node = nodes.node(at: path) { kernel.invalidateContents(of: node.id) }
                let status = backingStatus(of: path)
                if let status, status.st_mode & S_IFMT == S_IFDIR { continue } // its entries changed: told by their own events
                publish(.changed, path: path, isDirectory: false, origin: origin, size: status.map { Int64($0.st_size) })
            case .attributesChanged(let path, let isDirectory):
                if isUnnamedTemp(path) { continue }
                if let node = nodes.node(at: path) { kernel.invalidateAttributes(of: node.id) }
                publish(.attributes, path: path, isDirectory: isDirectory, origin: origin, size: nil)
            case .moved(let source, let destination, let isDirectory):
                // The versions follow the file, as for a move through the mount (a peer's
                // move went through its mount, which moved them in the shared index).
                if !fromPeer { versions?.moved(from: source, to: destination) }
                outsideMoved(from: source, to: destination)
                publish(.moved, path: source, destination: destination, isDirectory: isDirectory, origin: origin,
                        size: isDirectory ? nil : backingStatus(of: destination).map { Int64($0.st_size) })
            case .overflow:
                outsideLost()
            }
        }
    }

    /// A name appeared (or now names another object): the node table and the kernel forget
    /// what they knew of the name. Returns the backing's attributes of it now.
    @discardableResult
    func followCreated(_ path: MountPath, isDirectory: Bool) -> stat? {
        guard let name = path.name, let parentPath = path.parent else { return nil }
        let status = backingStatus(of: path)
        if let directory = nodes.node(at: parentPath) {
            // A node still known by the name stands for what was there before (removed and
            // made again faster than the watch reported it).
            if let stale = nodes.node(named: name, in: directory), status.map({ FileIdentity($0) }) != stale.identity {
                nodes.removedNameBehind(name, in: directory)
            }
            kernel.invalidateEntry(directory: directory.id, name: name)
            kernel.invalidateContents(of: directory.id)
        }
        // A new hard link changes the link count the file's other names show.
        if !isDirectory, let status, status.st_nlink > 1, let linked = nodes.node(identity: FileIdentity(status)) {
            kernel.invalidateAttributes(of: linked.id)
        }
        return status
    }

    /// The name is gone from the backing: the node known by it loses it, and the kernel is told
    /// of a deletion (an entry drop only, when the file keeps other links).
    func outsideDeleted(_ path: MountPath) {
        guard let name = path.name, let parentPath = path.parent, let directory = nodes.node(at: parentPath) else { return }
        // Reported late: the name is back, for the node that stands for it (an open of this
        // host's followed another host's commit to it, Operations+Open.swift).
        if let known = nodes.node(named: name, in: directory), backingStatus(of: path).map({ FileIdentity($0) }) == known.identity {
            kernel.invalidateEntry(directory: directory.id, name: name)
            kernel.invalidateContents(of: directory.id)
            return
        }
        if let removed = nodes.removedNameBehind(name, in: directory) {
            if removed.isDirectory || nodes.isUnlinked(removed) {
                kernel.notifyDeleted(directory: directory.id, child: removed.id, name: name)
            } else {
                kernel.invalidateEntry(directory: directory.id, name: name)
                kernel.invalidateAttributes(of: removed.id)
            }
        } else {
            kernel.invalidateEntry(directory: directory.id, name: name)
        }
        kernel.invalidateContents(of: directory.id)
    }

    /// The node moves with its name; whatever the destination named loses its name. Processes
    /// that have the moved item (or anything under a moved directory) open keep using it: the
    /// nodes hold descriptors, not paths.
    func outsideMoved(from source: MountPath, to destination: MountPath) {
        guard let sourceName = source.name, let destinationName = destination.name,
              let sourceParent = source.parent, let destinationParent = destination.parent else { return }
        let sourceDirectory = nodes.node(at: sourceParent)
        let destinationDirectory = nodes.node(at: destinationParent)
        // A node that stands for what the destination names now already followed the move
        // (reported late: an open of this host's found it first) and keeps the name.
        if let destinationDirectory, let known = nodes.node(named: destinationName, in: destinationDirectory),
           backingStatus(of: destination).map({ FileIdentity($0) }) == known.identity {
            if let sourceDirectory, let stale = nodes.node(named: sourceName, in: sourceDirectory), stale !== known,
               backingStatus(of: source).map({ FileIdentity($0) }) != stale.identity {
                nodes.removedNameBehind(sourceName, in: sourceDirectory)
            }
        } else {
            if let destinationDirectory, let replaced = nodes.removedNameBehind(destinationName, in: destinationDirectory) {
                // Replaced by the move: gone from the tree, alive for whoever has it open.
                kernel.invalidateAttributes(of: replaced.id)
            }
            if let sourceDirectory, let moved = nodes.node(named: sourceName, in: sourceDirectory) {
                if let destinationDirectory {
                    nodes.moved(moved, from: (sourceDirectory, sourceName), to: destinationDirectory, name: destinationName)
                } else {
                    nodes.removedNameBehind(sourceName, in: sourceDirectory) // to a directory the kernel has not looked up
                }
            }
        }
        for (directory, name) in [(sourceDirectory, sourceName), (destinationDirectory, destinationName)] {
            guard let directory else { continue }
            kernel.invalidateEntry(directory: directory.id, name: name)
            kernel.invalidateContents(of: directory.id)
        }
    }

    /// The watch lost changes: anything may have changed. Every name the node table knows is
    /// checked against the backing, every cached entry and attribute is dropped (and the
    /// negative entries the kernel may hold for names that exist now), and every subscriber
    /// is told to rescan.
    private func outsideLost() {
        logger.warning("the watch of the backing lost changes (its queue overflowed); dropping every cache of the mount")
        dropEveryCache()
    }

    /// Anything may have changed: see `outsideLost`.
    func dropEveryCache() {
        var directories: [UInt64: Node] = [NodeTable.rootID: nodes.root]
        for (node, directory, name) in nodes.namedNodes() {
            let status = try? Syscall.stat(at: directory.directory, name)
            if status.map({ FileIdentity($0) }) != node.identity {
                // With other hosts, a node follows its name where it can (FollowingNames.swift).
                let followed = authority.hosts != nil && status != nil && followReplacement(of: node, in: directory, named: name)
                if !followed { nodes.removedNameBehind(name, in: directory) }
            }
            kernel.invalidateEntry(directory: directory.id, name: name)
            kernel.invalidateContents(of: node.id)
            if node.isDirectory { directories[node.id] = node }
        }
        // Names made meanwhile that the kernel may hold a negative entry for.
        for directory in directories.values {
            kernel.invalidateContents(of: directory.id)
            for name in (try? Syscall.directoryNames(directory.directory)) ?? [] where nodes.node(named: name, in: directory) == nil {
                kernel.invalidateEntry(directory: directory.id, name: name)
            }
        }
        events.resynchronizeAll()
    }

    /// Whether a change is about an unnamed file (`O_TMPFILE`, a save's temp): inotify reports
    /// writes to one and changes of its mode under the stand-in name "#INODE" in its
    /// directory, which no lookup finds. fanotify names the mount as their maker instead.
    func isUnnamedTemp(_ path: MountPath) -> Bool {
        guard let name = path.name?.bytes, name.count > 1, name[0] == UInt8(ascii: "#"),
              name.dropFirst().allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return false }
        return backingStatus(of: path) == nil
    }
}
