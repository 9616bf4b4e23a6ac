import Synchronization

/// The paths the mount itself changed a moment ago, for a watch of the backing that cannot
/// tell who made a change (inotify names no process): an event on such a path is taken for
/// the mount's own, whose event and cache invalidation the operation did already.
///
/// The price, documented in the README: on that path, a change made behind the mount to a
/// name within `memory` of a change through the mount to the same name may pass unreported
/// (its caches are dropped all the same). fanotify names the process, and then this stays off.
///
/// Sendable: the table is behind its lock; the switch is an atomic.
public final class OwnChanges: Sendable {
    /// Whether anything is recorded: false when the watch names processes (or there is none),
    /// so the mount's operations pay one relaxed load.
    private let enabled: Atomic<Bool>
    private let memory: Duration
    private let clock = ContinuousClock()

    private struct State {
        var touched: [MountPath: ContinuousClock.Instant] = [:]
        /// When the table was last swept of entries older than `memory`.
        var lastSweep: ContinuousClock.Instant
    }

    /// Guards the table. A leaf lock (Docs/LOCKING.md): nothing else is taken while held.
    private let state: Mutex<State>

    public init(enabled: Bool, memory: Duration = .seconds(2)) {
        self.enabled = Atomic(enabled)
        self.memory = memory
        self.state = Mutex(State(lastSweep: clock.now))
    }

    public var isEnabled: Bool { enabled.load(ordering: .relaxed) }

    /// Set once the watch has chosen its method, before the mount serves: fanotify names the
    /// process, inotify does not.
    public func setEnabled(_ isEnabled: Bool) {
        enabled.store(isEnabled, ordering: .relaxed)
    }

    /// The mount is about to change `path` (call it before the system call, so that the
    /// watch cannot see the change before it is noted).
    @inline(__always)
    public func note(_ path: MountPath?) {
        guard isEnabled, let path else { return }
        record(path)
    }

    private func record(_ path: MountPath) {
        let now = clock.now
        state.withLock { state in
            state.touched[path] = now
            if now - state.lastSweep > memory {
                state.touched = state.touched.filter { now - $0.value <= memory }
                state.lastSweep = now
            }
        }
    }

    /// Whether the mount changed `path` within `memory`.
    public func isOwn(_ path: MountPath) -> Bool {
        guard isEnabled else { return false }
        let now = clock.now
        return state.withLock { state in
            guard let when = state.touched[path] else { return false }
            return now - when <= memory
        }
    }
}
