import Glibc
import Synchronization
import SystemPackage

/// The kernel interface a watch of the backing uses.
public enum WatchMethod: String, Sendable, CaseIterable {
    /// Tells the mount's own changes by pid; names the process behind others' with CAP_SYS_ADMIN.
    case fanotify
    /// Open to every user; names no process, so the mount's own changes are told apart by `OwnChanges`.
    case inotify
}

/// Why the backing cannot be watched, in words for the user.
public struct WatchFailure: Error, CustomStringConvertible {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}

/// Watches every directory under the backing root; reports changes made by anyone but this process.
///
/// Sendable: what the owner and the reading thread share is `WatchControl` (atomics); the rest
/// is the thread's alone, or fixed at start.
public final class BackingWatcher: Sendable {
    public let method: WatchMethod
    private let control: WatchControl
    /// The reading thread, until someone stops it and waits for it.
    private let thread: Mutex<pthread_t?>

    /// method nil: fanotify where permitted (fanotify_init fails with EPERM without CAP_SYS_ADMIN), else inotify.
    /// (Since Linux 5.13 a user without CAP_SYS_ADMIN may have this fanotify too, on directories
    /// it can read: the mount's own changes are still told by pid, but no other process is named.)
    /// Adds marks/watches on every directory under `root` (recursive scan) before it returns, then
    /// reads on a thread of its own and calls `report` there, in the kernel's order, in batches.
    public static func start(root: String, method: WatchMethod?, ownChanges: OwnChanges,
                             report: @escaping @Sendable ([ObservedChange]) -> Void) throws(WatchFailure) -> BackingWatcher {
        switch method {
        case .fanotify:
            return try start(root: root, kernel: FanotifyWatch.init, ownChanges: ownChanges, report: report)
        case .inotify:
            return try start(root: root, kernel: InotifyWatch.init, ownChanges: ownChanges, report: report)
        case nil:
            do {
                return try start(root: root, kernel: FanotifyWatch.init, ownChanges: ownChanges, report: report)
            } catch {
                return try start(root: root, kernel: InotifyWatch.init, ownChanges: ownChanges, report: report)
            }
        }
    }

    /// `start` with any kernel interface (the tests give one that reaches a limit at will).
    static func start<Kernel: KernelWatch>(root: String, kernel makeKernel: () throws(Errno) -> Kernel, ownChanges: OwnChanges,
                                           report: @escaping @Sendable ([ObservedChange]) -> Void) throws(WatchFailure) -> BackingWatcher {
        let wake: OwnedDescriptor
        do {
            wake = try Syscall.eventCounter()
        } catch {
            throw WatchFailure("cannot make the watch's wake-up descriptor: \(error)")
        }
        let control = WatchControl(wake: wake)
        let (body, markMade) = try prepare(root: root, kernel: makeKernel, ownChanges: ownChanges, control: control, report: report)
        let thread: pthread_t
        do {
            thread = try Threads.spawn(body)
        } catch {
            throw WatchFailure("cannot start the watch's thread: \(error)")
        }
        return BackingWatcher(method: Kernel.method, control: control, thread: thread, markMade: markMade)
    }

    private init(method: WatchMethod, control: WatchControl, thread: pthread_t, markMade: @escaping @Sendable (Int32) -> Void) {
        self.method = method
        self.control = control
        self.thread = Mutex(thread)
        self.markMade = markMade
    }

    /// Adds the kernel's watch to the directory open (`O_RDONLY`) as `descriptor`.
    private let markMade: @Sendable (Int32) -> Void

    /// The mount has just made this directory (open `O_RDONLY | O_DIRECTORY`): it is watched
    /// from now on, before anyone else can know of it. The thread learns of the directory
    /// only when it reads the mount's own mkdir (later, and up to `readInterval` later under
    /// a stream of the mount's own changes); whatever others did in it meanwhile would have
    /// gone unseen. The kernel queues events on it after that mkdir, so the thread knows the
    /// directory by the time it reads them.
    public func watchMadeDirectory(_ descriptor: Int32) {
        guard !control.stopped.load(ordering: .relaxed) else { return }
        markMade(descriptor)
    }

    deinit {
        stop()
    }

    /// How many directories are watched, as of the last batch read.
    public var watchedDirectories: Int { control.directories.load(ordering: .relaxed) }

