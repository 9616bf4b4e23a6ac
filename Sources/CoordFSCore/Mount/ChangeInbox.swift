import Synchronization

/// Hands changes made elsewhere to the mount once it exists: the watch of the backing and
/// the cluster's events start before it (whether the watch starts decides the mount's cache
/// timeouts; the cluster's events link is one of the mount's constants). What they report
/// before then concerns nobody: no kernel cache, no subscriber, no node.
///
/// Sendable: the mount is behind its lock, a leaf taken only to read or set it.
public final class ChangeInbox: Sendable {
    private let mount = Mutex<CoordinatedMount?>(nil)

    public init() {}

    /// From now on, changes go to `mount`.
    public func deliver(to mount: CoordinatedMount) {
        self.mount.withLock { $0 = mount }
    }

    /// What the watch of the backing saw, in order.
    public func applyOutside(_ batch: [ObservedChange]) {
        mount.withLock { $0 }?.applyOutsideChanges(batch)
    }

    /// What other hosts committed, in the cluster's order.
    public func applyRemote(_ batch: RemoteBatch) {
        mount.withLock { $0 }?.applyRemoteChanges(batch)
    }
}
