import Glibc
import Synchronization
import SystemPackage

/// An append in flight, as the journal keeps it: enough for the next mount to find the file
/// and put it back to the size it had when the append began.
public struct AppendRecord: Sendable, Equatable {
    public let file: FileIdentity
    /// The size others see until the append commits.
    public let committedSize: Int64
    /// Where the file is, relative to the backing root.
    public let path: MountPath

    public init(file: FileIdentity, committedSize: Int64, path: MountPath) {
        self.file = file
        self.committedSize = committedSize
        self.path = path
    }
}

/// What the next mount's recovery did with an append a crash left unfinished.
public struct RolledBackAppend: Sendable, Equatable, CustomStringConvertible {
    public enum Outcome: Sendable, Equatable {
        /// Cut back to its committed size: `dropped` bytes of the unfinished append went.
        case rolledBack(dropped: Int64)
        /// The path names another file, or none, or one shorter than the committed size
        /// (changed behind the mount since): left alone.
        case leftAlone
    }

    public let record: AppendRecord
    public let outcome: Outcome

    public var description: String {
        switch outcome {
        case .rolledBack(let dropped):
            "\(record.path) cut back to its committed \(record.committedSize) bytes (\(dropped) uncommitted bytes dropped)"
        case .leftAlone:
            "\(record.path) left alone: it is no longer the file that was appended to (committed size \(record.committedSize))"
        }
    }
}

/// The record of appends in flight, so that a crash (kill -9 of the daemon) never leaves a
/// file with half an append: the next mount cuts each file it names back to its committed size.
///
/// An append writes the file itself beyond its committed size (see `Save`), so unlike a temp
/// there is nothing beside the file to sweep: this small file in the backing root is how
/// recovery tells an unfinished append. It holds fixed-size slots, one per append in flight,
/// each written with one `pwrite` (a whole record or none: the page cache outlives the
/// daemon) and cleared by zeroing its magic. It exists only while appends are in flight: the
/// backing at rest holds what the mount shows (appends at once after one another, from
/// different files, share it). Its name is per mount and the mount holds an flock on it, so a
/// second mount of the same backing never rolls back the first's live appends. The mount
/// hides the name (`StagingName.isReserved`).
///
/// Sendable: all state is behind one lock.
public final class AppendJournal: Sendable {
    /// Every journal's name starts with this, then 16 hex digits.
    public static let namePrefix: StaticString = ".coordfs-appends-"
    /// Bytes per slot: a record's header and a path of up to PATH_MAX with room to spare.
    static let slotSize = 8192
    static let headerSize = 40
    static let magic: [UInt8] = Array("CFA1".utf8)

    /// The backing root (borrowed: the node table keeps it open).
    private let root: Int32
    private let nodes: NodeTable?
    /// fsync the journal before an append's first byte (durability `file` and `full`), so a
    /// power loss, too, leaves the committed prefix.
    let synchronizes: Bool

    private struct State: ~Copyable {
        var file: OwnedDescriptor?
        var name: FileName?
        var used: [Bool] = []
        var inUse = 0
        /// Taken slots whose record could not be cleared (see `end`).
        var uncleared: Set<Int> = []
        /// Counts the journal files this mount made: a slot belongs to one of them.
        var generation = 0
    }

    /// Guards the journal file's descriptor and which slots are taken. A leaf (Docs/LOCKING.md):
    /// taken under a save's lock, takes no other. A slot's record is written outside it (each
    /// append writes only its own slot, and the file stays while any slot is taken); only the
    /// journal's create and unlink (when the first append begins and the last ends) happen
    /// under it.
    private let state = Mutex(State())

    public init(root: Int32, nodes: NodeTable?, synchronizes: Bool) {
        self.root = root
        self.nodes = nodes
        self.synchronizes = synchronizes
    }

