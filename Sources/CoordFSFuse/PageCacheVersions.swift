import CFuse
import Glibc
import CoordFSCore
import SystemPackage

// Which version the kernel's page cache of a file holds, now that files served with direct I/O
// can be mapped shared (the INIT patch in Sources/CFuse/cfuse.c).
//
// The kernel keeps one page cache per inode, and a file keeps its inode across commits. Every
// shared mapping of the file shows those pages, whichever handle it was made through, and so
// does read(2) on a handle that reads through the cache. A handle that bypasses the cache
// (direct I/O: a save's, or a reader's opened during a save or while readers of an older
// version are open) still fills it when it is mapped: each fault reads a page through the
// mapping's handle, and the daemon learns of it only as a READ that names no files table
// (`lock_owner` 0). So the daemon keeps the cache at one version, whichever handle a fill
// comes through:
//
// - the save's, once its owner mapped the file: the owner must see its own writes through
//   its mapping, and pages it writes back go to its save; were older pages mixed in, writing
//   a byte to one would write its stale rest over the owner's data. Everyone else's mappings,
//   and the reads of readers that opened before the save, see the save's pages meanwhile;
// - otherwise the version the cached readers read. A reader around the cache that maps the
//   file while its version is the cache's joins them: its mapping keeps showing its version,
//   as read(2) does, and a commit leaves the cache to them until they close (see
//   `FileActivity`). A reader whose version is newer than the cache's (it opened after a
//   commit while readers of the older version are open) sees the older one in its mapping
//   until they close; then the cache is dropped and its mapping shows its own.
//
// The kernel also keeps one size per inode, which every attribute reply about the file sets
// (a stat by anyone, a lookup, a setattr); a smaller size drops the pages beyond it, written
// or not, and a mapping's access beyond it dies of SIGBUS. So while the owner's mapping holds
// the cache, every reply carries the save's attributes. (After a commit, a stat shows the
// committed size even while readers of an older, longer version map it: their mappings end
// there. Keeping the larger size would show every `stat` and `tar` a wrong one instead.)
extension FileSystem {
    /// The descriptor a page-cache fill through `handle` is answered from (see above).
    func pageCacheSource(for handle: OpenFile) -> SharedDescriptor {
        let node = handle.node
        if let save = handle.save {
            // Pages another handle filled since the owner's mmap (which emptied the cache) come
            // from the committed version: dropped once, when the save's pages take over.
            if activity.noteMapped(save), notifier.mayHoldPages(of: node.id) {
                notifier.invalidateContents(of: node.id)
            }
            return handle.readable
        }
        if let save = activity.mappedSave(of: node), !save.hasFailed { return save.current }
        if handle.usesPageCache || handle.joinedCachedReaders.load(ordering: .relaxed) { return handle.readable }
        // A reader around the cache mapped the file.
        if let own = handle.own, let status = try? Syscall.stat(own.raw),
           activity.joinCachedReaders(node, owner: .process(handle.origin.pid), version: own, identity: FileIdentity(status),
                                      joined: handle.joinedCachedReaders) {
            return own
        }
        if let version = activity.cachedVersion(of: node) { return version }
        if let committed = try? reopen(node, flags: O_RDONLY) { return SharedDescriptor(committed) }
        return handle.readable
    }

    /// The attributes a reply about `node` tells the kernel, where `status` is what the
    /// requester would see (see above).
    func attributesForKernel(_ node: Node, _ status: stat) -> stat {
        withShownInode(node, node.isRegularFile ? mappedSaveAttributes(of: node) ?? status : status)
    }

    /// `status` with the node's own inode number (`Node.shownInode`), whatever file backs it
    /// now: every reply about a node carries it.
    func withShownInode(_ node: Node, _ status: stat) -> stat {
        node.noteMode(status.st_mode)
        var shown = status
        shown.st_ino = ino_t(node.shownInode)
        return shown
    }

    /// The attributes every reply about `node` carries while its save's owner maps it: the
    /// save's, so that the one size the kernel keeps never cuts the owner's mapping.
    func mappedSaveAttributes(of node: Node) -> stat? {
        guard let save = activity.mappedSave(of: node), !save.hasFailed else { return nil }
        let current = save.current
        return try? withExtendedLifetime(current) { () throws(Errno) -> stat in try Syscall.stat(current.raw) }
    }
}
