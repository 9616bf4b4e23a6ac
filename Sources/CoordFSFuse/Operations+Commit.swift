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
            let report = try mount.commit(save, origin: origin(of: request), under: handle.claims)
            replyOK(request)
            withExtendedLifetime(report) {} // the replaced file goes only now, after the program's close returned
        } catch {
            reply(request, error: error)
        }
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
                notifier.invalidateContents(of: node.id) { [activity] in activity.cacheDropped(of: node) }
            }
        }
        if handle.wroteInPlace.load(ordering: .relaxed) {
            mount.publish(.changed, origin: handle.origin, path: nodes.path(of: handle.node), isDirectory: false,
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
            try mount.commit(save, origin: origin, under: held, onlyWithoutWriters: true)
        } catch {
            logger.error("commit failed; the committed file is unchanged", metadata: ["path": "\(nodes.path(of: save.node)?.description ?? "?")", "error": "\(error)"])
        }
        let nameless = save.discardIfFailed()
        activity.endSave(save)
        saveHandles.forget(save)
        if let (directory, name) = nameless {
            // A first save that failed (ENOSPC at its close) leaves no file: the kernel drops
            // the owner's entry, and with it the node whose descriptor held the staged bytes.
            notifier.notifyDeleted(directory: directory.id, child: save.node.id, name: name)
        }
    }
}
