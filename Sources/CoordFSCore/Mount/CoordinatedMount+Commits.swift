import Glibc
import SystemPackage

// Commits: what a save's commit entails for everyone else (the kernel's caches, subscribers,
// presenters, other hosts), and the fence that refuses one when this host lost its claims.
extension CoordinatedMount {
    /// Commits a save's changes and tells the kernel and subscribers. Returns the report, for
    /// the caller to drop (and with it the replaced file's descriptor) once it has replied.
    /// `held`: the claims of the handle the commit comes through; when other hosts no longer
    /// cover them, the commit is refused (fencing): the save's version is kept beside the
    /// file (and as an unresolved conflict version, with a store), a `conflict` event says
    /// where, and the commit fails with EIO.
    @discardableResult
    public func commit(_ save: Save, origin: ChangeOrigin, under held: HeldClaims?, onlyWithoutWriters: Bool = false,
                thenInPlace: Bool = false) throws(Errno) -> CommitReport? {
        if ownChanges.isEnabled {
            let target = save.target
            ownChanges.note(nodes.path(of: target.directory)?.appending(target.name))
        }
        guard var report = try save.commit(durability: commitDurability, nodes: nodes, onlyWithoutWriters: onlyWithoutWriters, thenInPlace: thenInPlace,
                                           willKeep: { [self] directory, name in ownChanges.note(nodes.path(of: directory)?.appending(name)) },
                                           keepVersion: { [self] directory, name, kind in keepVersion(directory, name, kind, origin: origin) },
                                           conflictCopy: { [self] name in makesConflictCopy(of: name) },
                                           stillCovered: { [authority] in held.map(authority.stillHolds) ?? true })
        else { return nil }
        if report.fencedOff {
            keepRefusedSave(&report, origin: origin)
            publishKeptAside(report, origin: origin)
            logger.error("commit refused: this host lost its claim across hosts; the file is unchanged, the save kept beside it", metadata: [
                "path": "\(report.path?.description ?? "?")", "kept as": "\(report.conflict?.path?.description ?? "?")",
            ])
            throw .ioError
        }
        Instruments.saveCommitted()
        if let failure = report.directorySyncFailure {
            // Too late to fail the save (everyone sees the new version already): said instead.
            logger.warning("a save was committed, but syncing its directory failed: it may not survive a crash", metadata: [
                "path": "\(report.path?.description ?? "?")", "error": "\(failure)",
            ])
        }
        if report.namedNewFile { activity.clearPendingName(of: save) }
        let node = save.node
        // With no page of the node in the kernel and no open reader that could fill one with
        // the replaced version, there is nothing to drop: readers of the new version may use
        // the page cache at once. (Attributes need no invalidation either: every change of a
        // save makes the kernel's copy stale, and nothing replied during a save is cached.)
        if let appendedFrom = report.appendedFrom {
            // What the append replaced is the file up to its old end, which the append left as
            // it was: kept now (nothing was, for an append to an empty file).
            if versions != nil, appendedFrom > 0 { keepContents(of: node, length: appendedFrom, origin: origin) }
            // The same file, grown: readers of it read on, and only the pages from the old end
            // on may hold what they were shown of the end then.
            if kernel.mayHoldPages(of: node.id) { kernel.invalidateContents(of: node.id, from: appendedFrom) }
        } else if kernel.mayHoldPages(of: node.id) || activity.hasCachedReaders(node) {
            activity.noteCommit(of: node)
            kernel.invalidateContents(of: node.id) { [activity] in activity.cacheDropped(of: node) }
        }
        publish(report.created ? .created : .changed, origin: origin, path: report.path, isDirectory: false, size: report.size)
        publishKeptAside(report, origin: origin)
        return report
    }

    /// Whether a save of `name` that meets an outside version also keeps it beside the file:
    /// always without versions (the copy is the only record); with them, unless turned off
    /// (`--no-conflict-copies`) or the file is itself a conflict copy (no copy of a copy).
    private func makesConflictCopy(of name: FileName) -> Bool {
        versions == nil || (options.conflictCopies && !ConflictName.isConflictCopy(name))
    }

