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
    public let name: FileName
    /// Open for reading and writing.
    public let descriptor: OwnedDescriptor
    /// The directory it lives in; holding the node keeps the directory's descriptor open.
    public let directory: Node

    public init(name: FileName, descriptor: consuming OwnedDescriptor, directory: Node) {
        self.name = name
        self.descriptor = descriptor
        self.directory = directory
    }

    /// Removes it from the backing, keeping the directory's times; a spare already gone is fine.
    public func remove() {
        SpareName(name: name, directory: directory).remove()
    }
}

/// Where a spare stands, for removing one that is not in hand (still being emptied).
public struct SpareName: Sendable {
    public let name: FileName
    public let directory: Node

    public init(name: FileName, directory: Node) {
        self.name = name
        self.directory = directory
    }

    /// Removes it from the backing, keeping the directory's times; a file already gone is fine.
    public func remove() {
        let descriptor = directory.directory
        DirectoryTimes.keeping(of: descriptor) { () -> Void in
            _ = try? Syscall.unlink(at: descriptor, name, flags: 0)
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
        /// Replaced files a commit kept that are still being emptied (`expect` .. `add`), by
        /// directory: they already stand under their staging names.
        var incoming: [FileIdentity: [FileName: SpareName]] = [:]
        /// Names `takeAll(in:)` handed out while their files were still being emptied.
        var withdrawn: Set<FileName> = []
        /// When each directory last gave or took a spare, on `clock`.
        var lastUse: [FileIdentity: UInt64] = [:]
        var clock: UInt64 = 0
    }

    /// Guards the maps and the clock.
    private let state = Mutex(State())
    /// Spares held; lets callers skip the lock when there are none.
    private let held = Atomic<Int>(0)
    /// Files expected (see `expect`); lets `takeAll(in:)` skip the lock when there are none.
    private let expected = Atomic<Int>(0)

    public init(perDirectory: Int = 4, capacity: Int = 256) {
        self.perDirectory = perDirectory
        self.capacity = capacity
    }

    public var count: Int { held.load(ordering: .relaxed) }

    /// Whether `takeAll(in:)` may find something: spares held, or files on their way in.
    public var mayHoldFiles: Bool { count > 0 || expected.load(ordering: .relaxed) > 0 }

    /// A commit kept the replaced file under `name` in `directory`; it will come to `add` once
    /// it is emptied (after the reply). Until then `takeAll(in:)` hands its name out too, so
    /// that a directory removed in between is not held up by it.
    public func expect(_ name: FileName, in directory: Node) {
        state.withLock { state in
            state.incoming[directory.identity, default: [:]][name] = SpareName(name: name, directory: directory)
            expected.add(1, ordering: .relaxed)
        }
    }

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
    /// A file announced by `expect` that was taken meanwhile (its directory went) is returned
    /// as well, to be removed again (it is gone already or about to be).
    public func add(_ spare: SpareFile, in directory: FileIdentity) -> [SpareFile] {
        state.withLock { state in
            if state.withdrawn.remove(spare.name) != nil { return [spare] }
            Self.forget(spare.name, in: directory, from: &state, expected: expected)
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

    /// A file announced by `expect` that will not come (emptying it failed; the caller removes it).
    public func abandon(_ name: FileName, in directory: FileIdentity) {
        state.withLock { state in
            if state.withdrawn.remove(name) == nil { Self.forget(name, in: directory, from: &state, expected: expected) }
        }
    }

    /// Every spare in `directory` (before it is removed or replaced, which its spares would
    /// block), and the names of those still being emptied: the caller removes them all.
    public func takeAll(in directory: FileIdentity) -> (spares: [SpareFile], incoming: [SpareName]) {
        guard mayHoldFiles else { return ([], []) }
        return state.withLock { state in
            let incoming = state.incoming.removeValue(forKey: directory).map { Array($0.values) } ?? []
            expected.subtract(incoming.count, ordering: .relaxed)
            state.withdrawn.formUnion(incoming.map(\.name))
            return (Self.removeAll(in: directory, from: &state, held: held), incoming)
        }
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

    private static func forget(_ name: FileName, in directory: FileIdentity, from state: inout State, expected: borrowing Atomic<Int>) {
        guard state.incoming[directory]?.removeValue(forKey: name) != nil else { return }
        if state.incoming[directory]?.isEmpty == true { state.incoming[directory] = nil }
        expected.subtract(1, ordering: .relaxed)
    }

    private static func tick(_ state: inout State) -> UInt64 {
        state.clock += 1
        return state.clock
    }
}
