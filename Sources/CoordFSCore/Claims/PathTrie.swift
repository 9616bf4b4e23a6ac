/// A granted claim on one path, as the trie stores it at that path's entry.
struct Hold {
    let grant: UInt64
    let mode: ClaimMode
    let owner: ClaimOwner
    /// The owner's user; nil for owners without one (never broken, see `ClaimBreak`).
    let user: UInt32?
    let path: MountPath
    let since: ContinuousClock.Instant

    var holder: ClaimHolder { ClaimHolder(path: path, mode: mode, owner: owner, since: since, user: user) }
}

/// One path of a queued request, stored at that path's entry.
struct Wait {
    let waiter: Waiter
    let mode: ClaimMode
}

/// A queued request. Lives in the table's waiter map, in the deadline heap, and as one `Wait`
/// per requested path in the trie, all of which drop it together when it leaves the queue.
final class Waiter {
    /// Arrival order: an earlier waiter has a smaller ticket.
    let ticket: UInt64
    /// Its owner, with the lineage it was asked with (see `ProcessLineage`).
    let requester: Requester
    var owner: ClaimOwner { requester.owner }
    let requests: [ClaimRequest]
    let since: ContinuousClock.Instant
    let deadline: ContinuousClock.Instant
    let onOutcome: @Sendable (ClaimWaitOutcome) -> Void
    // Unchecked for the same reason as `PathEntry`'s properties: only touched under the lock.
    /// When the table looks at it next: its deadline, or before that the moment it has waited
    /// the break time and may break other users' claims in its way. The heap's order.
    @exclusivity(unchecked) var checkAt: ContinuousClock.Instant
    /// Position in the deadline heap, kept by the heap.
    @exclusivity(unchecked) var heapIndex = -1
    /// True while queued; false once granted, timed out or cancelled.
    @exclusivity(unchecked) var isWaiting = true
    /// True while it sits in the set of waiters to look at again (so it is added once).
    @exclusivity(unchecked) var isCandidate = false

    init(ticket: UInt64, requester: Requester, requests: [ClaimRequest], since: ContinuousClock.Instant,
         deadline: ContinuousClock.Instant, onOutcome: @escaping @Sendable (ClaimWaitOutcome) -> Void) {
        self.ticket = ticket
        self.requester = requester
        self.requests = requests
        self.since = since
        self.deadline = deadline
        self.checkAt = deadline
        self.onOutcome = onOutcome
    }

    var info: ClaimWaiter {
        ClaimWaiter(ticket: ClaimWaitTicket(id: ticket), owner: owner, requests: requests, since: since, deadline: deadline)
    }
}

/// The two kinds of thing an entry carries; each has its own count of items below, so a search
/// for one kind never descends into subtrees that only hold the other.
enum TrieLayer {
    case holds, waits
}

/// One path component in the trie. An entry exists only while a hold or a wait sits at it or
/// beneath it: it is created on the way down when one is added and removed as soon as the last
/// one at or beneath it goes, so the trie's size follows what is in use.
///
/// Properties are `@exclusivity(unchecked)`: they are only touched with the table's lock held,
/// and never modified while a loop over them is running, so the runtime's access tracking
/// (about a third of an uncontended claim's cost when on) would guard nothing.
final class PathEntry {
    /// Set when the entry is linked (entries are reused, see `PathTrie.spares`).
    @exclusivity(unchecked) var name: FileName
    /// Never dangles: an entry is removed from its parent before the parent can become unused
    /// (the parent counts the entry's items below it), so the parent outlives it while linked.
    @exclusivity(unchecked) unowned(unsafe) var parent: PathEntry?
    @exclusivity(unchecked) var children: [FileName: PathEntry] = [:]
    @exclusivity(unchecked) var holds: [Hold] = []
    @exclusivity(unchecked) var waits: [Wait] = []
    /// Holds in the subtree strictly below this entry.
    @exclusivity(unchecked) var holdsBelow = 0
    /// Waits in the subtree strictly below this entry.
    @exclusivity(unchecked) var waitsBelow = 0

    init(name: FileName, parent: PathEntry?) {
        self.name = name
        self.parent = parent
    }

    var isUnused: Bool {
        holds.isEmpty && waits.isEmpty && holdsBelow == 0 && waitsBelow == 0
    }

    @inline(__always)
    func hasBelow(_ layer: TrieLayer) -> Bool {
        switch layer {
        case .holds: return holdsBelow > 0
        case .waits: return waitsBelow > 0
        }
    }

    @inline(__always)
    func countBelow(_ layer: TrieLayer, _ delta: Int) {
        switch layer {
        case .holds: holdsBelow += delta
        case .waits: waitsBelow += delta
        }
    }
}

/// The trie of paths with holds and waits. Not thread-safe: `ClaimTable` keeps it under its lock.
struct PathTrie {
    let root = PathEntry(name: .empty, parent: nil)
    /// Entries other than the root (which always exists).
    private(set) var nonRootEntries = 0
    /// Unlinked entries kept for reuse, so that the usual claim — a path nobody else uses,
    /// taken and released within one operation — allocates no entries, dictionaries or arrays.
    /// Bounded, and entries whose storage grew large are not kept, so idle memory stays small.
    private var spares: [PathEntry] = []
    private static let maximumSpares = 256
    private static let maximumSpareCapacity = 16

