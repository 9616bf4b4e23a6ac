import CFuse
import CoordFSCore
import Dispatch
import Glibc
import Synchronization

/// Keeps the node table within its budget of descriptors. Every node the kernel remembers
/// holds an O_PATH descriptor, and the kernel forgets nodes only under memory pressure, so a
/// tree larger than the descriptor limit would otherwise end in EMFILE. When the table grows
/// past its high-water mark, this asks the kernel to drop cached entries (it forgets their
/// nodes once nothing uses them) until the table is back under the low-water mark.
///
/// It runs on a thread of its own: an invalidation waits for the directory's lock in the
/// kernel, which a request in flight may hold until one of our workers answers it.
/// Sendable: constants, and `state` behind its lock.
final class NodeEvictor: Sendable {
    private let nodes: NodeTable
    private let notifier: KernelNotifier
    let highWater: Int
    private let lowWater: Int
    private let wakeups = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    /// Guards whether a wake-up is already pending and whether the evictor must stop.
    private let state = Mutex<(pending: Bool, stopping: Bool)>((false, false))

    init(nodes: NodeTable, notifier: KernelNotifier, maxNodes: Int) {
        self.nodes = nodes
        self.notifier = notifier
        self.highWater = max(maxNodes, 64)
        self.lowWater = highWater * 2 / 3
        DispatchQueue(label: "coordfs.node-evictor").async { [self] in run() }
    }

    /// Called after a node is added; cheap when under the mark.
    @inline(__always)
    func noteGrowth(count: Int) {
        guard count > highWater else { return }
        let shouldSignal = state.withLock { state in
            if state.pending || state.stopping { return false }
            state.pending = true
            return true
        }
        if shouldSignal { wakeups.signal() }
    }

    func stop() {
        state.withLock { $0.stopping = true }
        wakeups.signal()
        finished.wait()
    }

    private func run() {
        while true {
            wakeups.wait()
            if state.withLock({ $0.stopping }) { break }
            shrink()
            state.withLock { $0.pending = false }
        }
        finished.signal()
    }

    private func shrink() {
        var stalled = 0
        while nodes.count > lowWater && stalled < 3 {
            let before = nodes.count
            for (parent, name) in nodes.evictionCandidates(limit: before - lowWater) {
                if state.withLock({ $0.stopping }) { return }
                notifier.invalidateEntryNow(directory: parent, name: name)
            }
            usleep(5_000) // let the kernel's forgets arrive
            stalled = nodes.count < before ? 0 : stalled + 1
        }
    }
}