    /// One append's slot, to clear at its commit or rollback.
    public struct Slot: Sendable, Equatable {
        let index: Int
        /// The journal file it is in: once that file is gone, the slot is too, whatever index a
        /// later journal gives the same number.
        let generation: Int
    }

    /// Records an append of `file` at `directory`/`name` (the path comes from the node table).
    public func begin(file: FileIdentity, committedSize: Int64, directory: Node, name: FileName) throws(Errno) -> Slot {
        guard let path = nodes?.path(of: directory)?.appending(name) else { throw .noSuchFileOrDirectory }
        return try begin(AppendRecord(file: file, committedSize: committedSize, path: path))
    }

    /// Records an append; durable against a crash of the daemon when this returns.
    public func begin(_ record: AppendRecord) throws(Errno) -> Slot {
        let bytes = try Self.encode(record)
        let (slot, file) = try state.withLock { (state) throws(Errno) -> (Slot, Int32) in
            if state.file == nil { try create(&state) }
            guard let raw = state.file?.raw else { throw .badFileDescriptor }
            let index = state.used.firstIndex(of: false) ?? state.used.count
            if index == state.used.count { state.used.append(true) } else { state.used[index] = true }
            state.inUse += 1
            return (Slot(index: index, generation: state.generation), raw)
        }
        do throws(Errno) {
            try write(bytes, slot: slot.index, to: file)
        } catch {
            // The record may be written all the same (the sync failed): cleared as any other.
            try? end(slot)
            throw error
        }
        return slot
    }

    /// The file of an append moved (its owner renamed it): the record follows it.
    public func move(_ slot: Slot, file: FileIdentity, committedSize: Int64, directory: Node, name: FileName) {
        guard let path = nodes?.path(of: directory)?.appending(name),
              let bytes = try? Self.encode(AppendRecord(file: file, committedSize: committedSize, path: path)),
              let descriptor = journalDescriptor(of: slot) else { return }
        try? write(bytes, slot: slot.index, to: descriptor)
    }

    /// The append committed or was rolled back: its record goes. Throws when the record could
    /// not be cleared (a crash would then roll a committed append back: the caller must not
    /// report the append committed).
    ///
    /// A record that cannot be cleared (a failing disk) must not outlive its append either:
    /// left in a journal that lives on, it would cut back whatever the file commits later, at the
    /// next crash. Its slot stays taken, and the journal file, which no write is needed to remove,
    /// goes as soon as no other append in flight needs it (at once when there is none; then
    /// the record is gone and this returns).
    public func end(_ slot: Slot) throws(Errno) {
        guard let descriptor = journalDescriptor(of: slot) else { return }
        do throws(Errno) {
            // Cleared while the slot is still this append's: a new append may take it only after.
            try write([0, 0, 0, 0], slot: slot.index, to: descriptor)
        } catch {
            let removed = state.withLock { state in
                state.uncleared.insert(slot.index)
                return removeIfOnlyUnclearedLeft(&state)
            }
            if removed { return }
            throw error
        }
        release(slot)
    }

    /// The descriptor of the journal `slot` is in, nil when that journal is gone.
    private func journalDescriptor(of slot: Slot) -> Int32? {
        state.withLock { $0.generation == slot.generation ? $0.file?.raw : nil }
    }

    /// Gives a slot back; the journal goes with the last one (or the last one whose record is
    /// not stuck there).
    private func release(_ slot: Slot) {
        state.withLock { state in
            guard slot.generation == state.generation, slot.index < state.used.count, state.used[slot.index] else { return }
            state.used[slot.index] = false
            state.inUse -= 1
            state.uncleared.remove(slot.index)
            _ = removeIfOnlyUnclearedLeft(&state)
        }
    }

    /// Removes the journal when every slot still taken holds a record that could not be cleared
    /// (or none is taken); whether it is gone.
    private func removeIfOnlyUnclearedLeft(_ state: inout State) -> Bool {
        state.inUse == state.uncleared.count && remove(&state)
    }

