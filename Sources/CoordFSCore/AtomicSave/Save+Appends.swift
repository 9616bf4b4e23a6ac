import Glibc
import SystemPackage

// Appends: changes at or past the committed end go to the committed file itself, behind
// the size everyone else sees, until they commit in place, stage a copy or roll back.
extension Save {
    /// Whether a change in `range` goes to the committed file as an append: nothing is staged,
    /// the file exists under its name, and the change lands at or past the committed end. The
    /// first such change starts the append: records it in the journal, reopens the file for
    /// writing and sets the boundary, before any byte lands. Whatever stops that (no journal,
    /// a file the daemon may not reopen, a path too long to record) leaves staging to do.
    func appends(_ range: ChangeRange, _ state: inout State) -> Bool {
        if let appending = state.appending {
            switch range {
            case .anywhere: return false
            case .atEnd: return true
            case .from(let offset): return offset >= appending.committedSize
            }
        }
        guard let journal, state.exists, !state.nameRemovedThroughMount, !range.isAnywhere,
              let status = try? Syscall.stat(state.current.raw), status.st_mode & S_IFMT == S_IFREG else { return false }
        if case .from(let offset) = range, offset < status.st_size { return false }
        let file = FileIdentity(status)
        do throws(Errno) {
            let writable = try Syscall.reopen(state.current.raw, O_RDWR)
            let slot = try journal.begin(file: file, committedSize: Int64(status.st_size), directory: state.directory, name: state.name)
            let shared = SharedDescriptor(writable)
            state.current = shared
            state.currentIsWritable = true
            state.appending = Appending(file: file, committedSize: status.st_size, slot: slot, writable: shared)
            boundary.withLock { $0 = AppendBoundary(file: file, committedSize: Int64(status.st_size)) }
            return true
        } catch {
            return false
        }
    }

    /// An append turned into a staged save (a change inside the committed range, a truncate,
    /// or a commit that found the name no longer naming the file): the temp just staged from
    /// the appended file holds what the owner sees; the file goes back to its committed size, so
    /// the commit replaces an intact committed version, and the temp's baseline is that version.
    func endAppendByStaging(_ appending: Appending, _ state: inout State) throws(Errno) {
        do throws(Errno) {
            try Syscall.truncate(appending.writable.raw, appending.committedSize)
            if var staged = state.staged.take() {
                staged.baseline = SaveBaseline(try Syscall.stat(appending.writable.raw))
                state.staged = consume staged
            }
        } catch {
            state.failure = error
            throw error
        }
        endAppend(appending, &state)
    }

    /// The append is over (committed, rolled back, or turned into a staged save): its record
    /// and boundary go. A record that cannot be cleared is left for recovery, which finds the
    /// file at its committed size or no longer the same (a rollback or a staged save), or
    /// would cut back a committed append (the caller fails the commit instead).
    func endAppend(_ appending: Appending, _ state: inout State) {
        state.appending = nil
        try? journal?.end(appending.slot)
        boundary.withLock { $0 = nil }
    }

    /// Cuts an append that will not commit (a failed save, an unlinked file's) back to the
    /// committed size when the file still has a name, and ends it.
    func rollBackAppend(_ state: inout State) {
        guard let appending = state.appending else { return }
        if !state.discarded { try? Syscall.truncate(appending.writable.raw, appending.committedSize) }
        endAppend(appending, &state)
    }

    /// Commits an append in place: no rename (nothing is replaced), an fsync only when the
    /// durability syncs every commit (`file`, `full`: an append over nothing is like a new
    /// file for `replacing`), then the record goes and the new size is everyone's.
    func commitAppend(_ appending: Appending, durability: Durability, nodes: NodeTable,
                              _ state: inout State) throws(Errno) -> CommitReport {
        do throws(Errno) {
            if durability.forCommit(replacingExistingFile: false).syncsFile {
                try Syscall.synchronize(state.current.raw, dataOnly: false)
            }
            try journal?.end(appending.slot)
        } catch {
            state.failure = error
            throw error
        }
        state.appending = nil
        boundary.withLock { $0 = nil }
        let size = Int64(try Syscall.stat(state.current.raw).st_size)
        var report = CommitReport(created: false, path: nodes.path(of: node), size: size, replaced: nil)
        report.appendedFrom = Int64(appending.committedSize)
        return report
    }
}
