import Glibc
import SystemPackage

// With other hosts (`--cluster`), a node follows its name: another host's commit, like this
// host's own, puts a new file behind the node the kernel knows by the name. The kernel's inode
// carries on (its pages and attributes are dropped), readers that had the old version open
// keep it through their own descriptors, and there is one node per name, whichever comes
// first: the other host's report of the commit, a lookup of the name, or an open that checks
// the name once it holds its claims (the FUSE glue's open, Operations+Open.swift). Without it, each of those would
// make its own node for the new file, and an open that came through the old one would find
// its name gone.

extension CoordinatedMount {
    /// Makes `node` stand for the regular file now at `directory`/`name`, as the name holds
    /// it when this looks (an `O_PATH` open of the name, then its fstat: one file, whatever
    /// the name holds a moment later). False when it cannot: the node is no regular file or
    /// has a save of this host's in progress (this host's to change), the name holds no
    /// regular file, or another node stands for that file already. The caller then lets the
    /// name go.
    ///
    /// Followers race: another host's report, a lookup, an open's check and this host's own
    /// commits all move the node, on different threads. Each follow goes only from the file
    /// the node stood for when it looked (`NodeTable.follow`), so a follower that found a file
    /// which has since been replaced never sets the node back to it once someone moved it on
    /// (a writer's save would start from that older version, and its increment would be
    /// lost); a follower overtaken that way looks again.
    public func followReplacement(of node: Node, in directory: Node, named name: FileName) -> Bool {
        guard node.isRegularFile else { return false }
        for _ in 0..<8 {
            switch followOnce(node, in: directory, named: name) {
            case .following: return true
            case .notFollowing: return false
            case .overtaken:
                logger.debug("a node moved on while it was to follow its name; looking again", metadata: ["name": "\(name)"])
            }
        }
        return false
    }

    private enum FollowAttempt {
        case following, notFollowing, overtaken
    }

    /// One look at the name and, when it holds another file, one move of the node to it.
    private func followOnce(_ node: Node, in directory: Node, named name: FileName) -> FollowAttempt {
        let previous = node.identity
        guard activity.save(of: node) == nil else { return .notFollowing }
        let opened = try? name.withCString { (cName) throws(Errno) in
            try Syscall.openAt(directory.directory, cName, Linux.O_PATH | O_NOFOLLOW)
        }
        guard let descriptor = opened, let status = try? Syscall.statOfPathDescriptor(descriptor.raw),
              status.st_mode & S_IFMT == S_IFREG else { return .notFollowing }
        let identity = FileIdentity(status)
        if identity == previous { return .following } // another follower went first
        if let standing = nodes.node(identity: identity) { return standing === node ? .following : .notFollowing }
        // Stale first: an open that sees the new backing must not take the page cache.
        activity.noteCommit(of: node)
        let followed = nodes.follow(node, from: previous, to: descriptor, identity: identity)
        if followed { nodes.moved(node, to: directory, name: name) }
        // Dropped either way: the note above holds readers off the page cache until it is.
        kernel.invalidateContents(of: node.id) { [activity] in activity.cacheDropped(of: node) }
        // Overtaken: another follower may have moved the node to this same file.
        return followed || node.identity == identity ? .following : .overtaken
    }
}