    /// Whether the journal file exists now (for tests).
    var exists: Bool { state.withLock { $0.file != nil } }

    private func create(_ state: inout State) throws(Errno) {
        let root = self.root
        var name = Self.makeName()
        let descriptor = try DirectoryTimes.keeping(of: root) { () throws(Errno) -> OwnedDescriptor in
            for _ in 0..<8 {
                do throws(Errno) {
                    return try Syscall.openAt(root, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600)
                } catch .fileExists {
                    name = Self.makeName()
                }
            }
            throw .fileExists
        }
        _ = try? Syscall.lockExclusivelyIfFree(descriptor.raw)
        state.file = consume descriptor
        state.name = name
        state.used = []
        state.generation += 1
    }

    /// Unlinks the journal file and forgets its slots; whether it is gone. One that holds
    /// records nobody could clear stays (and is kept open) should the unlink fail: forgotten,
    /// its records would cut back later commits at the next mount.
    private func remove(_ state: inout State) -> Bool {
        guard let name = state.name else { return true }
        let root = self.root
        let unlinked = DirectoryTimes.keeping(of: root) { () -> Bool in
            do throws(Errno) {
                try Syscall.unlink(at: root, name, flags: 0)
            } catch {
                return error == .noSuchFileOrDirectory
            }
            return true
        }
        guard unlinked || state.uncleared.isEmpty else { return false }
        state.name = nil
        state.file = nil
        state.used = []
        state.inUse = 0
        state.uncleared = []
        return true
    }

    /// Writes one slot (its owner's alone; the descriptor stays open while the slot is taken).
    private func write(_ bytes: [UInt8], slot: Int, to raw: Int32) throws(Errno) {
        let written = try bytes.withUnsafeBytes { buffer in
            Result { () throws(Errno) -> Int in try Syscall.write(raw, from: buffer, at: off_t(slot * Self.slotSize)) }
        }.get()
        if written != bytes.count { throw .noSpace }
        if synchronizes { try Syscall.synchronize(raw, dataOnly: true) }
    }

    static func makeName() -> FileName {
        let hex = Array(StagingName.make().bytes.suffix(StagingName.hexDigits))
        let prefix = UnsafeRawBufferPointer(start: namePrefix.utf8Start, count: namePrefix.utf8CodeUnitCount)
        return FileName(Array(prefix) + hex)!
    }

    /// Whether a name in the backing root is a journal's.
    public static func isJournalName(_ name: UnsafePointer<CChar>) -> Bool {
        let expected = namePrefix.utf8Start
        for index in 0..<namePrefix.utf8CodeUnitCount where UInt8(bitPattern: name[index]) != expected[index] { return false }
        return true
    }

    // MARK: Records

    /// A slot's bytes: magic, path length, device, inode, committed size, checksum (all
    /// little-endian), then the path's bytes.
    static func encode(_ record: AppendRecord) throws(Errno) -> [UInt8] {
        let path = record.path.bytes
        guard headerSize + path.count <= slotSize else { throw .fileNameTooLong }
        var bytes = magic
        append(UInt32(path.count), to: &bytes)
        append(record.file.device, to: &bytes)
        append(record.file.inode, to: &bytes)
        append(UInt64(bitPattern: record.committedSize), to: &bytes)
        append(checksum(bytes, path), to: &bytes)
        return bytes + path
    }

    /// The record in a slot's bytes; nil for a cleared, empty or torn slot.
    static func decode(_ slot: ArraySlice<UInt8>) -> AppendRecord? {
        let bytes = Array(slot)
        guard bytes.count >= headerSize, Array(bytes[0..<4]) == magic else { return nil }
        let length = Int(read(UInt32.self, bytes, at: 4))
        guard headerSize + length <= bytes.count else { return nil }
        let path = Array(bytes[headerSize..<(headerSize + length)])
        guard read(UInt64.self, bytes, at: 32) == checksum(Array(bytes[0..<32]), path),
              let mountPath = MountPath(bytes: path) else { return nil }
        return AppendRecord(file: FileIdentity(device: read(UInt64.self, bytes, at: 8), inode: read(UInt64.self, bytes, at: 16)),
                            committedSize: Int64(bitPattern: read(UInt64.self, bytes, at: 24)), path: mountPath)
    }

