import CFuse
import Glibc
import Logging
import CoordFSCore
import SystemPackage

/// Why a mount could not start, in words for the person who asked for it.
public struct MountFailure: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// One mount's life: create the libfuse session, mount, serve until unmounted or signalled,
/// unmount. Everything libfuse allocates is freed here and nowhere else.
public final class MountSession {
    public let backing: String
    public let mountpoint: String
    /// The mount's shared state; the control socket serves its events, presenters and claims.
    public let fileSystem: FileSystem
    private let logger: Logger
    /// The operations table must outlive the session; libfuse keeps a copy, we keep ours.
    private var operations: fuse_lowlevel_ops
    private var session: OpaquePointer?
    /// argv for libfuse, NULL-terminated, owned here (strdup'd strings in an allocated array).
    private var arguments: UnsafeMutableBufferPointer<UnsafeMutablePointer<CChar>?>
    /// Opens the backing directory and creates the session; nothing is mounted yet. `cluster`:
    /// the cluster's events, which deliver other hosts' changes through `inbox`.
    public init(backing: String, mountpoint: String, options: MountOptions, cluster: ClusterEventLink? = nil,
                inbox: ChangeInbox = ChangeInbox(), versions: (any VersionStoring)? = nil, logger: Logger) throws(MountFailure) {
        self.backing = backing
        self.mountpoint = mountpoint
        self.logger = logger
        Syscall.raiseDescriptorLimit()
        umask(0) // callers' modes get their own umask (see `FileSystem.creatingForCaller`); ours must not apply
        var options = options
        let ownChanges = OwnChanges(enabled: true)
        let watcher = Self.watch(backing, &options, ownChanges, inbox, logger)
        let notifier = KernelNotifier()
        let mount: CoordinatedMount
        do {
            mount = try CoordinatedMount(backing: backing, options: options, kernel: notifier, ownChanges: ownChanges,
                                         watcher: watcher, cluster: cluster, versions: versions, logger: logger)
        } catch {
            watcher?.stop()
            throw MountFailure("cannot open the backing directory \(backing): \(error)")
        }
        inbox.deliver(to: mount)
        // Room for open files besides the nodes' descriptors.
        fileSystem = FileSystem(mount: mount, notifier: notifier, maxNodes: options.maxNodes ?? Syscall.descriptorLimit() * 3 / 4)
        operations = FileSystem.makeOperations()
        if options.readOnly {
            logger.info("read-only: leftovers of an earlier run, if any, stay in the backing until a read-write mount")
        } else {
            Self.recoverLeftovers(mount, logger: logger)
        }

        var mountOptions = ["subtype=coordfs", "fsname=\(Self.escapeOption(backing))"]
        if options.readOnly { mountOptions.append("ro") }
        if options.allowOther {
            // Other users reach the backing through a daemon that may be root: the kernel must
            // check their permissions against the attributes we report. Without allow_other
            // only the mounting user gets in, the backing checks its access as that user, and
            // the kernel is spared a GETATTR of the parent after every change in a directory.
            mountOptions += ["allow_other", "default_permissions"]
        }
        let words = ["coordfs", "-o", mountOptions.joined(separator: ",")]
        arguments = .allocate(capacity: words.count + 1)
        for (index, word) in words.enumerated() { arguments[index] = strdup(word) }
        arguments[words.count] = nil
        var fuseArguments = fuse_args(argc: Int32(words.count), argv: arguments.baseAddress, allocated: 0)
        let userdata = Unmanaged.passUnretained(fileSystem).toOpaque()
        session = withUnsafePointer(to: &operations) { cfuse_session_new(&fuseArguments, $0, userdata) }
        guard let session else {
            freeArguments()
            fileSystem.evictor.stop()
            watcher?.stop()
            throw MountFailure("libfuse could not create a session (see the message above)")
        }
        notifier.attach(session)
    }

    /// Starts the watch of the backing that `options` ask for. A mount that should watch and
    /// cannot (limits, permissions) says so and shortens its cache timeouts instead, so that
    /// changes made behind it show within a second rather than a day later.
    private static func watch(_ backing: String, _ options: inout MountOptions, _ ownChanges: OwnChanges,
                              _ inbox: ChangeInbox, _ logger: Logger) -> BackingWatcher? {
        guard options.watchBacking else {
            ownChanges.setEnabled(false)
            return nil
        }
        do throws(WatchFailure) {
            let watcher = try BackingWatcher.start(root: backing, method: options.watchMethod, ownChanges: ownChanges,
                                                   report: { batch in inbox.applyOutside(batch) })
            ownChanges.setEnabled(watcher.method == .inotify)
            logger.info("watching the backing for changes made directly in it",
                        metadata: ["method": "\(watcher.method)", "directories": "\(watcher.watchedDirectories)"])
            return watcher
        } catch {
            ownChanges.setEnabled(false)
            let timeout = MountOptions.unwatchedTimeout
            options.attributeTimeout = min(options.attributeTimeout, timeout)
            options.entryTimeout = min(options.entryTimeout, timeout)
            options.keepPageCache = false
            logger.warning("cannot watch the backing for changes made directly in it (\(error)); the kernel caches for \(timeout) s instead, so such changes show within that (use --no-watch-backing if nothing changes the backing but this mount)")
            return nil
        }
    }

