import Glibc
import SystemPackage

// The commit: the temp in place of its target, with what it finds changed behind the mount
// kept beside it, a refusal by fencing, and the commit of a file whose name is gone.
extension Save {
    /// Commits uncommitted changes: fsync as `durability` asks, then the temp in place of the
    /// target (see `StagedFile.commit`). Returns nil when there was nothing to commit; throws
    /// the failure of an earlier change. With `onlyWithoutWriters`, commits only if no writer
    /// joined meanwhile (the last writer's release): a writer that joined commits at its own close.
    /// `willKeep` hears the name a conflict copy is about to be linked under. `stillCovered` is asked just
    /// before the backing changes: false refuses the commit (see `CommitReport.fencedOff`).
    /// `thenInPlace`: the file turned out to coordinate itself (see `writesInPlace`): once
    /// committed, every later change of this save goes to the file itself.
    /// `conflictCopy` says whether an outside version found under a name is also kept beside it.
    /// `keepVersion` keeps the file about to be replaced (its directory and name) in the version store, and returns how to take it back should the commit fail.
    public func commit(durability: Durability, nodes: NodeTable, onlyWithoutWriters: Bool = false, thenInPlace: Bool = false,
                willKeep: (_ directory: Node, FileName) -> Void = { _, _ in },
                keepVersion: (_ directory: Node, FileName, VersionKind) -> (() -> Void)? = { _, _, _ in nil },
                conflictCopy: (FileName) -> Bool = { _ in true },
                stillCovered: () -> Bool = { true }) throws(Errno) -> CommitReport? {
        try state.withLock { (state) throws(Errno) -> CommitReport? in
            let report = try commitLocked(&state, durability: durability, nodes: nodes, onlyWithoutWriters: onlyWithoutWriters, willKeep: willKeep,
                                          keepVersion: keepVersion, conflictCopy: conflictCopy, stillCovered: stillCovered)
            if thenInPlace && !state.discarded && state.failure == nil && (!onlyWithoutWriters || state.writers == 0) {
                try writeInPlaceFromNowOn(&state)
            }
            return report
        }
    }

    /// `commit`'s work, under the save's lock.
    private func commitLocked(_ state: inout State, durability: Durability, nodes: NodeTable, onlyWithoutWriters: Bool,
                              willKeep: (_ directory: Node, FileName) -> Void,
                              keepVersion: (_ directory: Node, FileName, VersionKind) -> (() -> Void)?,
                              conflictCopy: (FileName) -> Bool,
                              stillCovered: () -> Bool) throws(Errno) -> CommitReport? {
        if onlyWithoutWriters && state.writers > 0 { return nil }
        if let failure = state.failure { throw failure }
        if let appending = state.appending, !state.discarded {
            let found = try? Syscall.stat(at: state.directory.directory, state.name)
            if found.map(FileIdentity.init) == appending.file { return try commitAppend(appending, durability: durability, nodes: nodes, &state) }
            if state.nameRemovedThroughMount {
                // The owner took the name away: the appended bytes are in the file, which
                // the names it has left show, as on a plain disk.
                endAppend(appending, &state)
                return nil
            }
            // Moved, replaced or deleted behind the mount: the append commits as a save would,
            // from a copy, with what it found kept beside it (see `FoundAtCommit`).
            do throws(Errno) {
                let staged = try staging.stage(in: state.directory, replacing: appending.writable.raw, copyContents: true,
                                               owner: nil, mode: 0)
                state.current = SharedDescriptor(try Syscall.duplicate(staged.descriptor.raw))
                state.staged = consume staged
            } catch {
                state.failure = error
                throw error
            }
            try endAppendByStaging(appending, &state)
        }
        guard !state.discarded, let staged = state.staged.take() else { return nil }
        let directory = state.directory.directory
        if !stillCovered() { return try keepFencedOff(staged, &state, nodes: nodes, willKeep: willKeep) }
        var replacing = state.exists
        let newFile = !state.exists
        var keptAs: FileName?
        var changedBehind = false
        if state.exists {
            // The one fstatat a commit costs: what the name names now.
            let found = try? Syscall.stat(at: directory, state.name)
            switch FoundAtCommit.classify(found, file: node.identity, baseline: staged.baseline,
                                          removedThroughTheMount: state.nameRemovedThroughMount) {
            case .asStaged:
                break
            case .removedThroughTheMount:
                return try Self.commitWithoutItsName(staged, of: node, state: &state, nodes: nodes)
            case .goneBehindTheMount:
                replacing = false
            case .changedBehindTheMount:
                changedBehind = true
                // With versions, the outside version may be kept as a version only (see `conflictCopy`).
                guard conflictCopy(state.name) else { break }
                do throws(Errno) {
                    let folder = state.directory
                    keptAs = try ConflictName.keep(state.name, in: directory, willLink: { willKeep(folder, $0) })
                } catch .noSuchFileOrDirectory {
                    replacing = false // deleted meanwhile
                } catch {
                    // Nothing changed in the backing: the outside version stays, the save fails.
                    state.failure = error
                    staged.discard(in: directory)
                    throw error
                }
            }
        }
        var replacedAnother: FileIdentity?
        if !state.exists, state.landsOnAnotherFile, let found = try? Syscall.stat(at: directory, state.name) {
            // A new file renamed by its owner over another: the commit replaces that one.
            replacing = true
            replacedAnother = FileIdentity(found)
        }
        // The version the rename is about to replace: the file as staged from, or the one
        // found changed behind the mount (then also kept beside it, as `keptAs`).
        let takeBackVersion = replacing && (!state.replacesOwnCommit || changedBehind)
            ? keepVersion(state.directory, state.name, changedBehind ? .conflict : .save) : nil
        let directorySyncFailure: Errno?
        do throws(Errno) {
            directorySyncFailure = try staged.commit(in: directory, as: state.name, replacingExistingFile: replacing,
                                                     durability: durability.forCommit(replacingExistingFile: replacing))
        } catch {
            state.failure = error
            staged.discard(in: directory)
            if let keptAs { ConflictName.takeBack(keptAs, of: state.name, in: directory) }
            takeBackVersion?()
            throw error
        }
        if takeBackVersion != nil, let replacedAnother {
            // The store's link keeps the other file alive, but is none of its names: a node
            // still open on it (its own save may be pending) must not count it.
            nodes.node(identity: replacedAnother)?.keptAfterLastName.store(true, ordering: .relaxed)
        }
        state.exists = true
        state.landsOnAnotherFile = false
        state.replacesOwnCommit = true
        if !replacing {
            // The name is the node's again (a watch of the backing may have seen it deleted
            // behind the mount, and the node table marked the node unlinked).
            nodes.moved(node, to: state.directory, name: state.name)
        }
        let status = try Syscall.stat(state.current.raw)
        let identity = FileIdentity(status)
        var replaced: NodeBacking?
        if identity != node.identity {
            replaced = nodes.replaceBacking(of: node, with: try Syscall.reopen(state.current.raw, Linux.O_PATH), identity: identity)
        }
        var report = CommitReport(created: !replacing, path: nodes.path(of: node), size: Int64(status.st_size), replaced: replaced)
        report.directorySyncFailure = directorySyncFailure
        report.namedNewFile = newFile
        if let keptAs {
            let folder = state.directory
            report.conflict = ConflictCopy(directory: folder, name: keptAs, path: nodes.path(of: folder)?.appending(keptAs))
        }
        return report
    }

