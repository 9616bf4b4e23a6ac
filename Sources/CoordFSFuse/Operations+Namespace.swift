import CFuse
import Glibc
import CoordFSCore
import SystemPackage

// Operations that add, remove or move names: mknod, mkdir, symlink, link, unlink, rmdir,
// rename. Each takes a write claim on every path it changes, for the operation only.

extension FileSystem {
    /// Creates something at `parent`/`name` with `make` under a write claim on the new path,
    /// hands it to the caller, and replies with its entry.
    private func replyWithNewEntry(_ request: fuse_req_t, _ parentID: fuse_ino_t, _ name: UnsafePointer<CChar>, mode: mode_t,
                                   givenToCaller: Bool = true, _ make: @escaping @Sendable (_ parent: Node, _ name: FileName) throws(Errno) -> Void) {
        let entry: DirectoryEntry
        do throws(Errno) { entry = try newEntry(parentID, name) } catch { return reply(request, error: error) }
        let (parent, fileName) = (entry.directory, entry.name)
        let item = NamedPath(entry, in: nodes)
        let path = item.resolved
        let pending = PendingRequest(raw: request)
        coordinated(request, .makeName, .item(item)) { [self] origin in
            do throws(Errno) {
                if activity.pendingSave(PendingName(directory: parent.id, name: fileName)) != nil { throw .fileExists }
                try make(parent, fileName)
                if givenToCaller { try giveToCaller(pending.raw, parent: parent, name: fileName, mode: mode) }
                // A hard link names an object that may have a node already; anything else is new.
                var entry = givenToCaller ? try lookUpMade(parent, fileName) : try lookUp(parent, fileName)
                mount.publish(.created, origin: origin, path: path, isDirectory: mode & S_IFMT == S_IFDIR, size: nil)
                fuse_reply_entry(pending.raw, &entry)
            } catch {
                reply(pending.raw, error: error)
            }
        }
    }

    func mknod(_ request: fuse_req_t, _ parent: fuse_ino_t, _ name: UnsafePointer<CChar>, _ mode: mode_t, _ device: dev_t) {
        let caller = PendingRequest(raw: request)
        replyWithNewEntry(request, parent, name, mode: mode) { [self] (parent, name) throws(Errno) in
            try creatingForCaller(caller.raw, mode: mode) { (creationMode) throws(Errno) in
                try Syscall.makeNode(at: parent.directory, name, creationMode, device)
            }
        }
    }

    func mkdir(_ request: fuse_req_t, _ parent: fuse_ino_t, _ name: UnsafePointer<CChar>, _ mode: mode_t) {
        let caller = PendingRequest(raw: request)
        replyWithNewEntry(request, parent, name, mode: mode | S_IFDIR) { [self] (parent, name) throws(Errno) in
            try creatingForCaller(caller.raw, mode: mode) { (creationMode) throws(Errno) in
                try Syscall.makeDirectory(at: parent.directory, name, creationMode)
            }
            if let watcher = mount.watcher, let made = try? Syscall.openAt(parent.directory, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW) {
                watcher.watchMadeDirectory(made.raw)
            }
        }
    }

    func symlink(_ request: fuse_req_t, _ target: UnsafePointer<CChar>, _ parent: fuse_ino_t, _ name: UnsafePointer<CChar>) {
        // Any bytes, as given: a target is made when the claim is granted, after this returns.
        let targetBytes = copyCString(target)
        replyWithNewEntry(request, parent, name, mode: S_IFLNK) { (parent, name) throws(Errno) in
            try Syscall.makeSymlink(target: targetBytes, at: parent.directory, name)
        }
    }

    func link(_ request: fuse_req_t, _ id: fuse_ino_t, _ newParent: fuse_ino_t, _ newName: UnsafePointer<CChar>) {
        let node: Node
        do throws(Errno) { node = try self.node(id) } catch { return reply(request, error: error) }
        let processDirectory = Syscall.processDescriptors
        // A hard link names an existing object: it keeps its owner.
        replyWithNewEntry(request, newParent, newName, mode: 0, givenToCaller: false) { [self] (parent, name) throws(Errno) in
            if let save = activity.save(of: node), !save.target.exists { throw .noSuchFileOrDirectory } // not created yet
            try withProcessName(of: node) { (source) throws(Errno) in
                try Syscall.link(processDirectory, source, to: parent.directory, name, flags: AT_SYMLINK_FOLLOW)
            }
            mount.noteChangedThroughMount(node)
        }
    }