    /// Stops the thread (wake it with an eventfd or a pipe; never leave it blocked), closes everything. Idempotent.
    /// Called from `report` itself, it returns at once and the thread ends after that batch.
    public func stop() {
        guard !control.stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        var one: UInt64 = 1
        _ = Glibc.write(control.wake, &one, 8)
        guard let thread = thread.withLock({ $0.take() }) else { return }
        if pthread_equal(thread, pthread_self()) != 0 {
            pthread_detach(thread)
        } else {
            pthread_join(thread, nil)
        }
    }

    // MARK: Starting

    /// Sets up a watch of `root` with `Kernel` (every directory watched when it returns), and
    /// the body of the thread that reads it. The engine is handed over to that thread whole.
    private static func prepare<Kernel: KernelWatch>(root: String, kernel makeKernel: () throws(Errno) -> Kernel,
                                                     ownChanges: OwnChanges, control: WatchControl,
                                                     report: @escaping @Sendable ([ObservedChange]) -> Void) throws(WatchFailure)
        -> (body: @Sendable () -> Void, markMade: @Sendable (Int32) -> Void) {
        let method = Kernel.method
        let directory: OwnedDescriptor
        do {
            directory = try Syscall.openAt(AT_FDCWD, root, O_RDONLY | O_DIRECTORY)
        } catch {
            throw WatchFailure("cannot open the backing directory \(root): \(error)")
        }
        let kernel: Kernel
        do {
            kernel = try makeKernel()
        } catch {
            throw failure(method, starting: true, error)
        }
        let engine: WatchEngine<Kernel>
        do {
            engine = try WatchEngine(kernel: kernel, root: directory, ownChanges: ownChanges)
        } catch {
            throw failure(method, starting: false, error)
        }
        control.directories.store(engine.watchedDirectories, ordering: .relaxed)
        let handOver = HandOver(engine)
        // Marking uses only the kernel object's descriptor, which never changes, in system
        // calls any thread may make while the watch's thread reads (see `watchMadeDirectory`).
        nonisolated(unsafe) let marker = kernel
        return ({ handOver.engine.run(control: control, report: report) },
                { directory in _ = try? marker.watch(directory: directory) })
    }

    /// Words for a refusal: the limit or the permission at stake, and how to change it.
    static func failure(_ method: WatchMethod, starting: Bool, _ error: Errno) -> WatchFailure {
        func setting(_ name: String) -> String {
            let path = "/proc/sys/" + name.split(separator: ".").joined(separator: "/")
            return Syscall.readNumber(path).map(String.init) ?? "?"
        }
        switch (method, starting, error) {
        case (.inotify, false, .noSpace):
            return WatchFailure("inotify: the limit of \(setting("fs.inotify.max_user_watches")) watches (fs.inotify.max_user_watches) is reached")
        case (.inotify, true, .tooManyOpenFiles):
            return WatchFailure("inotify: the limit of \(setting("fs.inotify.max_user_instances")) instances (fs.inotify.max_user_instances) is reached")
        case (.fanotify, true, .notPermitted), (.fanotify, true, .invalidArgument):
            return WatchFailure("fanotify: not permitted, or without directory-and-name reporting (Linux 5.17 or later): \(error)")
        case (.fanotify, true, .tooManyOpenFiles):
            return WatchFailure("fanotify: the limit of \(setting("fs.fanotify.max_user_groups")) groups (fs.fanotify.max_user_groups) is reached")
        case (.fanotify, false, .noSpace):
            return WatchFailure("fanotify: the limit of \(setting("fs.fanotify.max_user_marks")) marks (fs.fanotify.max_user_marks) is reached")
        case (.fanotify, false, .notSupported), (.fanotify, false, .improperLink),
             (.fanotify, false, .operationNotSupportedByDevice):
            return WatchFailure("fanotify: the backing's filesystem gives no file handles to name directories by (\(error))")
        default:
            return WatchFailure("\(method.rawValue): \(starting ? "cannot start" : "cannot watch the backing"): \(error)")
        }
    }
}

/// Carries an engine, made on the starting thread, to the reading thread, which alone uses it
/// from then on.
private final class HandOver<Kernel: KernelWatch>: @unchecked Sendable {
    let engine: WatchEngine<Kernel>
    init(_ engine: WatchEngine<Kernel>) { self.engine = engine }
}