    /// A commit refused across hosts kept its save beside the file: with a store, that copy
    /// is kept as an unresolved conflict version of the file too, and stays beside it only
    /// where conflict copies are wanted.
    private func keepRefusedSave(_ report: inout CommitReport, origin: ChangeOrigin) {
        guard let versions, let conflict = report.conflict, let path = report.path, let name = path.name,
              versions.keepReplaced(conflict.name, in: conflict.directory.directory, path: path, kind: .conflict,
                                    origin: versionOrigin(origin)) != nil,
              !makesConflictCopy(of: name) else { return }
        noteOwnChange(conflict.path)
        _ = try? Syscall.unlink(at: conflict.directory.directory, conflict.name, flags: 0)
        report.conflict = nil
    }

    /// Keeps the file a commit is about to replace in the version store, if the mount has one;
    /// returns how to take it back. Runs under the save's lock: it must not ask the save.
    private func keepVersion(_ directory: Node, _ name: FileName, _ kind: VersionKind, origin: ChangeOrigin) -> (() -> Void)? {
        guard let versions, let path = nodes.path(of: directory)?.appending(name),
              let kept = versions.keepReplaced(name, in: directory.directory, path: path, kind: kind, origin: versionOrigin(origin)) else { return nil }
        return { versions.takeBack(kept) }
    }

    /// Keeps `node`'s file as it is before an in-place handle's first change: by a clone where
    /// the backing can make one (XFS, btrfs), else by a copy of a file within the copy limit
    /// (`--versions-copy-up-to`); elsewhere it costs nothing after the first try.
    public func keepBeforeInPlaceChange(of node: Node, origin: ChangeOrigin) {
        keepContents(of: node, length: nil, origin: origin)
    }

    /// Keeps the first `length` bytes (nil: all) of `node`'s file as a version, if the mount
    /// keeps versions of changes that replace no file (see `keepBeforeInPlaceChange`).
    private func keepContents(of node: Node, length: Int64?, origin: ChangeOrigin) {
        guard let versions, node.isRegularFile, versions.keepsContents(onDevice: node.identity.device), let path = nodes.path(of: node),
              let readable = try? reopen(node, flags: O_RDONLY) else { return }
        _ = versions.keepContents(of: readable.raw, length: length, path: path, origin: versionOrigin(origin))
    }

    /// Tells the kernel and subscribers about the conflict copy a commit made, if any.
    private func publishKeptAside(_ report: CommitReport, origin: ChangeOrigin) {
        guard let conflict = report.conflict else { return }
        // A new name the kernel did not make: drop a negative entry and the listing it may hold.
        kernel.invalidateEntry(directory: conflict.directory.id, name: conflict.name)
        kernel.invalidateContents(of: conflict.directory.id)
        publish(.conflict, origin: origin, path: report.path, destination: conflict.path, isDirectory: false, size: nil)
    }

    /// The mount changed `node`'s committed file other than through its save (a hard link made
    /// or removed, an attribute changed by another of its names): a save of it must not take
    /// that for a change behind the mount.
    public func noteChangedThroughMount(_ node: Node) {
        activity.save(of: node)?.committedFileChangedThroughMount()
    }

    /// Whether an open of `path` with `flags` writes the file itself rather than through a
    /// save (the in-place policy: patterns, databases, big files that would not be cloned).
    /// `existing`: the file opened, nil when the open creates it.
    public func writesInPlace(_ path: MountPath, flags: Int32, existing: Node?) -> Bool {
        options.inPlace.writesInPlace(path, flags: flags, existing: existing, clones: { [self] in
            guard let existing, let (directory, _) = nodes.location(of: existing) else { return false }
            return staging.clonesCopies(in: directory)
        })
    }
}
