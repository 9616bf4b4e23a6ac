import Glibc
import Synchronization

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
