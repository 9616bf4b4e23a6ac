import CFuse
import Glibc
import CoordFSCore
import SystemPackage

// The end of a handle: the owner's close commits its save, the last writer's release
// commits what is left and ends it, and claims go after that.
extension FileSystem {
    /// close(2): a writer's save commits here, so the program's close returns once everyone
    /// sees its work, and a failed save (ENOSPC, EIO) fails its close.
    func flush(_ request: fuse_req_t, _ file: UnsafeMutablePointer<fuse_file_info>) {
        guard let handle = OpenFile.borrow(file) else { return reply(request, error: .badFileDescriptor) }
        guard let save = handle.save, handle.isWriter else { return replyOK(request) }
        // Every close of every copy of the descriptor flushes. A child that inherited it
        // (fork, then exec or exit) closes its copy while the owner may still be writing, so
        // only the owner's closes commit; a save whose owner closed first commits at release.
        guard owner(of: request) == save.owner else { return replyOK(request) }
        do throws(Errno) {
            let report = try commit(save, origin: origin(of: request), under: handle.claims)
            replyOK(request)
            withExtendedLifetime(report) {} // the replaced file goes only now, after the program's close returned
        } catch {
            reply(request, error: error)
        }
    }

    /// Commits a save's changes and tells the kernel and subscribers. Returns the report, for
    /// the caller to drop (and with it the replaced file's descriptor) once it has replied.
    /// `held`: the claims of the handle the commit comes through; when other hosts no longer
    /// cover them, the commit is refused (fencing): the save's version is kept beside the
    /// file, a `conflict` event says where, and the commit fails with EIO.
    @discardableResult
    func commit(_ save: Save, origin: ChangeOrigin, under held: HeldClaims?, onlyWithoutWriters: Bool = false,
                thenInPlace: Bool = false) throws(Errno) -> CommitReport? {
        if ownChanges.isEnabled {
            let target = save.target
            ownChanges.note(nodes.path(of: target.directory)?.appending(target.name))
        }
        guard let report = try save.commit(durability: commitDurability, nodes: nodes, onlyWithoutWriters: onlyWithoutWriters, thenInPlace: thenInPlace,
                                           reopen: reopen(descriptor:flags:),
                                           willKeep: { [self] directory, name in ownChanges.note(nodes.path(of: directory)?.appending(name)) },
                                           stillCovered: { [authority] in held.map(authority.stillHolds) ?? true })
        else { return nil }
        if report.fencedOff {
            publishKeptAside(report, origin: origin)
            logger.error("commit refused: this host lost its claim across hosts; the file is unchanged, the save kept beside it", metadata: [
                "path": "\(report.path?.description ?? "?")", "kept as": "\(report.conflict?.path?.description ?? "?")",
            ])
            throw .ioError
        }
        Instruments.saveCommitted()
        if report.created { activity.clearPendingName(of: save) }
        let node = save.node
        // With no page of the node in the kernel and no open reader that could fill one with
        // the replaced version, there is nothing to drop: readers of the new version may use
        // the page cache at once. (Attributes need no invalidation either: every change of a
        // save makes the kernel's copy stale, and nothing replied during a save is cached.)
        if let appendedFrom = report.appendedFrom {
            // The same file, grown: readers of it read on, and only the pages from the old end
            // on may hold what they were shown of the end then.
            if let notifier, notifier.mayHoldPages(of: node.id) { notifier.invalidateContents(of: node.id, from: appendedFrom) }
        } else if let notifier, notifier.mayHoldPages(of: node.id) || activity.hasCachedReaders(node) {
            activity.noteCommit(of: node)
            notifier.invalidateContents(of: node.id) { [activity] in activity.cacheDropped(of: node) }
        }
        publish(report.created ? .created : .changed, origin: origin, path: report.path, isDirectory: false, size: report.size)
        publishKeptAside(report, origin: origin)
        return report
    }

    /// Tells the kernel and subscribers about the conflict copy a commit made, if any.
    private func publishKeptAside(_ report: CommitReport, origin: ChangeOrigin) {
        guard let conflict = report.conflict else { return }
        // A new name the kernel did not make: drop a negative entry and the listing it may hold.
        notifier?.invalidateEntry(directory: conflict.directory.id, name: conflict.name)
        notifier?.invalidateContents(of: conflict.directory.id)
        publish(.conflict, origin: origin, path: report.path, destination: conflict.path, isDirectory: false, size: nil)
    }

    /// The mount changed `node`'s committed file other than through its save (a hard link made
    /// or removed, an attribute changed by another of its names): a save of it must not take
    /// that for a change behind the mount.
    func noteChangedThroughMount(_ node: Node) {
        activity.save(of: node)?.committedFileChangedThroughMount()
    }

    func release(_ request: fuse_req_t, _ file: UnsafeMutablePointer<fuse_file_info>) {
        if let handle = OpenFile.take(file) { releaseHandle(handle) }
        replyOK(request)
    }

    /// Everything a handle's end entails: the save's last writer commits what is left and ends
    /// the save; claims go only after that, so the next writer sees the commit.
    func releaseHandle(_ handle: OpenFile) {
        if let save = handle.save, handle.isWriter {
            endWriter(of: save, origin: handle.origin, under: handle.claims)
        } else if let reader = handle.cachedReader ?? (handle.joinedCachedReaders.load(ordering: .relaxed) ? .process(handle.origin.pid) : nil) {
            if activity.closeReader(of: handle.node, owner: reader) {
                let node = handle.node
                notifier?.invalidateContents(of: node.id) { [activity] in activity.cacheDropped(of: node) }
            }
        }
        if handle.wroteInPlace.load(ordering: .relaxed) {
            publish(.changed, origin: handle.origin, path: nodes.path(of: handle.node), isDirectory: false,
                    size: (try? attributes(of: handle.node).st_size).map(Int64.init))
        }
        if let held = handle.claims { authority.release(held) }
        reacquire(handle.consent)
    }

    /// One writer of a save is done; the last one commits what is left and ends the save.
    /// `origin`: who opened the writer's handle, as the commit's origin; `held`: its claims.
    func endWriter(of save: Save, origin: ChangeOrigin, under held: HeldClaims?) {
        guard save.removeWriter() else { return }
        do throws(Errno) {
            try commit(save, origin: origin, under: held, onlyWithoutWriters: true)
        } catch {
            logger.error("commit failed; the committed file is unchanged", metadata: ["path": "\(nodes.path(of: save.node)?.description ?? "?")", "error": "\(error)"])
        }
        save.discardIfFailed()
        activity.endSave(save)
        saveHandles.forget(save)
    }
}