    private static func append<T: FixedWidthInteger>(_ value: T, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { bytes += $0 }
    }

    private static func read<T: FixedWidthInteger>(_ type: T.Type, _ bytes: [UInt8], at offset: Int) -> T {
        var value: T = 0
        for index in 0..<MemoryLayout<T>.size { value |= T(bytes[offset + index]) << (8 * index) }
        return value
    }

    /// FNV-1a over the header and the path: a torn or stray slot does not pass for a record.
    private static func checksum(_ header: [UInt8], _ path: [UInt8]) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in header + path {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3
        }
        return hash
    }

    // MARK: Recovery

    /// Cuts every file an unfinished append of an earlier run left back to its committed size,
    /// and removes that run's journal; journals a live mount holds (its flock) are left alone.
    /// Runs before the mount serves.
    public static func rollBack(backingRoot: Int32) throws(Errno) -> [RolledBackAppend] {
        var results: [RolledBackAppend] = []
        for name in try Syscall.directoryNames(backingRoot) where name.withCString({ isJournalName($0) }) {
            let journal: OwnedDescriptor
            do throws(Errno) {
                journal = try Syscall.openAt(backingRoot, name, O_RDWR | O_NOFOLLOW)
            } catch {
                continue
            }
            guard (try? Syscall.lockExclusivelyIfFree(journal.raw)) == true else { continue }
            for record in try records(in: journal.raw) {
                results.append(RolledBackAppend(record: record, outcome: rollBack(record, root: backingRoot)))
            }
            DirectoryTimes.keeping(of: backingRoot) { () -> Void in _ = try? Syscall.unlink(at: backingRoot, name, flags: 0) }
        }
        return results
    }

    /// Every record in a journal file.
    static func records(in journal: Int32) throws(Errno) -> [AppendRecord] {
        let size = Int(try Syscall.stat(journal).st_size)
        var bytes = [UInt8](repeating: 0, count: size)
        var filled = 0
        while filled < size {
            let count = try bytes.withUnsafeMutableBytes { buffer in
                Result { () throws(Errno) -> Int in
                    try Syscall.read(journal, into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]), at: off_t(filled))
                }
            }.get()
            if count == 0 { break }
            filled += count
        }
        return stride(from: 0, to: filled, by: slotSize).compactMap { decode(bytes[$0..<min($0 + slotSize, filled)]) }
    }

    /// Cuts one file back, when its path still names that file and it is at least that long.
    /// No symlink is followed on the way.
    static func rollBack(_ record: AppendRecord, root: Int32) -> RolledBackAppend.Outcome {
        guard let last = record.path.components.last else { return .leftAlone }
        do throws(Errno) {
            var directory: OwnedDescriptor? = nil
            for component in record.path.components.dropLast() {
                directory = try Syscall.openAt(directory?.raw ?? root, component, Linux.O_PATH | O_DIRECTORY | O_NOFOLLOW)
            }
            let file = try Syscall.openAt(directory?.raw ?? root, last, O_WRONLY | O_NOFOLLOW | O_NONBLOCK)
            let status = try Syscall.stat(file.raw)
            guard status.st_mode & S_IFMT == S_IFREG, FileIdentity(status) == record.file,
                  Int64(status.st_size) >= record.committedSize else { return .leftAlone }
            try Syscall.truncate(file.raw, off_t(record.committedSize))
            return .rolledBack(dropped: Int64(status.st_size) - record.committedSize)
        } catch {
            return .leftAlone
        }
    }
}
