import Foundation
import Glibc
import Testing

/// Changes made directly in the backing directory, behind the mount (an editor, git, rsync, a
/// sync client): the watch of the backing drops what the kernel caches for each, so the mount
/// shows the new state (contents, attributes, listings, absence) although the cache timeouts
/// are a day, and `coordfs watch --json` prints each as an event marked `outside`. Every
/// script warms the caches through the mount before it changes the backing, and waits for
/// the new state with a deadline: these tests check correctness, Scripts/bench the timing.
/// The control, `--no-watch-backing`, shows that the same changes stay hidden otherwise.
///
/// The tests run as root, where a mount watches with fanotify by default: outside events
/// then name the process that made the change (the script itself, alive all along).
@Suite(.serialized) struct OutsideChangeTests {
    /// The kinds of change `OutsideChangeTests/anOutsideChangeShowsThroughTheMount.py` makes.
    enum Change: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case writeInPlace, truncate, replaceByRename, create, delete, mkdirAndRmdir, renameFile
        case renameDirectoryWithOpenFiles, chmod, chown, utimes, xattrs, hardLink, unnamedFileLinkedIn

        var testDescription: String { rawValue }
    }

    /// Runs `Scripts/OutsideChangeTests/<name>.py` with `arguments` in `directory`; expects it
    /// to succeed and returns what it printed.
    @discardableResult
    static func python(_ name: String, _ arguments: [String], in directory: String,
                       sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let result = try run(["/usr/bin/python3", pythonScript("OutsideChangeTests/" + name)] + arguments, in: directory)
        #expect(result.status == 0 && result.errors.isEmpty, "\(name) \(arguments.joined(separator: " ")): \(result)", sourceLocation: sourceLocation)
        return result.output
    }

    /// Prepares the script's starting tree in a fresh backing, mounts with `options`, and runs
    /// the script's check in the mount with `arguments` (after the backing's path).
    static func prepareMountAndCheck(_ name: String, _ arguments: [String] = [], options: [String] = [],
                                     sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let scratch = try Scratch()
        try python(name, ["prepare", scratch.backing], in: scratch.root, sourceLocation: sourceLocation)
        try scratch.mount(options)
        defer { scratch.unmount(sourceLocation: sourceLocation) }
        return try python(name, ["check", scratch.backing] + arguments, in: scratch.mountpoint, sourceLocation: sourceLocation)
    }

    // MARK: Each kind of change

    /// With the default watch (fanotify, as root): the new state through the mount, the
    /// outside event with this process's pid, uid and name, open handles reading what handles
    /// on the bare disk read, and no event but the expected ones.
    @Test(arguments: Change.allCases)
    func anOutsideChangeShowsThroughTheMount(_ change: Change) throws {
        try Self.expectChangeShows(change, method: "fanotify", options: [])
    }

    /// The watch unprivileged mounts use, forced: the same checks, and the events carry only
    /// `outside` (inotify does not say who made a change).
    @Test(arguments: [Change.create, .writeInPlace, .delete, .renameFile, .renameDirectoryWithOpenFiles])
    func theInotifyWatchShowsTheBasicChanges(_ change: Change) throws {
        try Self.expectChangeShows(change, method: "inotify", options: ["--watch-backing", "inotify"])
    }

    static func expectChangeShows(_ change: Change, method: String, options: [String],
                                  sourceLocation: SourceLocation = #_sourceLocation) throws {
        let output = try prepareMountAndCheck("anOutsideChangeShowsThroughTheMount", [change.rawValue, method], options: options,
                                              sourceLocation: sourceLocation)
        #expect(output.hasSuffix("ok \(change.rawValue)\n"), "\(output)", sourceLocation: sourceLocation)
    }

    /// A write through the kernel's entry of a file replaced behind the mount is never lost in
    /// the replaced file: it fails with ESTALE while another node stands for the new file (the
    /// kernel looks a path up again by itself), or the old node follows the name to the new
    /// file and the write lands there.
    @Test func aWriterThroughAReplacedFilesEntryIsSentToTheNewFile() throws {
        let output = try Self.prepareMountAndCheck("aWriterThroughAReplacedFilesEntryIsSentToTheNewFile")
        let lines = output.split(separator: "\n").map(String.init)
        #expect(lines.count == 3, "\(output)")
        #expect(["write through the old entry: ESTALE", "write through the old entry: reached f"].contains(lines.first ?? ""), "\(output)")
        #expect(lines.dropFirst().first == "f: b'EW' backing: b'EW'" && lines.last == "ok", "\(output)")
    }

    // MARK: Tools that change many files

    /// `git checkout` of another branch in the backing while files are open through the mount:
    /// afterwards the mount's tree (.git included) equals the backing's byte for byte.
    @Test func gitCheckoutUnderOpenFiles() throws {
        let output = try Self.prepareMountAndCheck("gitCheckoutUnderOpenFiles")
        #expect(output == "ok\n")
    }

    /// `rsync -a --delete` into the backing: the mount's tree equals the backing's, times included.
    @Test func rsyncIntoTheBacking() throws {
        let scratch = try Scratch()
        let source = scratch.root + "/source"
        try FileManager.default.createDirectory(atPath: source, withIntermediateDirectories: false)
        try Self.python("rsyncIntoTheBacking", ["prepare", scratch.backing, source], in: scratch.root)
        try scratch.mount()
        defer { scratch.unmount() }
        let output = try Self.python("rsyncIntoTheBacking", ["check", scratch.backing, source], in: scratch.mountpoint)
        #expect(output == "ok\n")
    }

    // MARK: Overflow

    /// 100,000 creates in the backing with the daemon stopped meanwhile, so the watch's queue
    /// (16,384 events by default) surely overflows: a subscriber gets the backing's overflow
    /// marker, and afterwards nothing is stale through the mount (the listing, a file deleted
    /// and one changed during the flood). The machine's queue limits stay as they are: other
    /// tests' mounts may start their watches meanwhile.
    @Test(arguments: ["fanotify", "inotify"])
    func aFloodOverflowsTheWatchAndLeavesNothingStale(method: String) throws {
        let name = "aFloodOverflowsTheWatchAndLeavesNothingStale"
        let scratch = try Scratch()
        try Self.python(name, ["prepare", scratch.backing], in: scratch.root)
        try scratch.mount(["--watch-backing", method])
        defer { scratch.unmount() }
        let daemon = try #require(scratch.daemonID)
        let output = try Self.python(name, ["check", scratch.backing, String(daemon), method], in: scratch.mountpoint)
        #expect(output.hasPrefix("overflow markers: [{") && output.contains(#""reason": "backing""#) && output.hasSuffix("\nok\n"),
                "\(output)")
    }

    // MARK: Unprivileged

    /// Whether this machine lets root make a user namespace (where it has no capabilities
    /// outside). A non-root user cannot mount here at all (/dev/fuse is root's, mode 0600).
    static let userNamespacesWork = (try? run(["unshare", "--user", "--map-root-user", "--mount", "true"]))?.status == 0

    /// A daemon without privileges outside its user namespace (root of that namespace only,
    /// mounting in its own mount namespace, with the default options) watches the backing
    /// all the same (fanotify without privileges, or inotify): create, write in place, rename
    /// and delete show, with outside events that name no other process than the one that
    /// made the change.
    @Test(.enabled(if: userNamespacesWork, "unshare --user fails on this machine: no unprivileged mount to test"))
    func anUnprivilegedMountWatchesTheBacking() throws {
        let scratch = try Scratch()
        let result = try run(["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private",
                              "/usr/bin/python3", pythonScript("OutsideChangeTests/anUnprivilegedMountWatchesTheBacking"),
                              scratch.backing, scratch.mountpoint], in: scratch.root)
        #expect(result.status == 0 && result.errors.isEmpty, "\(result)")
        #expect(result.output.hasPrefix("in a user namespace: True\nwatch: fanotify\n")
                    || result.output.hasPrefix("in a user namespace: True\nwatch: inotify\n"), "\(result)")
        #expect(result.output.contains("\ndaemon exit 0\n") && result.output.hasSuffix("\nok\n"), "\(result)")
    }

    /// A mount whose watch cannot start (a user namespace of its own with no inotify watches
    /// and no fanotify marks to give) says so at mount time and caches for a second instead
    /// of a day: an in-place write, a create and a deletion in the backing still show.
    @Test(.enabled(if: userNamespacesWork, "unshare --user fails on this machine: no limits of its own to set"))
    func aMountThatCannotWatchCachesBriefly() throws {
        let scratch = try Scratch()
        let result = try run(["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private",
                              "/usr/bin/python3", pythonScript("OutsideChangeTests/aMountThatCannotWatchCachesBriefly"),
                              scratch.backing, scratch.mountpoint], in: scratch.root)
        #expect(result.status == 0 && result.errors.isEmpty, "\(result)")
        #expect(result.output == "watch: None\ndaemon exit 0\nwarned: True\nok\n", "\(result)")
    }

    // MARK: Presenters

    /// A presenter of a file hears of changes made to it behind the mount as it hears of
    /// changes through it: did-change for a write, did-move for a rename (and it then presents
    /// the new path), did-delete for a deletion.
    @Test func presentersHearOfOutsideChanges() throws {
        try withMount { scratch in
            #expect(try shell("printf 'first\\n' > presented", in: scratch.backing).status == 0)
            let presenter = try ControlSocketTests.startPresenter(in: scratch, of: "presented", answering: "save", behaviour: "silent")
            defer { presenter.stop() }
            #expect(try shell("printf 'second\\n' >> presented", in: scratch.backing).status == 0)
            #expect(presenter.eventuallyPrints("notify did-change /presented"), "\(presenter.output)")
            #expect(rename(scratch.backing + "/presented", scratch.backing + "/moved") == 0)
            #expect(presenter.eventuallyPrints("notify did-move /presented"), "\(presenter.output)")
            #expect(unlink(scratch.backing + "/moved") == 0)
            #expect(presenter.eventuallyPrints("notify did-delete /moved"), "\(presenter.output)")
            #expect(presenter.asks.isEmpty, "\(presenter.output)") // nothing through the mount asked it anything
        }
    }

    // MARK: The control

    /// `--no-watch-backing`: with the caches warm, an in-place write, a chmod and a deletion in
    /// the backing stay invisible through the mount, and no outside event comes.
    @Test func withoutTheWatchOutsideChangesStayHidden() throws {
        let output = try Self.prepareMountAndCheck("withoutTheWatchOutsideChangesStayHidden", options: ["--no-watch-backing"])
        #expect(output == "watch: None\nthrough the mount: [(b'old content\\n', 420, 12)]\noutside events: []\n")
    }
}