    func unlink(_ request: fuse_req_t, _ parentID: fuse_ino_t, _ name: UnsafePointer<CChar>, flags: Int32) {
        let entry: DirectoryEntry
        do throws(Errno) { entry = try existingEntry(parentID, name) } catch { return reply(request, error: error) }
        let (parent, fileName) = (entry.directory, entry.name)
        let item = NamedPath(entry, in: nodes)
        let path = item.resolved
        let pending = PendingRequest(raw: request)
        coordinated(request, .remove, .item(item)) { [self] origin in
            do throws(Errno) {
                var removedPending = false
                if flags & AT_REMOVEDIR == 0, let save = activity.pendingSave(PendingName(directory: parent.id, name: fileName)) {
                    // The owner removes the file it created and never closed: its writes go with it.
                    guard save.owner == .process(origin.pid) else { throw .noSuchFileOrDirectory }
                    save.discard()
                    activity.clearPendingName(of: save)
                    removedPending = true
                }
                if flags & AT_REMOVEDIR != 0, let directory = nodes.node(named: fileName, in: parent) {
                    try refuseIfHoldingPendingFiles(directory)
                }
                do throws(Errno) {
                    try remove(fileName, in: parent, path: path, flags: flags, keepingVersion: !removedPending, origin: origin)
                } catch .noSuchFileOrDirectory where removedPending {
                    // Only the pending file had the name.
                }
                replyOK(pending.raw)
            } catch {
                reply(pending.raw, error: error)
            }
        }
    }

    /// Removes `name` from `parent` in the backing (`flags`: `AT_REMOVEDIR` for a directory)
    /// and tells the node table, a save of what it named and subscribers. With versions, and
    /// unless `keepingVersion` is false, a file's last name goes into the store instead.
    private func remove(_ name: FileName, in parent: Node, path: MountPath?, flags: Int32, keepingVersion: Bool, origin: ChangeOrigin) throws(Errno) {
        let file = flags & AT_REMOVEDIR == 0 ? fileUnknownByName(name, in: parent) : nil
        // No stat first: the kernel looked the name up, so the node table knows what it names.
        if flags & AT_REMOVEDIR == 0, keepingVersion, let versions = mount.versions, let path,
           try versions.removeKeeping(name, in: parent.directory, path: path, origin: mount.versionOrigin(origin)) {
            noteRemoved(name, in: parent, file: file, lastName: true)
        } else {
            try Syscall.unlink(at: parent.directory, name, flags: flags)
            noteRemoved(name, in: parent, file: file)
        }
        mount.publish(.deleted, origin: origin, path: path, isDirectory: flags & AT_REMOVEDIR != 0, size: nil)
    }

