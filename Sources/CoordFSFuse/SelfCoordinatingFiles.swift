import CFuse
import Dispatch
import Glibc
import Synchronization
import CoordFSCore
import SystemPackage

/// The claims and origin of the handles writing through each save: what turning a save in
/// place (`FileSystem.turnInPlace`) lets go of, and names as its commit's origin.
///
/// Sendable: one mutex over the map. A leaf lock, never held across a system call.
final class SaveHandles: Sendable {
    private struct Writers {
        var claims: [HeldClaims] = []
        var origin: ChangeOrigin
    }
    private let bySave = Mutex<[ObjectIdentifier: Writers]>([:])

    /// A handle for writing through `save` was opened.
    func note(_ save: Save, claims: HeldClaims?, origin: ChangeOrigin) {
        bySave.withLock { map in
            var writers = map[ObjectIdentifier(save)] ?? Writers(origin: origin)
            if let claims { writers.claims.append(claims) }
            map[ObjectIdentifier(save)] = writers
        }
    }

    /// Who opened the first handle writing through `save`, and the claims of the first that
    /// still holds any (what a commit checks with other hosts: fencing).
    func first(of save: Save) -> (origin: ChangeOrigin?, claims: HeldClaims?) {
        bySave.withLock { map in (map[ObjectIdentifier(save)]?.origin, map[ObjectIdentifier(save)]?.claims.first) }
    }

    /// Takes the claims of `save`'s handles (each handle's release lets them go again, which
    /// does nothing).
    func takeClaims(of save: Save) -> [HeldClaims] {
        bySave.withLock { map in
            guard let claims = map[ObjectIdentifier(save)]?.claims else { return [] }
            map[ObjectIdentifier(save)]?.claims = []
            return claims
        }
    }

    /// The save ended.
    func forget(_ save: Save) {
        bySave.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(save)) }
    }
}

// Programs that coordinate themselves. A lock file (filelock, cargo, a single-instance daemon)
// is opened for writing and then locked; a second process opens it too and calls flock or
// fcntl, and the lock decides who waits. With the first process's open holding a write claim
// until its close, the second would wait in open, never reaching its lock call. So when an
// open for writing meets another owner's save of a file that owner has locked (the kernel
// keeps flock, POSIX and OFD locks of the mount itself, on the inode, and lists the locks
// taken through each descriptor in /proc/PID/fdinfo), or when a save writes an SQLite header, the save commits what it has and
// goes on in place, its claims let go: the file is written in place from then on, with claims
// per operation, by everyone (see `SelfCoordinatingFiles`).
extension FileSystem {
    /// Whether writers of `node` go in place because it coordinates itself.
    func coordinatesItself(_ node: Node) -> Bool {
        selfCoordinating.contains(node)
    }

    /// For an open for writing by `requester` of a file another owner saves: when the save's
    /// owner has locked the file, the save goes in place (its claims let go) and true is returned.
    func yieldsToLocks(_ save: Save, requester: ClaimOwner) -> Bool {
        guard save.owner != requester, case .process(let owner) = save.owner,
              selfCoordinating.isLocked(inode: save.node.shownInode, byProcess: owner) else { return false }
        return turnInPlace(save)
    }

    /// The file of `save` coordinates itself: the save commits what it has, changes go to the
    /// file itself from now on, and the claims of its handles go, so that other writers reach
    /// their own lock calls (or the database's) at once. False when the commit failed (ENOSPC,
    /// EIO): the save stays a save, and the node is not marked.
    @discardableResult
    func turnInPlace(_ save: Save) -> Bool {
        guard !save.writesInPlace else { return true }
        let owner: Int32 = if case .process(let pid) = save.owner { pid } else { 0 }
        do throws(Errno) {
            let (origin, claims) = saveHandles.first(of: save)
            try mount.commit(save, origin: origin ?? ChangeOrigin(pid: owner, uid: 0), under: claims, thenInPlace: true)
            logger.info("the file coordinates itself: written in place from now on", metadata: [
                "path": "\(nodes.path(of: save.node)?.description ?? "?")", "owner": "\(save.owner)",
            ])
        } catch {
            logger.error("cannot commit a save that goes in place; it stays a save", metadata: [
                "path": "\(nodes.path(of: save.node)?.description ?? "?")", "error": "\(error)",
            ])
            return false
        }
        selfCoordinating.insert(save.node)
        // Only now: a handle noted from here on finds the save in place and lets go itself (`noteWriter`).
        for held in saveHandles.takeClaims(of: save) { authority.release(held) }
        return true
    }

    /// A handle writing through a save was opened: its claims are the save's to let go of when
    /// it goes in place, or go at once when it has gone in place already.
    func noteWriter(_ handle: OpenFile) {
        guard let save = handle.save, handle.isWriter else { return }
        saveHandles.note(save, claims: handle.claims, origin: handle.origin)
        if save.writesInPlace, let held = handle.claims { authority.release(held) }
    }

    /// While an open for writing by `requester` may wait for another owner's save of `node`,
    /// looks at the owner's locks now and then: when the save's owner locks the file after
    /// the open began waiting, the save goes in place and the wait ends. Stops by itself when
    /// the save ends, when the claim timeout passes, or with `LockWatch.stop`. Nil when no
    /// other owner saves the node.
    func watchLocks(of node: Node, requester: ClaimOwner) -> LockWatch? {
        guard let save = activity.save(of: node), save.owner != requester, !save.writesInPlace else { return nil }
        let watch = LockWatch()
        let deadline = ContinuousClock.now + options.claimTimeout
        watch.schedule(on: claimWork) { [self] in
            guard ContinuousClock.now < deadline, activity.save(of: node) === save, !save.writesInPlace else { return false }
            return !yieldsToLocks(save, requester: requester)
        }
        return watch
    }

    /// An open that meets a file another owner saves: when it is locked, the save goes in
    /// place at once and the open does too; else the locks are watched while the open waits.
    /// Returns whether the open goes in place now, and the watch to stop once it goes on.
    func meetLocks(_ node: Node, requester: ClaimOwner, inPlace: Bool) -> (inPlace: Bool, watch: LockWatch?) {
        if inPlace || !node.isRegularFile || !activity.hasSaves { return (inPlace, nil) }
        guard let save = activity.save(of: node) else { return (false, nil) }
        if yieldsToLocks(save, requester: requester) { return (true, nil) }
        return (false, watchLocks(of: node, requester: requester))
    }
}

/// A repeating look (at the kernel's locks) on a dispatch queue, every 5 ms at first and less
/// often the longer it goes on (at most every 100 ms), until the look says to stop or `stop`.
///
/// Sendable: an atomic flag.
final class LockWatch: Sendable {
    private let stopped = Atomic<Bool>(false)

    func schedule(on queue: DispatchQueue, _ look: @escaping @Sendable () -> Bool) {
        step(on: queue, after: 5, look)
    }

    private func step(on queue: DispatchQueue, after milliseconds: Int, _ look: @escaping @Sendable () -> Bool) {
        queue.asyncAfter(deadline: .now() + .milliseconds(milliseconds)) { [self] in
            guard !stopped.load(ordering: .relaxed), look() else { return }
            step(on: queue, after: min(milliseconds * 2, 100), look)
        }
    }

    func stop() {
        stopped.store(true, ordering: .relaxed)
    }
}
