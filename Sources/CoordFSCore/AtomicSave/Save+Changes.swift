import Glibc
import SystemPackage

// Changes and the owner's view: what the owner reads and sees, and every change it makes,
// staged in a temp or appended to the committed file.
extension Save {
    /// The descriptor the owner's reads go to now (held by the caller for the read's duration).
    public var current: SharedDescriptor { state.withLock { $0.current } }

    /// The attributes of the owner's version (see `shownToOwner`). A discarded save shows what
    /// its unlinked file really has.
    public func currentStatus() throws(Errno) -> stat {
        let (current, isTemp, lostName) = state.withLock { state in
            (state.current, state.staged != nil && !state.discarded,
             state.nameRemovedThroughMount ? (directory: state.directory, name: state.name) : nil)
        }
        var status = try withExtendedLifetime(current) { () throws(Errno) -> stat in try Syscall.stat(current.raw) }
        if isTemp, lostName == nil { return Self.shownToOwner(status) }
        // The committed file's links: the temp's file's while the owner still has its name,
        // else the committed file's own, whose names the owner's changes do not touch.
        let committed = node.backing
        var links = isTemp ? withExtendedLifetime(committed) { (try? Syscall.statOfPathDescriptor(committed.descriptor.raw).st_nlink) ?? 0 } : status.st_nlink
        // The version store's link, if it took the file's last name, is not one of its names.
        if node.keptAfterLastName.load(ordering: .relaxed), links > 0 { links -= 1 }
        if let lostName {
            // The owner took the name away (an unlink, or a rename over it): as on a plain
            // disk, the file has its other links only (0 when that name was its last), though
            // the backing may still hold the name until a pending file lands there.
            let file = isTemp ? committed.identity : FileIdentity(status)
            let stillNamed = (try? Syscall.stat(at: lostName.directory.directory, lostName.name)).map(FileIdentity.init) == file
            if stillNamed, links > 0 { links -= 1 }
        }
        status.st_nlink = links
        return status
    }

    /// A temp's attributes as its owner sees them: an unnamed temp has no link yet, and is
    /// shown the one its commit gives it, as its file (new or saved) has on a plain disk.
    public static func shownToOwner(_ status: stat) -> stat {
        var shown = status
        if shown.st_nlink == 0 { shown.st_nlink = 1 }
        return shown
    }

    /// Where the commit will go, and whether that name exists in the backing yet.
    public var target: (directory: Node, name: FileName, exists: Bool) {
        state.withLock { ($0.directory, $0.name, $0.exists) }
    }

    /// Whether the file, created and not committed yet, was renamed by its owner over a
    /// committed file that the backing still holds under its name until the commit.
    public var landsOnAnotherFile: Bool { state.withLock { !$0.exists && $0.landsOnAnotherFile } }

    public var hasUncommittedChanges: Bool { state.withLock { $0.staged != nil || $0.appending != nil } }

    /// Whether the owner's changes so far are an append to the committed file (for tests).
    public var isAppending: Bool { state.withLock { $0.appending != nil } }

    /// A failed save will not commit: new opens, even the owner's, see the committed version.
    public var hasFailed: Bool { state.withLock { $0.failure != nil } }

    /// fsync(2) or fdatasync(2) of the owner's version. A failure while the save holds
    /// uncommitted changes fails the save: the kernel may have dropped the pages it could not
    /// write (a later fsync then passes without them), so the temp, or the appended bytes, no
    /// longer surely hold what the owner wrote, and must not commit.
    public func synchronize(dataOnly: Bool) throws(Errno) {
        let current = self.current
        do throws(Errno) {
            try withExtendedLifetime(current) { () throws(Errno) in try Syscall.synchronize(current.raw, dataOnly: dataOnly) }
        } catch {
            state.withLock { state in
                if state.current === current && (state.staged != nil || state.appending != nil) && !state.discarded {
                    state.failure = state.failure ?? error
                }
            }
            throw error
        }
    }

    /// Runs a change (write, fallocate, copy, metadata) against the temp, staging it first; a
    /// change `range` says lands at or past the committed end goes to the file itself instead,
    /// as an append (see the type's notes). A failure of the change itself marks the save
    /// failed: it will not commit.
    public func change<R>(at range: ChangeRange = .anywhere,
                   _ body: (Int32) throws(Errno) -> R) throws(Errno) -> R {
        try change(truncating: false, range: range) { (descriptor, _) throws(Errno) -> R in try body(descriptor) }
    }

    /// Truncates the owner's version to `length` (a setattr, or O_TRUNC at open), then runs
    /// `then` on it. A temp staged for this very truncation to zero starts empty, with its times
    /// set by the staging: truncating it again would cost three system calls and show nothing.
    public func truncate(to length: off_t,
                  then: (Int32) throws(Errno) -> Void = { _ throws(Errno) in }) throws(Errno) {
        try change(truncating: length == 0, range: .anywhere) { (descriptor, stagedEmpty) throws(Errno) in
            if !stagedEmpty { try StagedFile.truncate(descriptor, to: length) }
            try then(descriptor)
        }
    }

    /// `change`, where `truncating` stages an empty temp instead of a copy when nothing is staged
    /// yet, and `body` learns whether this call did so.
    private func change<R>(truncating: Bool, range: ChangeRange,
                           _ body: (Int32, _ stagedEmpty: Bool) throws(Errno) -> R) throws(Errno) -> R {
        try state.withLock { (state) throws(Errno) -> R in
            if let failure = state.failure { throw failure }
            if state.discarded || state.inPlace {
                // The file was unlinked (nobody else can reach it), or it coordinates itself:
                // changes go straight to it.
                if !state.currentIsWritable {
                    state.current = SharedDescriptor(try Syscall.reopen(state.current.raw, O_RDWR))
                    state.currentIsWritable = true
                }
                return try body(state.current.raw, false)
            }
            var stagedEmpty = false
            if state.staged == nil && appends(range, &state) {
                do throws(Errno) {
                    return try body(state.current.raw, false)
                } catch {
                    state.failure = error
                    throw error
                }
            }
            if state.staged == nil {
                // While appending, `current` holds the committed prefix and the appended bytes: the
                // copy takes both.
                let staged = try staging.stage(in: state.directory, replacing: state.current.raw, copyContents: !truncating,
                                               owner: nil, mode: 0)
                // A duplicate, not a reopen through /proc: cheaper, and one open file, so the
                // temp's descriptor closes at the commit without ending it (an end can cost: NFS
                // flushes, ext4 may write back); it ends with the save, after the replies.
                state.current = SharedDescriptor(try Syscall.duplicate(staged.descriptor.raw))
                state.currentIsWritable = true
                state.staged = consume staged
                stagedEmpty = truncating
                if let appending = state.appending { try endAppendByStaging(appending, &state) }
            }
            do throws(Errno) {
                return try body(state.current.raw, stagedEmpty)
            } catch {
                state.failure = error
                throw error
            }
        }
    }
}