    /// Moves temps a crash left in the backing to the recovery folder, before anyone can open
    /// the files they were saving; committed files are untouched.
    private static func recoverLeftovers(_ mount: CoordinatedMount, logger: Logger) {
        do throws(Errno) {
            for append in try AppendJournal.rollBack(backingRoot: mount.nodes.root.directory) {
                Instruments.saveRecovered()
                logger.warning("recovered an unfinished append from an earlier run", metadata: ["file": "\(append)"])
            }
        } catch {
            logger.error("could not roll back unfinished appends", metadata: ["error": "\(error)"])
        }
        do throws(Errno) {
            for file in try Recovery.sweep(backingRoot: mount.nodes.root.directory) {
                Instruments.saveRecovered()
                logger.warning("recovered an unfinished save from an earlier run", metadata: ["file": "\(file)"])
            }
        } catch {
            logger.error("could not sweep the backing for unfinished saves", metadata: ["error": "\(error)"])
        }
    }

    deinit {
        if let session { fuse_session_destroy(session) }
        freeArguments()
    }

    private func freeArguments() {
        for argument in arguments { free(argument) }
        arguments.deallocate()
        arguments = UnsafeMutableBufferPointer(start: nil, count: 0)
    }

    /// libfuse's option parser splits on commas; a backslash keeps one in a value.
    private static func escapeOption(_ value: String) -> String {
        var escaped = ""
        for character in value {
            if character == "\\" || character == "," { escaped.append("\\") }
            escaped.append(character)
        }
        return escaped
    }

    /// Mounts and installs SIGINT/SIGTERM/SIGHUP handlers that end the loop.
    /// Tells the mount which id and device the kernel gave it, as /proc names them (locks in
    /// locks and open files in /proc/PID/fdinfo): from the mount's line in mountinfo (the mountpoint is
    /// canonical: the command line resolved it).
    private func noteMountDevice() {
        guard let entry = MountTable.current().entries.last(where: { $0.mountpoint == mountpoint && $0.filesystemType == "fuse.coordfs" }) else {
            logger.warning("cannot find the mount in mountinfo: files locked through it are not known as locked")
            return
        }
        fileSystem.mount.kernelMount.set(id: entry.id, major: entry.major, minor: entry.minor)
    }

    public func mount() throws(MountFailure) {
        guard let session else { throw MountFailure("no session") }
        // Whoever started us may have left these blocked (the mask survives exec); they must
        // reach the handlers below, or SIGTERM would never unmount.
        var stopSignals = sigset_t()
        sigemptyset(&stopSignals)
        for signal in [SIGINT, SIGTERM, SIGHUP] { sigaddset(&stopSignals, signal) }
        pthread_sigmask(SIG_UNBLOCK, &stopSignals, nil)
        if fuse_set_signal_handlers(session) != 0 {
            throw MountFailure("cannot install signal handlers")
        }
        if fuse_session_mount(session, mountpoint) != 0 {
            fuse_remove_signal_handlers(session)
            throw MountFailure("cannot mount \(mountpoint) (see the message above)")
        }
        // Before the loop reads the kernel's INIT: lets programs map files being saved shared.
        let custom = cfuse_session_ask_for_shared_mmap(session)
        if custom != 0 {
            logger.warning("cannot watch the INIT exchange; shared mappings of files being saved will fail with ENODEV",
                           metadata: ["error": "\(Errno(rawValue: -custom))"])
        }
        noteMountDevice()
        logger.info("mounted", metadata: ["backing": "\(backing)", "mountpoint": "\(mountpoint)"])
    }

    /// Serves requests until the mount goes away or a signal arrives, then unmounts.
    /// `stopping` runs as soon as the loop ends, before the unmount (a service manager hears it).
    /// Returns 0 on a clean end.
    public func serve(stopping: () -> Void = {}) -> Int32 {
        guard let session else { return 1 }
        let options = fileSystem.options
        let result = cfuse_session_loop_mt(session, options.cloneDevice ? 1 : 0, options.maxIdleThreads, options.maxThreads)
        stopping()
        fileSystem.mount.watcher?.stop()
        fileSystem.evictor.stop()
        fileSystem.notifier.drain()
        fuse_session_unmount(session)
        fuse_remove_signal_handlers(session)
        logger.info("unmounted", metadata: ["mountpoint": "\(mountpoint)"])
        // A signal ends the loop with the signal's number; that is a requested, clean end.
        return result < 0 ? 1 : 0
    }
}
