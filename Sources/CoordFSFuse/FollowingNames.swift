import CoordFSCore
import Glibc
import SystemPackage

// With other hosts (`--cluster`), a node follows its name: another host's commit, like this
// host's own, puts a new file behind the node the kernel knows by the name. The kernel's inode
// carries on (its pages and attributes are dropped), readers that had the old version open
// keep it through their own descriptors, and there is one node per name, whichever comes
// first: the other host's report of the commit, a lookup of the name, or an open that checks
// the name once it holds its claims (Operations+Open.swift). Without it, each of those would
// make its own node for the new file, and an open that came through the old one would find
// its name gone.

extension FileSystem {
    /// Makes `node` stand for the regular file `found` now at `directory`/`name`. False when it
    /// cannot: the node is no regular file or has a save of this host's in progress (this
    /// host's to change), the new object is no regular file, another node stands for it
    /// already, or the name changed again meanwhile. The caller then lets the name go.
    func followReplacement(of node: Node, in directory: Node, named name: FileName, found: stat) -> Bool {
        guard node.isRegularFile, found.st_mode & S_IFMT == S_IFREG, activity.save(of: node) == nil else { return false }
        let identity = FileIdentity(found)
        if let standing = nodes.node(identity: identity) { return standing === node }
        let opened = try? name.withCString { (cName) throws(Errno) in
            try Syscall.openAt(directory.directory, cName, Linux.O_PATH | O_NOFOLLOW)
        }
        guard let descriptor = opened, let status = try? Syscall.statOfPathDescriptor(descriptor.raw),
              FileIdentity(status) == identity else { return false }
        // Stale first: an open that sees the new backing must not take the page cache.
        activity.noteCommit(of: node)
        nodes.replaceBacking(of: node, with: descriptor, identity: identity)
        nodes.moved(node, to: directory, name: name)
        notifier?.invalidateContents(of: node.id) { [activity] in activity.cacheDropped(of: node) }
        return true
    }
}
