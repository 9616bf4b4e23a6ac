import Glibc
import Synchronization
import SystemPackage

/// The state behind a watch and its one thread: the tree of watched directories, the moves
/// waiting for their other half, and the changes of the batch being read. Used by that thread
/// alone once started (and by `start` before).
final class WatchEngine<Kernel: KernelWatch> {
    let kernel: Kernel
    let root: OwnedDescriptor
    var tree = DirectoryTree<Kernel.Key>()
    let ownChanges: OwnChanges
    let ownPID = getpid()
    let facts = ProcessFacts()

    /// Paths a scan of a new directory reported as created, each with the number of the read
    /// during which it was scanned: their own create events, if still queued, are not reported
    /// again. An entry goes when its event comes; when a delete or a move away of it or above it
    /// shows that a later create is a new one; and once a later read has emptied the queue (any
    /// event made before the scan has been read then).
    var reportedByScan: [MountPath: Int] = [:]
    /// The number of the read whose events are being handled.
    var currentRead = 0
    /// inotify's IN_MOVED_FROM, until the next event tells whether its IN_MOVED_TO follows.
    var pendingMove: (key: Kernel.Key, name: FileName, isDirectory: Bool, cookie: UInt32)?
    /// Directories whose subdirectories may not all be watched under their present names, to
    /// be listed again after each batch until that works: a new directory could not be opened
    /// at the path the tree gave it (it, or a directory above it, moved meanwhile, in an event
    /// not yet handled), or a move was matched by names alone (inotify). The flag: whether what
    /// the listing finds in a directory new to the watch is reported as created.
    var unsettled: [Kernel.Key: Bool] = [:]
    /// The second move of two directories that traded places, which the tree shows already.
    var exchangeSecondHalf: (from: MountPath, to: MountPath)?
    /// A directory could not be watched (a limit): reported as one overflow per batch.
    var lostTrack = false
    var batch: [ObservedChange] = []
    /// Who made the changes of this batch, read from /proc once per process.
    var processes: [Int32: OutsideProcess] = [:]

    /// Watches every directory under `root` (open as a directory). Fails with the errno of the
    /// first directory that could not be watched for a reason other than being gone or closed
    /// to this process.
    init(kernel: Kernel, root: consuming OwnedDescriptor, ownChanges: OwnChanges) throws(Errno) {
        self.kernel = kernel
        self.root = root
        self.ownChanges = ownChanges
        let key = try kernel.watch(directory: self.root.raw)
        tree.setRoot(key)
        var failure: Errno?
        scan(self.root.raw, key, .root, report: false, failure: &failure)
        if let failure { throw failure }
    }

    var watchedDirectories: Int { tree.count }

    // MARK: Reading

    /// The shortest time between a read that held only the mount's own changes and the next.
    /// The kernel queues the mount's own changes as it does anyone's, one event per request
    /// the mount serves: waking for each would take the CPU from the requests that make them.
    /// So after such a read the thread lets them gather and takes them in one read; after a
    /// read that reported something (and after a quiet spell) it reads at once, so a change
    /// behind the mount waits at most this long behind a stream of the mount's own.
    static var readInterval: Duration { .milliseconds(5) }

    /// Waits until `readInterval` has passed since `last` when `onlyOwn` (the last read held
    /// nothing to report), then notes now as the last read.
    private func pace(_ last: inout ContinuousClock.Instant, onlyOwn: Bool) {
        let clock = ContinuousClock()
        let due = last + Self.readInterval
        if onlyOwn, clock.now < due {
            let wait = due - clock.now
            let (seconds, attoseconds) = wait.components
            var request = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
            var remaining = timespec()
            while nanosleep(&request, &remaining) != 0 && errno == EINTR { request = remaining }
        }
        last = clock.now
    }

    /// Reads and reports until `control` is stopped or the descriptor fails.
    func run(control: WatchControl, report: ([ObservedChange]) -> Void) {
        var lastRead = ContinuousClock.now - Self.readInterval
        var lastReadOnlyOwn = false
        let capacity = 64 * 1024
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 8)
        defer { buffer.deallocate() }
        var events: [(event: KernelEvent<Kernel.Key>, pid: Int32?)] = []
        while !control.stopped.load(ordering: .acquiring) {
            let ready: [Int]
            do {
                ready = try Syscall.waitReadable([kernel.descriptor, control.wake], timeout: -1)
            } catch {
                report([ObservedChange(.overflow)])
                return
            }
            if ready.contains(1) { return }
            pace(&lastRead, onlyOwn: lastReadOnlyOwn)
            var count: Int
            do {
                count = try Syscall.readAvailable(kernel.descriptor, into: buffer)
            } catch {
                report([ObservedChange(.overflow)]) // the watch ends: say that anything may change from now on
                return
            }
            while count > 0 {
                currentRead += 1
                events.removeAll(keepingCapacity: true)
                kernel.decode(UnsafeRawBufferPointer(rebasing: buffer[..<count]), into: &events)
                for (event, pid) in events { take(event, pid: pid) }
                // A read that left room for more emptied the queue (records are far shorter than that).
                if count <= capacity - 4096, !reportedByScan.isEmpty {
                    reportedByScan = reportedByScan.filter { $0.value == currentRead }
                }
                count = 0
                // A move's first half ends the read: its second is likely on its way. Wait for it briefly.
                if pendingMove != nil, (try? Syscall.waitReadable([kernel.descriptor], timeout: 5))?.isEmpty == false {
                    count = (try? Syscall.readAvailable(kernel.descriptor, into: buffer)) ?? 0
                }
            }
            if let move = pendingMove {
                pendingMove = nil
                take(.moved(from: (move.key, move.name), to: nil, isDirectory: move.isDirectory, object: nil), pid: nil)
            }
            settleDirectories()
            control.directories.store(tree.count, ordering: .relaxed)
            let changes = batch
            batch.removeAll(keepingCapacity: true)
            processes.removeAll(keepingCapacity: true)
            lostTrack = false
            lastReadOnlyOwn = changes.isEmpty
            if !changes.isEmpty { report(changes) }
        }
    }

    /// One event, after pairing inotify's move halves.
    func take(_ event: KernelEvent<Kernel.Key>, pid: Int32?) {
        if let move = pendingMove {
            pendingMove = nil
            if case .movedTo(let key, let name, let isDirectory, let cookie) = event, cookie == move.cookie {
                handle(.moved(from: (move.key, move.name), to: (key, name), isDirectory: isDirectory, object: nil), pid: pid)
                return
            }
            handle(.moved(from: (move.key, move.name), to: nil, isDirectory: move.isDirectory, object: nil), pid: nil)
        }
        switch event {
        case .movedFrom(let key, let name, let isDirectory, let cookie):
            pendingMove = (key, name, isDirectory, cookie)
        case .movedTo(let key, let name, let isDirectory, _):
            handle(.moved(from: nil, to: (key, name), isDirectory: isDirectory, object: nil), pid: pid)
        default:
            handle(event, pid: pid)
        }
    }
}
