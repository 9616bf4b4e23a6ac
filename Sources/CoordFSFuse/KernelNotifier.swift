import CFuse
import Dispatch
import Glibc
import Synchronization
import CoordFSCore

/// Tells the kernel to drop what it cached about a node, from a serial queue of its own, and
/// keeps track of the nodes whose file pages the kernel may hold.
///
/// Never inline in a request: an invalidation may wait in the kernel for a page or directory
/// lock that a request in flight holds until one of our workers answers it (a create waiting
/// for a claim that the committing owner releases only after this request returns).
/// Sendable: the session pointer is only used for notifications, and set once behind its
/// lock; the set of paged nodes is behind its own. Both locks are leaves.
public final class KernelNotifier: KernelCache {
    /// The session pointer, which libfuse lets any thread use for notifications.
    private struct Session: @unchecked Sendable { let raw: OpaquePointer }
    /// Nil until the session exists (the mount is made before it): the kernel has nothing
    /// cached before then, so there is nothing to tell it.
    private let session = Mutex<Session?>(nil)
    private let queue = DispatchQueue(label: "coordfs.kernel-notifier")
    /// Nodes the kernel may hold file pages of. The kernel fills a page only by a READ we
    /// answer, except through a handle that writes through the page cache; so a node read
    /// since its last invalidation, or opened by such a handle, is here. Guards nothing else.
    private let pagedNodes = Mutex<Set<UInt64>>([])

    public init() {}

    /// From now on, notifications reach the kernel through `session`.
    func attach(_ session: OpaquePointer) {
        self.session.withLock { $0 = Session(raw: session) }
    }

    /// Runs `body` with the session, when there is one.
    private func withSession(_ body: (OpaquePointer) -> Void) {
        if let session = session.withLock({ $0 }) { body(session.raw) }
    }

    /// The kernel may now hold pages of the node: it asked to read it, or a handle that
    /// writes through the page cache opened or wrote.
    func notePages(of id: UInt64) {
        pagedNodes.withLock { _ = $0.insert(id) }
    }

    /// Whether the kernel may hold pages of the node. False means that nothing was read of it
    /// since its last invalidation: a commit has no stale pages to drop.
    public func mayHoldPages(of id: UInt64) -> Bool {
        pagedNodes.withLock { $0.contains(id) }
    }

    /// The kernel forgot the node, and its pages with it.
    func forgetPages(of id: UInt64) {
        pagedNodes.withLock { _ = $0.remove(id) }
    }

    /// Drops the node's cached attributes and pages: the next reader sees the committed version.
    public func invalidateContents(of id: UInt64, then: (@Sendable () -> Void)?) {
        queue.async { [self] in
            // Before the kernel drops the pages: a READ answered from now on marks it again,
            // and one answered earlier filled a page the invalidation will find.
            pagedNodes.withLock { _ = $0.remove(id) }
            withSession { _ = fuse_lowlevel_notify_inval_inode($0, fuse_ino_t(id), 0, 0) }
            then?()
        }
    }

    /// Drops the node's cached attributes and its pages from `offset` on (the end an append
    /// grew: a reader may have been shown zeros past the committed end there).
    public func invalidateContents(of id: UInt64, from offset: Int64) {
        queue.async { [self] in
            pagedNodes.withLock { _ = $0.remove(id) }
            withSession { _ = fuse_lowlevel_notify_inval_inode($0, fuse_ino_t(id), off_t(offset), 0) }
        }
    }

    /// Drops the node's cached attributes only (a change of mode, owner, times or links).
    public func invalidateAttributes(of id: UInt64) {
        queue.async { [self] in
            withSession { _ = fuse_lowlevel_notify_inval_inode($0, fuse_ino_t(id), -1, 0) }
        }
    }

    /// Tells the kernel that `name` in a directory, which stood for `child`, is gone: it drops
    /// the entry and, unless other links remain, marks the inode deleted (a directory's cached
    /// subtree goes with it), as if the removal had been made through the mount.
    public func notifyDeleted(directory id: UInt64, child: UInt64, name: FileName) {
        queue.async { [self] in
            withSession { session in
                name.withCString { cName in
                    // Refused when the kernel still holds entries under a directory: then the entry
                    // is dropped at least, and the kernel finds the directory gone at its next lookup.
                    if fuse_lowlevel_notify_delete(session, fuse_ino_t(id), fuse_ino_t(child), cName, name.count) != 0 {
                        _ = fuse_lowlevel_notify_inval_entry(session, fuse_ino_t(id), cName, name.count)
                    }
                }
            }
        }
    }

    /// Drops the kernel's entry for `name` in a directory, positive or negative.
    public func invalidateEntry(directory id: UInt64, name: FileName) {
        queue.async { [self] in invalidateEntryNow(directory: id, name: name) }
    }

    /// `invalidateEntry` on this thread, for a thread of its own that may wait in the kernel
    /// (`NodeEvictor`), never a request's.
    func invalidateEntryNow(directory id: UInt64, name: FileName) {
        withSession { session in
            _ = name.withCString { fuse_lowlevel_notify_inval_entry(session, fuse_ino_t(id), $0, name.count) }
        }
    }

    /// Waits until every notification queued so far was delivered (at unmount).
    public func drain() {
        queue.sync {}
    }
}