    func rename(_ request: fuse_req_t, _ parentID: fuse_ino_t, _ name: UnsafePointer<CChar>,
                _ newParentID: fuse_ino_t, _ newName: UnsafePointer<CChar>, _ flags: UInt32) {
        let from: DirectoryEntry
        let to: DirectoryEntry
        do throws(Errno) {
            from = try existingEntry(parentID, name)
            to = try newEntry(newParentID, newName)
        } catch { return reply(request, error: error) }
        let (source, sourceName, destination, destinationName) = (from.directory, from.name, to.directory, to.name)
        let moving = NamedPath(from, in: nodes)
        let replaced = NamedPath(to, in: nodes)
        let (sourcePath, destinationPath) = (moving.resolved, replaced.resolved)
        let pending = PendingRequest(raw: request)
        // Only a plain rename replaces what it lands on: an exchange swaps, RENAME_NOREPLACE fails.
        let facts = AskFacts(destinationIsReplaced: { flags & (Linux.RENAME_EXCHANGE | Linux.RENAME_NOREPLACE) == 0 && replaced.exists() })
        coordinated(request, .rename, .rename(from: moving, to: replaced), facts: facts) { [self] origin in
            do throws(Errno) {
                let owner = ClaimOwner.process(origin.pid)
                let pendingSource = activity.pendingSave(PendingName(directory: source.id, name: sourceName)).flatMap { $0.owner == owner ? $0 : nil }
                if flags & Linux.RENAME_EXCHANGE != 0 {
                    let pendingDestination = activity.pendingSave(PendingName(directory: destination.id, name: destinationName))
                        .flatMap { $0.owner == owner ? $0 : nil }
                    if pendingSource != nil || pendingDestination != nil {
                        try exchangePending(sourceName, in: source, pendingSource, with: destinationName, in: destination, pendingDestination,
                                            paths: (sourcePath, destinationPath), origin: origin)
                        replyOK(pending.raw)
                        return
                    }
                }
                if let save = pendingSource {
                    try renamePending(save, from: (source, sourceName, sourcePath), to: destination, destinationName, flags: flags, origin: origin)
                    replyOK(pending.raw)
                    return
                }
                // The kernel looked both names up first: the node table knows what they name (a
                // name it does not know may still exist, behind the mount's back or as a hard
                // link it knows by another name; that source is found by a stat).
                let movingNode = nodes.node(named: sourceName, in: source)
                let movingIdentity: FileIdentity
                if let movingNode { movingIdentity = movingNode.identity } else { movingIdentity = FileIdentity(try Syscall.stat(at: source.directory, sourceName)) }
                let replacedNode = nodes.node(named: destinationName, in: destination).flatMap { $0.identity == movingIdentity ? nil : $0 }
                if let replacedNode, flags & Linux.RENAME_EXCHANGE == 0 { try refuseIfHoldingPendingFiles(replacedNode) }
                let replacedFile = flags & (Linux.RENAME_EXCHANGE | Linux.RENAME_NOREPLACE) == 0
                    ? fileUnknownByName(destinationName, in: destination).flatMap { $0 == movingIdentity ? nil : $0 } : nil
                // With versions, a file this rename replaces is kept, as a save's commit keeps what it replaces.
                let plainRename = flags & (Linux.RENAME_EXCHANGE | Linux.RENAME_NOREPLACE) == 0
                let keptReplaced = plainRename ? destinationPath.flatMap { path in
                    mount.versions?.keepReplaced(destinationName, in: destination.directory, path: path, kind: .save,
                                                 origin: mount.versionOrigin(origin), unlessLinkedElsewhere: true)
                } : nil
                do throws(Errno) {
                    try Syscall.rename(source.directory, sourceName, to: destination.directory, destinationName, flags: flags)
                } catch {
                    if let keptReplaced { mount.versions?.takeBack(keptReplaced) }
                    throw error
                }
                if let versions = mount.versions, let sourcePath, let destinationPath {
                    if flags & Linux.RENAME_EXCHANGE != 0 {
                        // Each follows its file: through a spare name, as the index moves one path at a time.
                        versions.exchanged(sourcePath, destinationPath)
                    } else {
                        versions.moved(from: sourcePath, to: destinationPath)
                    }
                }

                if let replacedFile { noteRemoved(destinationName, in: destination, file: replacedFile) }
                if let replacedNode {
                    if flags & Linux.RENAME_EXCHANGE != 0 {
                        nodes.moved(replacedNode, from: (destination, destinationName), to: source, name: sourceName)
                        // Its file now has the source's name: a save of it commits there.
                        activity.save(of: replacedNode)?.retarget(directory: source, name: sourceName)
                    } else {
                        // A version kept of it took its last name (the store keeps no file that has another).
                        noteRemoved(destinationName, in: destination, lastName: keptReplaced != nil)
                    }
                }
                let movedNode: Node?
                if let movingNode {
                    nodes.moved(movingNode, from: (source, sourceName), to: destination, name: destinationName)
                    movedNode = movingNode
                } else {
                    movedNode = nodes.moved(movingIdentity, from: (source, sourceName), to: destination, name: destinationName)
                }
                if let movedNode, let save = activity.save(of: movedNode) {
                    // The pending commit moves with the file.
                    save.retarget(directory: destination, name: destinationName)
                }
                if let sourcePath, let destinationPath {
                    // What moved, for the event: stat through the node's descriptor (no path walk).
                    let moved: stat? = if let movedNode { try? attributes(of: movedNode) } else { try? Syscall.stat(at: destination.directory, destinationName) }
                    mount.publish(.moved, origin: origin, path: sourcePath, destination: destinationPath,
                            isDirectory: moved.map { $0.st_mode & S_IFMT == S_IFDIR } ?? false, size: moved.map { Int64($0.st_size) })
                }
                replyOK(pending.raw)
            } catch {
                reply(pending.raw, error: error)
            }
        }
    }

