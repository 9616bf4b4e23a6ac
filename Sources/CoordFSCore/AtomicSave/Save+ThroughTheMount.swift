import Glibc
import SystemPackage

// Removals and renames through the mount: a save thrown away, its target moved, and the
// committed file's names or attributes changed by the mount itself.
extension Save {
    /// Throws away uncommitted changes (the owner unlinked the file, or the save failed).
    /// `showingUnlinkedIn`: the file lost its last name through the mount: nothing will be
    /// committed, but the node shows the owner's version from now on, as a plain disk shows
    /// the unlinked file to whoever still has it open.
    public func discard(showingUnlinkedIn nodes: NodeTable? = nil) {
        let threwAway = state.withLock { state in
            let first = !state.discarded
            let appended = state.appending != nil
            state.discarded = true
            rollBackAppend(&state)
            guard let staged = state.staged.take() else { return first && appended }
            if let nodes { Self.show(staged, as: node, in: nodes) }
            staged.discard(in: state.directory.directory)
            return first
        }
        if threwAway { Instruments.savesDiscarded.increment() }
    }

    /// Makes the temp the node's file (see `discard(showingUnlinkedIn:)`).
    static func show(_ staged: borrowing StagedFile, as node: Node, in nodes: NodeTable) {
        guard let status = try? Syscall.stat(staged.descriptor.raw), let kept = try? Syscall.duplicate(staged.descriptor.raw) else { return }
        nodes.replaceBacking(of: node, with: kept, identity: FileIdentity(status))
    }

    /// Throws away uncommitted changes of a failed save at its end, keeping the committed file.
    /// Returns where the file would have been when it never had a name (its first save
    /// failed): nothing of it is left, and whoever still shows that name must drop it.
    @discardableResult
    public func discardIfFailed() -> (directory: Node, name: FileName)? {
        let (threwAway, nameless) = state.withLock { state -> (Bool, (Node, FileName)?) in
            guard state.failure != nil, state.writers == 0 else { return (false, nil) }
            rollBackAppend(&state)
            let nameless = state.exists ? nil : (state.directory, state.name)
            guard let staged = state.staged.take() else { return (false, nameless) }
            staged.discard(in: state.directory.directory)
            return (true, nameless)
        }
        if threwAway { Instruments.savesDiscarded.increment() }
        return nameless
    }

    /// The owner renamed the file: the pending commit goes to the new name.
    public func retarget(directory: Node, name: FileName, overAnotherFile: Bool = false) {
        state.withLock { state in
            if !state.exists { state.landsOnAnotherFile = overAnotherFile }
            // A named temp lives beside its target: when the directory changes, it moves too.
            if state.directory !== directory, let staged = state.staged.take() {
                _ = try? staged.move(from: state.directory.directory, to: directory.directory)
                state.staged = consume staged
            }
            state.directory = directory
            state.name = name
            if let appending = state.appending {
                journal?.move(appending.slot, file: appending.file, committedSize: Int64(appending.committedSize), directory: directory, name: name)
            }
            // The new name names the file, and the rename moved its change time.
            state.nameRemovedThroughMount = false
            rebaseline(&state)
        }
    }

    // MARK: Changes through the mount to the committed file

    /// The mount removed `directory`/`name`, a name of this save's file (an unlink, or a
    /// rename over it). When it is the name the commit goes to, the owner took it away (only
    /// the owner gets past its write claim on it): the commit then does what a plain disk
    /// does (see `commitWithoutItsName`) and finds no change behind the mount. Another name of
    /// the file (a hard link) changed its link count and with it its change time, through the
    /// mount: the save takes the file as it is now.
    public func nameRemovedThroughMount(_ name: FileName, in directory: Node) {
        state.withLock { state in
            if state.directory.identity == directory.identity && state.name == name {
                state.nameRemovedThroughMount = true
            } else {
                rebaseline(&state)
            }
        }
    }

    /// The mount changed the committed file without going through this save: a hard link
    /// made to it, or an attribute changed by another of its names (claims are per path, and
    /// hard links are other paths). That moved its change time through the mount, not behind
    /// it: the save takes the file as it is now.
    public func committedFileChangedThroughMount() {
        state.withLock { state in rebaseline(&state) }
    }

    /// Takes the committed file as it is now for the staged temp's baseline, when the node
    /// still stands for the file the temp was staged from. (A change behind the mount between
    /// the mount's change and this fstat passes for the mount's: microseconds, once.)
    private func rebaseline(_ state: inout State) {
        guard var staged = state.staged.take() else { return }
        if let baseline = staged.baseline {
            let committed = node.backing
            let status = withExtendedLifetime(committed) { try? Syscall.statOfPathDescriptor(committed.descriptor.raw) }
            if let status, FileIdentity(status) == baseline.identity { staged.baseline = SaveBaseline(status) }
        }
        state.staged = consume staged
    }
}
