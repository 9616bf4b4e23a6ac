import Glibc
import Synchronization
import SystemPackage

/// An empty file under a staging name, left by a save that replaced a file nobody else had
/// open: the next save in the same directory writes into it instead of creating a temp.
///
/// Why: a commit that renames a temp over a file frees the replaced inode, and the next save
/// allocates a new one. On ext4 without a journal the allocator skips every inode freed in the
/// last seconds, so a burst of saves pays more and more per save (a third of the daemon's time
/// in `perf` for 4 KiB saves). A commit that exchanges the temp with the file instead keeps
/// the replaced inode, emptied, for the next save: one allocation and one free less per save.
///
/// Sendable: immutable; the descriptor is only a number the kernel serialises calls on.
public final class SpareFile: Sendable {
    /// Its staging name inside `directory`.
    public let name: String
    /// Open for reading and writing.
    public let descriptor: OwnedDescriptor
    /// The directory it lives in; holding the node keeps the directory's descriptor open.
    public let directory: Node

    public init(name: String, descriptor: consuming OwnedDescriptor, directory: Node) {
        self.name = name
        self.descriptor = descriptor
        self.directory = directory
    }

    /// Removes it from the backing, keeping the directory's times; a spare already gone is fine.
    public func remove() {
        let directory = self.directory.directory
        DirectoryTimes.keeping(of: directory) { () -> Void in
            _ = try? Syscall.unlink(at: directory, name, flags: 0)
        }
    }
}

/// The spares of the mount, by directory, bounded: a few per directory (one covers any number
/// of saves made one after the other), and a few hundred in all, the directories used least
/// recently giving theirs up first.
///
/// Sendable: all state is behind one lock; a count lets the common checks skip it.
public final class SparePool: Sendable {
    public let perDirectory: Int
    public let capacity: Int

    private struct State {
        var byDirectory: [FileIdentity: [SpareFile]] = [:]
        /// When each directory last gave or took a spare, on `clock`.
        var lastUse: [FileIdentity: UInt64] = [:]
        var clock: UInt64 = 0
    }

    /// Guards both maps and the clock.
    private let state = Mutex(State())
    /// Spares held; lets callers skip the lock when there are none.
    private let held = Atomic<Int>(0)

    public init(perDirectory: Int = 4, capacity: Int = 256) {
        self.perDirectory = perDirectory
        self.capacity = capacity
    }

    public var count: Int { held.load(ordering: .relaxed) }

    /// A spare in `directory` for the caller to use (it is no longer in the pool).
    public func take(in directory: FileIdentity) -> SpareFile? {
        guard count > 0 else { return nil }
        return state.withLock { state in
            guard var spares = state.byDirectory[directory], let spare = spares.popLast() else { return nil }
            state.byDirectory[directory] = spares.isEmpty ? nil : spares
            if spares.isEmpty { state.lastUse[directory] = nil } else { state.lastUse[directory] = Self.tick(&state) }
            held.subtract(1, ordering: .relaxed)
            return spare
        }
    }

    /// Keeps `spare` for the next save in `directory`. Returns the spares that no longer fit
    /// (`spare` itself when its directory is full): the caller removes them from the backing.
    public func add(_ spare: SpareFile, in directory: FileIdentity) -> [SpareFile] {
        state.withLock { state in
            var spares = state.byDirectory[directory] ?? []
            if spares.count >= perDirectory { return [spare] }
            spares.append(spare)
            state.byDirectory[directory] = spares
            state.lastUse[directory] = Self.tick(&state)
            held.add(1, ordering: .relaxed)
            var evicted: [SpareFile] = []
            while held.load(ordering: .relaxed) > capacity, let oldest = state.lastUse.min(by: { $0.value < $1.value })?.key {
                evicted += Self.removeAll(in: oldest, from: &state, held: held)
            }
            return evicted
        }
    }

    /// Every spare in `directory` (before it is removed or replaced, which its spares would block).
    public func takeAll(in directory: FileIdentity) -> [SpareFile] {
        guard count > 0 else { return [] }
        return state.withLock { state in Self.removeAll(in: directory, from: &state, held: held) }
    }

    /// Every spare (at unmount).
    public func takeAll() -> [SpareFile] {
        state.withLock { state in
            let all = state.byDirectory.values.flatMap { $0 }
            state = State()
            held.store(0, ordering: .relaxed)
            return all
        }
    }

    private static func removeAll(in directory: FileIdentity, from state: inout State, held: borrowing Atomic<Int>) -> [SpareFile] {
        let spares = state.byDirectory.removeValue(forKey: directory) ?? []
        state.lastUse[directory] = nil
        held.subtract(spares.count, ordering: .relaxed)
        return spares
    }

    private static func tick(_ state: inout State) -> UInt64 {
        state.clock += 1
        return state.clock
    }
}
