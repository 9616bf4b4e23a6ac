/// What the mount tells the kernel about what it may have cached: the FUSE session's
/// notifications (`KernelNotifier` in CoordFSFuse), or a recorder in tests. Node ids are the
/// node table's, which the kernel knows the nodes by.
///
/// Every call returns at once: a notification may wait in the kernel for a lock that a request
/// in flight holds until one of the mount's workers answers it, so implementations queue them.
public protocol KernelCache: Sendable {
    /// Whether the kernel may hold file pages of the node (false: nothing was read of it
    /// since its last invalidation, so a commit has no stale pages to drop).
    func mayHoldPages(of id: UInt64) -> Bool
    /// Drops the node's cached attributes and pages; `then` runs once the kernel has.
    func invalidateContents(of id: UInt64, then: (@Sendable () -> Void)?)
    /// Drops the node's cached attributes and its pages from `offset` on (an append's old end).
    func invalidateContents(of id: UInt64, from offset: Int64)
    /// Drops the node's cached attributes only.
    func invalidateAttributes(of id: UInt64)
    /// Drops the kernel's entry for `name` in a directory, positive or negative.
    func invalidateEntry(directory id: UInt64, name: FileName)
    /// `name` in a directory, which stood for `child`, is gone, as if removed through the mount.
    func notifyDeleted(directory id: UInt64, child: UInt64, name: FileName)
    /// Waits until every notification queued so far was delivered.
    func drain()
}

extension KernelCache {
    public func invalidateContents(of id: UInt64) {
        invalidateContents(of: id, then: nil)
    }
}