    /// After a commit: the committed file is what the owner reads and writes from now on.
    private func writeInPlaceFromNowOn(_ state: inout State) throws(Errno) {
        guard !state.inPlace else { return }
        if !state.currentIsWritable {
            state.current = SharedDescriptor(try Syscall.reopen(state.current.raw, O_RDWR))
            state.currentIsWritable = true
        }
        state.inPlace = true
    }

    /// Whether changes go to the file itself now (see `commit(thenInPlace:)`).
    public var writesInPlace: Bool { state.withLock { $0.inPlace } }

    /// A commit refused by fencing: the staged version is kept beside the file under a conflict
    /// name, the file stays as it is (another host may be writing it), and the save fails with
    /// EIO. Should the link fail too, the temp stays staged until the save ends.
    private func keepFencedOff(_ staged: consuming StagedFile, _ state: inout State, nodes: NodeTable,
                               willKeep: (_ directory: Node, FileName) -> Void) throws(Errno) -> CommitReport {
        let folder = state.directory
        state.failure = .ioError
        let keptAs: FileName
        do throws(Errno) {
            keptAs = try ConflictName.keep(file: staged.descriptor.raw, besides: state.name, in: folder.directory,
                                           willLink: { willKeep(folder, $0) })
        } catch {
            state.staged = consume staged
            throw .ioError
        }
        let size = (try? Syscall.stat(staged.descriptor.raw).st_size).map(Int64.init) ?? 0
        staged.discard(in: folder.directory)
        var report = CommitReport(created: false, path: nodes.path(of: node), size: size, replaced: nil)
        report.conflict = ConflictCopy(directory: folder, name: keptAs, path: nodes.path(of: folder)?.appending(keptAs))
        report.fencedOff = true
        return report
    }

    /// The commit of a file whose name its owner took away before it closed (an unlink, or a
    /// rename of another file over it) while the file kept another hard link: on a plain disk
    /// the owner's writes reach that other name, and neither bring the removed name back nor
    /// replace the file now there. The node does not know that name (the kernel opens by
    /// inode), so the temp's contents are written into the file itself, which every name it has
    /// left shows. Not atomic for readers of those names: the price of keeping their link.
    /// A file with no name left has nowhere to go: nothing is committed, and the node shows
    /// the temp from then on, as a plain disk shows the owner's writes to whoever still has
    /// the unlinked file open.
    private static func commitWithoutItsName(_ staged: consuming StagedFile, of node: Node, state: inout State, nodes: NodeTable) throws(Errno) -> CommitReport? {
        let directory = state.directory.directory
        defer { staged.discard(in: directory) }
        let committed = node.backing
        let links = withExtendedLifetime(committed) { (try? Syscall.statOfPathDescriptor(committed.descriptor.raw).st_nlink) ?? 0 }
        guard links > 0 else {
            state.discarded = true
            show(staged, as: node, in: nodes)
            return nil
        }
        do throws(Errno) {
            let file = try withExtendedLifetime(committed) { () throws(Errno) -> OwnedDescriptor in
                try Syscall.reopen(committed.descriptor.raw, O_RDWR | O_TRUNC)
            }
            try staged.copyContents(into: file.raw)
            state.current = SharedDescriptor(file)
            state.currentIsWritable = true
        } catch {
            state.failure = error
            throw error
        }
        let size = (try? Syscall.stat(state.current.raw).st_size).map(Int64.init) ?? 0
        return CommitReport(created: false, path: nodes.path(of: node), size: size, replaced: nil)
    }
}
