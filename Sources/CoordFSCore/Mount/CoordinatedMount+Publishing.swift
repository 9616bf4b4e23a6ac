import Glibc
/// Who caused a change, read from a request before it is answered (after that the request is
/// gone). Handles keep the one of their open, for changes that land at a later release.
public struct ChangeOrigin: Sendable {
    public let pid: Int32
    public let uid: UInt32

    public init(pid: Int32, uid: UInt32) {
        self.pid = pid
        self.uid = uid
    }
}

// The fan-out of a finished change: the event hub (subscribers), the cluster's queue (other
// hosts, for this host's own changes only) and presenters (after-the-fact notices).
extension CoordinatedMount {
    /// Reports a finished change: an event for subscribers, and the matching after-the-fact
    /// notice for presenters (not for the process tree that made the change). Call it once the
    /// change is in the backing and before the reply, so that a subscriber that sees the event
    /// and looks finds the change, and events keep the order in which the claims let the
    /// changes happen. `size` is only evaluated for files.
    public func publish(_ kind: ChangeKind, origin: ChangeOrigin, path: MountPath?, destination: MountPath? = nil, isDirectory: Bool,
                        size: @autoclosure () -> Int64?) {
        guard let path else { return } // reachable only through a descriptor: it has no name to report
        let name = processes.name(of: origin.pid) ?? ""
        publish(kind, path: path, destination: destination, isDirectory: isDirectory,
                origin: EventOrigin(pid: origin.pid, uid: origin.uid, processName: name), size: isDirectory ? nil : size())
    }

    /// Tells subscribers and presenters of a version kept, removed or resolved.
    func publishVersion(_ notice: VersionNotice) {
        // Expiry is no process's doing: pid 0, so that every presenter hears of it.
        let origin = notice.origin.map { EventOrigin(pid: $0.pid, uid: $0.uid, processName: $0.process ?? "") }
            ?? EventOrigin(pid: 0, uid: geteuid(), processName: "coordfs")
        publish(notice.kind, path: notice.path, isDirectory: false, origin: origin, size: notice.size, version: notice.version)
    }

    /// `publish` with the origin in full: also for changes made behind the mount or by other hosts.
    public func publish(_ kind: ChangeKind, path: MountPath, destination: MountPath? = nil, isDirectory: Bool, origin: EventOrigin, size: Int64?,
                        version: Int64? = nil) {
        // Only this host's own changes go to the cluster (its commits, and the versions it
        // kept or removed in the store the hosts share): a change seen behind the mount, or
        // applied from another host, is the backing's or that host's to tell.
        func toHub() -> ChangeEvent {
            events.publish(kind, path: path, destination: destination, isDirectory: isDirectory, origin: origin, size: size, version: version)
        }
        if let cluster, !origin.isOutside, origin.host == nil {
            clusterPublishing.withLock { _ in cluster.publish(toHub()) }
        } else {
            _ = toHub()
        }
        guard !presenters.isEmpty else { return }
        // Another host's pid names no process here: every presenter is told.
        let maker = origin.host == nil ? origin.pid : 0
        switch kind {
        case .created, .changed, .attributes, .conflict: presenters.notify(.didChange, path: path, origin: maker)
        case .deleted: presenters.notify(.didDelete, path: path, origin: maker)
        case .moved: presenters.notify(.didMove, path: path, destination: destination, origin: maker)
        case .versionAdded: presenters.notify(.didGainVersion, path: path, version: version, origin: maker)
        case .versionRemoved: presenters.notify(.didLoseVersion, path: path, version: version, origin: maker)
        case .conflictResolved: presenters.notify(.didResolveConflict, path: path, version: version, origin: maker)
        }
    }
}