    /// Live entries: the root counts only while something sits at it.
    var entryCount: Int {
        nonRootEntries + (root.holds.isEmpty && root.waits.isEmpty ? 0 : 1)
    }

    /// The entry of `path`, creating the missing ones, after counting one more item of `layer`
    /// below each of its ancestors. The caller adds that item to the returned entry.
    mutating func entryForAdding(_ path: MountPath, _ layer: TrieLayer) -> PathEntry {
        var entry = root
        for component in path.components {
            entry.countBelow(layer, 1)
            if let child = entry.children[component] {
                entry = child
            } else {
                let child: PathEntry
                if let spare = spares.popLast() {
                    spare.name = component
                    spare.parent = entry
                    child = spare
                } else {
                    child = PathEntry(name: component, parent: entry)
                }
                entry.children[component] = child
                nonRootEntries += 1
                entry = child
            }
        }
        return entry
    }

    private mutating func recycle(_ entry: PathEntry) {
        entry.parent = nil
        guard spares.count < Self.maximumSpares,
              entry.children.capacity <= Self.maximumSpareCapacity,
              entry.holds.capacity <= Self.maximumSpareCapacity,
              entry.waits.capacity <= Self.maximumSpareCapacity else { return }
        entry.name = .empty
        spares.append(entry)
    }

    /// The entry of `path` if it exists.
    func existingEntry(_ path: MountPath) -> PathEntry? {
        var entry = root
        for component in path.components {
            guard let child = entry.children[component] else { return nil }
            entry = child
        }
        return entry
    }

    /// After the caller took one item of `layer` off `entry`: uncounts it on every ancestor and
    /// removes the entries that nothing uses any more, from `entry` upwards.
    mutating func itemRemoved(from entry: PathEntry, _ layer: TrieLayer) {
        var current = entry
        while let parent = current.parent {
            parent.countBelow(layer, -1)
            if current.isUnused {
                parent.children[current.name] = nil
                nonRootEntries -= 1
                recycle(current)
            }
            current = parent
        }
    }

    /// Calls `visit` on every entry that overlaps `path` — its ancestors from the root down, its
    /// own entry, and, only where an entry counts items of `layer` below it, the entries beneath —
    /// and stops as soon as `visit` returns true. Returns whether it stopped.
    @inline(__always)
    func anyOverlapping(_ path: MountPath, _ layer: TrieLayer, _ visit: (PathEntry) -> Bool) -> Bool {
        var entry = root
        if visit(entry) { return true }
        for component in path.components {
            guard let child = entry.children[component] else { return false }
            entry = child
            if visit(entry) { return true }
        }
        return entry.hasBelow(layer) && Self.anyBelow(entry, layer, visit)
    }

    private static func anyBelow(_ entry: PathEntry, _ layer: TrieLayer, _ visit: (PathEntry) -> Bool) -> Bool {
        for child in entry.children.values {
            if visit(child) { return true }
            if child.hasBelow(layer) && anyBelow(child, layer, visit) { return true }
        }
        return false
    }

    /// Every entry in the trie, root first (for status and `releaseAll`, never on hot paths).
    func forEachEntry(_ body: (PathEntry) -> Void) {
        func walk(_ entry: PathEntry) {
            body(entry)
            for child in entry.children.values { walk(child) }
        }
        walk(root)
    }
}

/// Queued waiters ordered by deadline (then arrival), with removal from the middle: each waiter
/// knows its index, so a grant or a cancel takes it out in O(log n) instead of leaving a stale
/// entry behind until its deadline.
struct DeadlineHeap {
    private var items: [Waiter] = []

    var first: Waiter? { items.first }
    var isEmpty: Bool { items.isEmpty }

    mutating func insert(_ waiter: Waiter) {
        waiter.heapIndex = items.count
        items.append(waiter)
        siftUp(items.count - 1)
    }

    mutating func remove(_ waiter: Waiter) {
        let index = waiter.heapIndex
        guard index >= 0, index < items.count, items[index] === waiter else { return }
        let last = items.count - 1
        if index != last {
            swapItems(index, last)
        }
        items.removeLast()
        waiter.heapIndex = -1
        if index < items.count {
            siftDown(index)
            siftUp(index)
        }
    }

    private static func earlier(_ a: Waiter, _ b: Waiter) -> Bool {
        a.checkAt < b.checkAt || (a.checkAt == b.checkAt && a.ticket < b.ticket)
    }

    private mutating func swapItems(_ i: Int, _ j: Int) {
        items.swapAt(i, j)
        items[i].heapIndex = i
        items[j].heapIndex = j
    }

    private mutating func siftUp(_ start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard Self.earlier(items[child], items[parent]) else { return }
            swapItems(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            guard left < items.count else { return }
            let right = left + 1
            var smallest = left
            if right < items.count && Self.earlier(items[right], items[left]) { smallest = right }
            guard Self.earlier(items[smallest], items[parent]) else { return }
            swapItems(parent, smallest)
            parent = smallest
        }
    }
}