    /// The name `directory`/`name` went from the backing, through the mount. A directory it
    /// stood for (whose children's paths hang on it), or a file with a pending save, learns at
    /// once whether it has names left; a save of a file with none is discarded, as its writes
    /// have nowhere to go, and a save of a file with others learns that the mount removed the
    /// name (not a change behind the mount).
    ///
    /// `file`: what the name stood for when the node table knew it by no name (see
    /// `fileUnknownByName`), so that a save of it learns of the removal all the same.
    /// `lastName`: the name was the file's last (the version store took it).
    private func noteRemoved(_ name: FileName, in directory: Node, file: FileIdentity? = nil, lastName: Bool = false) {
        guard let removed = lastName ? nodes.removedLastName(name, in: directory) : nodes.removedName(name, in: directory) else {
            if let file, let node = nodes.node(identity: file) {
                // The store's link, if it took the last name, is none of the file's names.
                if lastName { node.keptAfterLastName.store(true, ordering: .relaxed) }
                activity.save(of: node)?.nameRemovedThroughMount(name, in: directory)
            }
            return
        }
        let save = activity.save(of: removed)
        if let save, !save.target.exists {
            // A file created through the mount and not committed yet, whose name a rename took:
            // as on a plain disk, its creator keeps writing to a file with no name, which goes.
            save.discard()
            activity.clearPendingName(of: save)
            return
        }
        save?.nameRemovedThroughMount(name, in: directory)
        if removed.isDirectory || save != nil, nodes.isUnlinked(removed) { save?.discard(showingUnlinkedIn: nodes) }
    }

    /// The file a name the mount is about to remove stands for, when a save is in flight and
    /// the node table does not know the name: a hard link of a file it knows by another name
    /// (a lookup of one link renames the node). Its removal moves the file's change time, which
    /// its save must not take for a change behind the mount. One stat, only while saves are
    /// in flight and only for names the table does not know.
    private func fileUnknownByName(_ name: FileName, in directory: Node) -> FileIdentity? {
        guard activity.hasSaves, nodes.node(named: name, in: directory) == nil else { return nil }
        return (try? Syscall.stat(at: directory.directory, name)).map(FileIdentity.init)
    }

    /// A directory that files created through the mount and not committed yet are to appear
    /// in is not empty, as on a plain disk, though the backing does not hold them yet (their
    /// temps are unnamed): it is neither removed nor replaced.
    private func refuseIfHoldingPendingFiles(_ directory: Node) throws(Errno) {
        if directory.isDirectory && activity.hasPendingNames(in: directory.id) { throw .directoryNotEmpty }
    }

    /// The owner renames a file it created and has not closed: nothing exists in the backing
    /// under the old name yet, so the rename moves where the first commit will go.
    /// A committed file that an earlier rename of the pending file replaced (for its owner;
    /// the backing keeps it until the commit) is deleted when the pending file moves on, as
    /// the earlier rename deleted it on a plain disk.
    private func renamePending(_ save: Save, from source: (directory: Node, name: FileName, path: MountPath?), to destination: Node, _ name: FileName,
                               flags: UInt32, origin: ChangeOrigin) throws(Errno) {
        if flags & Linux.RENAME_EXCHANGE != 0 { throw .invalidArgument }
        // The temp commits into the new directory: it must be on the same filesystem, as a rename must.
        if destination.identity.device != save.target.directory.identity.device { throw .improperLink }
        let exists = (try? Syscall.stat(at: destination.directory, name)) != nil
        if exists && flags & Linux.RENAME_NOREPLACE != 0 { throw .fileExists }
        if activity.pendingSave(PendingName(directory: destination.id, name: name)) != nil && flags & Linux.RENAME_NOREPLACE != 0 {
            throw .fileExists
        }
        if let replaced = activity.pendingSave(PendingName(directory: destination.id, name: name)), replaced !== save, replaced.owner == save.owner {
            // Another file the owner created and has not closed stood there: as on a plain
            // disk, the rename takes its name, and its writes go with it.
            noteRemoved(name, in: destination)
        } else if exists, let replaced = nodes.node(named: name, in: destination), replaced !== save.node {
            // A committed file being saved stands there: the save learns that the mount took
            // its name (at its close it goes where a plain disk would send its writes).
            activity.save(of: replaced)?.nameRemovedThroughMount(name, in: destination)
        }
        let replacedAtSource = save.landsOnAnotherFile
        save.retarget(directory: destination, name: name, overAnotherFile: exists)
        activity.movePendingName(of: save, to: PendingName(directory: destination.id, name: name))
        _ = nodes.moved(save.node.identity, to: destination, name: name)
        if replacedAtSource {
            do throws(Errno) {
                try remove(source.name, in: source.directory, path: source.path, flags: 0, keepingVersion: true, origin: origin)
                notifier.invalidateEntry(directory: source.directory.id, name: source.name)
            } catch .noSuchFileOrDirectory {
                // Gone already (behind the mount).
            } catch {
                logger.warning("a file replaced by a new one that then moved on could not be removed", metadata: [
                    "path": "\(source.path?.description ?? "?")", "error": "\(error)"])
            }
        }
        // The kernel now takes its entry for the pending file for the destination's: where a
        // committed file stands there, the entry goes, so that every caller asks for the name
        // and each finds what it sees (the owner its new file, everyone else the committed one).
        if exists { notifier.invalidateEntry(directory: destination.id, name: name) }
    }

