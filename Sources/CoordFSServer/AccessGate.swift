import CoordFSCore

/// A connection's view of what its user may learn, with a cache of decisions about
/// directories. Events are shown when the user could list the directory that holds (or held)
/// the item: that is how they would see a name appear, change size or go. The cache is dropped
/// whenever the event hub reports that a directory was created, moved, deleted or had its
/// attributes changed, so a chmod through the mount takes effect for the very next event.
///
/// Loop-confined: used only on the server's event loop.
final class AccessGate {
    let access: any PathAccess
    let peer: PeerCredentials
    private let hub: EventHub
    private var cache: [MountPath: ReadAccess] = [:]
    private var epoch: UInt64

    init(access: any PathAccess, peer: PeerCredentials, hub: EventHub) {
        self.access = access
        self.peer = peer
        self.hub = hub
        self.epoch = hub.directoryChangeEpoch
    }

    /// Root reads everything; nothing needs to be checked.
    var seesEverything: Bool { peer.uid == 0 }

    /// A fresh decision (requests are rare; they are not cached).
    func readAccess(_ path: MountPath) -> ReadAccess {
        access.readAccess(path, uid: peer.uid, gid: peer.gid, pid: peer.pid)
    }

    /// Whether the user could change `path` (or make it): what a claim needs that holds back
    /// others' changes (a fresh decision, as for `readAccess`).
    func mayChange(_ path: MountPath) -> Bool {
        seesEverything || access.canWrite(path, uid: peer.uid, gid: peer.gid, pid: peer.pid)
    }

    /// Whether the user could see `path` in its directory's listing.
    func mayLearnAbout(_ path: MountPath) -> Bool {
        if seesEverything { return true }
        let directory = path.parent ?? .root
        let current = hub.directoryChangeEpoch
        if current != epoch {
            cache.removeAll(keepingCapacity: true)
            epoch = current
        }
        if let known = cache[directory] { return known != .notPermitted }
        let decision = readAccess(directory)
        if cache.count >= 4096 { cache.removeAll(keepingCapacity: true) }
        cache[directory] = decision
        return decision != .notPermitted
    }
}
