import Glibc

// Changes other hosts of the cluster committed (`--cluster`), as the cluster's events table
// tells them (CoordFSCluster/Events): applied as changes made behind the mount are
// (CoordinatedMount+OutsideChanges.swift), since that is what they are to this host: the node table follows,
// the kernel drops what it cached, and subscribers and presenters hear of them, marked with
// the origin host rather than as made outside.
//
// Everything runs on the cluster's event thread, one change after another in the cluster's order.

/// What the mount needs of the cluster's events, without depending on the cluster's module.
public struct ClusterEventLink: Sendable {
    /// Queues a change this host committed for the other hosts (never waits).
    public var publish: @Sendable (ChangeEvent) -> Void
    /// Whether `pid` is a live peer daemon of the cluster on this machine.
    public var isPeerDaemon: @Sendable (Int32) -> Bool

    public init(publish: @escaping @Sendable (ChangeEvent) -> Void, isPeerDaemon: @escaping @Sendable (Int32) -> Bool) {
        self.publish = publish
        self.isPeerDaemon = isPeerDaemon
    }
}

extension CoordinatedMount {
    /// Applies what other hosts committed, in the cluster's order. Subscribers hear of changes
    /// only once the kernel has dropped what it cached of them (the kernel's queue drained:
    /// this thread holds no lock and no claim, so the wait ends), so a reader prompted by an
    /// event reads the new state.
    public func applyRemoteChanges(_ batch: RemoteBatch) {
        var untold: [RemoteChange] = []
        func tell() {
            guard !untold.isEmpty else { return }
            kernel.drain()
            for change in untold {
                publish(change.kind, path: change.path, destination: change.destination, isDirectory: change.isDirectory,
                        origin: change.origin, size: change.size, version: change.version)
            }
            untold.removeAll()
        }
        for item in batch.items {
            switch item {
            case .resync(let reason):
                tell()
                logger.warning("cluster: \(reason); dropping every cache of the mount, subscribers must rescan")
                dropEveryCache()
            case .change(let change):
                forget(change)
                untold.append(change)
            }
        }
        tell()
    }

    /// What this host cached of the change's items goes.
    private func forget(_ change: RemoteChange) {
        logger.debug("a change by another host", metadata: ["kind": "\(change.kind)", "path": "\(change.path)",
                                                            "host": "\(change.origin.host?.name ?? "")"])
        let path = change.path
        switch change.kind {
        case .created:
            followCreated(path, isDirectory: change.isDirectory)
        case .deleted:
            outsideDeleted(path)
        case .changed:
            remoteChanged(path)
        case .attributes:
            if let node = nodes.node(at: path) { kernel.invalidateAttributes(of: node.id) }
        case .moved:
            if let destination = change.destination { outsideMoved(from: path, to: destination) }
        case .conflict:
            // The other host kept a version beside the file: a name appeared there.
            if let kept = change.destination { followCreated(kept, isDirectory: false) }
        case .versionAdded, .versionRemoved, .conflictResolved:
            break // the hosts share the store and its index: only subscribers and presenters hear of it
        }
    }

    /// New content under `path`: a commit by rename put another file under the name (the node
    /// known by it follows the name, CoordinatedMount+FollowingNames.swift; where it cannot, the name is
    /// forgotten and the node stays with the old file, which its readers keep), or the file
    /// was written in place (its pages are dropped). Either way the next reader here reads
    /// the new bytes.
    private func remoteChanged(_ path: MountPath) {
        guard let name = path.name, let parentPath = path.parent, let directory = nodes.node(at: parentPath),
              let node = nodes.node(named: name, in: directory) else { return }
        let found = backingStatus(of: path)
        if found.map({ FileIdentity($0) }) != node.identity {
            if found != nil, followReplacement(of: node, in: directory, named: name) { return }
            followCreated(path, isDirectory: false)
            kernel.invalidateAttributes(of: node.id)
        } else {
            kernel.invalidateContents(of: node.id)
        }
    }
}
