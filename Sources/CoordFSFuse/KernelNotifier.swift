import CFuse
import Dispatch
import Glibc

/// Tells the kernel to drop what it cached about a node, from a serial queue of its own.
///
/// Never inline in a request: an invalidation may wait in the kernel for a page or directory
/// lock that a request in flight holds until one of our workers answers it (a create waiting
/// for a claim that the committing owner releases only after this request returns).
/// Sendable: immutable; the session pointer is only used for notifications.
final class KernelNotifier: Sendable {
    /// The session pointer, which libfuse lets any thread use for notifications.
    private struct Session: @unchecked Sendable { let raw: OpaquePointer }
    private let session: Session
    private let queue = DispatchQueue(label: "coordfs.kernel-notifier")

    init(session: OpaquePointer) {
        self.session = Session(raw: session)
    }

    /// Drops the node's cached attributes and pages: the next reader sees the committed version.
    func invalidateContents(of id: UInt64, then: (@Sendable () -> Void)? = nil) {
        queue.async { [session] in
            _ = fuse_lowlevel_notify_inval_inode(session.raw, fuse_ino_t(id), 0, 0)
            then?()
        }
    }

    /// Drops the kernel's entry for `name` in a directory, positive or negative.
    func invalidateEntry(directory id: UInt64, name: String) {
        queue.async { [session] in
            _ = name.withCString { fuse_lowlevel_notify_inval_entry(session.raw, fuse_ino_t(id), $0, strlen($0)) }
        }
    }

    /// Waits until every notification queued so far was delivered (at unmount).
    func drain() {
        queue.sync {}
    }
}