    /// An exchange where one name, or both, is a file the owner created and has not closed:
    /// the backing holds nothing under that name yet. Each name takes what the other showed
    /// the owner: committed files change places in the backing (or one moves to the other's
    /// name), and each pending file's first commit goes to the other name.
    private func exchangePending(_ sourceName: FileName, in source: Node, _ pendingSource: Save?,
                                 with destinationName: FileName, in destination: Node, _ pendingDestination: Save?,
                                 paths: (source: MountPath?, destination: MountPath?), origin: ChangeOrigin) throws(Errno) {
        for save in [pendingSource, pendingDestination].compactMap({ $0 }) {
            // Its commit goes to the other directory, which must be on the same filesystem.
            let other = save === pendingSource ? destination : source
            if other.identity.device != save.target.directory.identity.device { throw .improperLink }
        }
        let sourceStatus = try? Syscall.stat(at: source.directory, sourceName)
        let destinationStatus = try? Syscall.stat(at: destination.directory, destinationName)
        let (committedSource, committedDestination) = (sourceStatus.map(FileIdentity.init), destinationStatus.map(FileIdentity.init))
        switch (committedSource, committedDestination) {
        case (.some, .some):
            try Syscall.rename(source.directory, sourceName, to: destination.directory, destinationName, flags: Linux.RENAME_EXCHANGE)
        case (.some, nil):
            try Syscall.rename(source.directory, sourceName, to: destination.directory, destinationName, flags: Linux.RENAME_NOREPLACE)
        case (nil, .some):
            try Syscall.rename(destination.directory, destinationName, to: source.directory, sourceName, flags: Linux.RENAME_NOREPLACE)
        case (nil, nil):
            break
        }
        // The committed files' nodes, then the pending ones', each to the other name.
        // (A save of a committed file moves with it, as in a plain rename.)
        if let committedDestination, let node = nodes.moved(committedDestination, from: (destination, destinationName), to: source, name: sourceName) {
            activity.save(of: node)?.retarget(directory: source, name: sourceName)
        }
        if let committedSource, let node = nodes.moved(committedSource, from: (source, sourceName), to: destination, name: destinationName) {
            activity.save(of: node)?.retarget(directory: destination, name: destinationName)
        }
        if let pendingDestination { _ = nodes.moved(pendingDestination.node.identity, to: source, name: sourceName) }
        if let pendingSource { _ = nodes.moved(pendingSource.node.identity, to: destination, name: destinationName) }
        if let pendingDestination { activity.clearPendingName(of: pendingDestination) }
        if let pendingSource {
            pendingSource.retarget(directory: destination, name: destinationName, overAnotherFile: committedSource != nil)
            activity.movePendingName(of: pendingSource, to: PendingName(directory: destination.id, name: destinationName))
        }
        if let pendingDestination {
            pendingDestination.retarget(directory: source, name: sourceName, overAnotherFile: committedDestination != nil)
            activity.movePendingName(of: pendingDestination, to: PendingName(directory: source.id, name: sourceName))
        }
        // Others see committed files only: make the kernel ask for both names again.
        notifier.invalidateEntry(directory: source.id, name: sourceName)
        notifier.invalidateEntry(directory: destination.id, name: destinationName)
        guard let sourcePath = paths.source, let destinationPath = paths.destination else { return }
        // Subscribers hear of what others can see move: the committed files.
        func isDirectory(_ status: stat) -> Bool { status.st_mode & S_IFMT == S_IFDIR }
        switch (sourceStatus, destinationStatus) {
        case let (moving?, _?):
            mount.versions?.exchanged(sourcePath, destinationPath)
            mount.publish(.moved, origin: origin, path: sourcePath, destination: destinationPath, isDirectory: isDirectory(moving),
                          size: Int64(moving.st_size))
        case let (moving?, nil):
            mount.versions?.moved(from: sourcePath, to: destinationPath)
            mount.publish(.moved, origin: origin, path: sourcePath, destination: destinationPath, isDirectory: isDirectory(moving),
                          size: Int64(moving.st_size))
        case let (nil, moving?):
            mount.versions?.moved(from: destinationPath, to: sourcePath)
            mount.publish(.moved, origin: origin, path: destinationPath, destination: sourcePath, isDirectory: isDirectory(moving),
                          size: Int64(moving.st_size))
        case (nil, nil):
            break
        }
    }
}
