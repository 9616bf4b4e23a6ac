import CoordFSCore
import CoordFSProtocol
import Dispatch
import FoundationEssentials
import SystemPackage

// The version store's requests: a file's versions and their bytes, for clients whose user
// may read the file (or, for a deleted one, see that it is gone from its directory).
extension Session {
    func listVersions(_ id: RequestID, _ body: Request.Versions) {
        withVersions(id, body.path) { (catalog, path) throws(ErrorDetail) -> Request.Versions.Reply in
            let file: FileVersions?
            do throws(Errno) { file = try catalog.versions(of: path) } catch { throw ErrorDetail(code: .internal, message: "the version index: \(error)") }
            guard let file else { throw ErrorDetail(code: .noVersion, message: "\(path) has no versions") }
            return Request.Versions.Reply(file: file.file, deleted: file.deleted, versions: file.versions.map(VersionInfo.init))
        }
    }

    func readVersion(_ id: RequestID, _ body: Request.VersionRead) {
        guard body.offset >= 0, body.length >= 0 else {
            return fail(id, .badRequest, "version-read: offset and length must not be negative")
        }
        let length = min(body.length, Request.VersionRead.maxLength)
        let (access, peer) = (context.access, self.peer)
        withVersions(id, body.path) { (catalog, path) throws(ErrorDetail) -> Request.VersionRead.Reply in
            // The file's permissions now are not enough: a version keeps the owner and mode it
            // had (a file once 0600, or deleted, must not give its bytes to others).
            if let kept = catalog.status(ofVersion: body.version), !access.canRead(kept, uid: peer.uid, gid: peer.gid, pid: peer.pid) {
                throw ErrorDetail(code: .notPermitted, message: "\(path): uid \(peer.uid) may not read version \(body.version), as the file was when kept")
            }
            do throws(Errno) {
                let bytes = try catalog.read(version: body.version, of: path, offset: body.offset, count: length)
                return Request.VersionRead.Reply(data: Data(bytes).base64EncodedString(), eof: bytes.count < length)
            } catch .noSuchFileOrDirectory {
                throw ErrorDetail(code: .noVersion, message: "\(path) has no version \(body.version)")
            } catch {
                throw ErrorDetail(code: .internal, message: "reading version \(body.version) of \(path): \(error)")
            }
        }
    }

    func changeVersion(_ id: RequestID, _ body: Request.VersionChange) {
        let origin = self.origin
        withVersions(id, body.path, changing: true) { (catalog, path) throws(ErrorDetail) -> VersionInfo in
            do throws(Errno) {
                return VersionInfo(try catalog.change(version: body.version, of: path, pinned: body.pinned, resolved: body.resolved, by: origin))
            } catch {
                throw Self.detail(error, path, body.version)
            }
        }
    }

    func removeVersions(_ id: RequestID, _ body: Request.VersionRemove) {
        let origin = self.origin
        withVersions(id, body.path, changing: true) { (catalog, path) throws(ErrorDetail) -> Request.VersionRemove.Reply in
            do throws(Errno) {
                return Request.VersionRemove.Reply(removed: try catalog.remove(versions: body.versions, of: path, by: origin))
            } catch {
                throw Self.detail(error, path, nil)
            }
        }
    }

    func listConflicts(_ id: RequestID, _ body: Request.Conflicts) {
        let (access, peer) = (context.access, self.peer)
        withVersions(id, body.path) { (catalog, path) throws(ErrorDetail) -> Request.Conflicts.Reply in
            let found: [(path: MountPath, versions: [VersionRecord])]
            do throws(Errno) { found = try catalog.conflicts(beneath: path) } catch { throw Self.detail(error, path, nil) }
            // Only files this client's user could read itself.
            let shown = found.filter { peer.uid == 0 || access.readAccess($0.path, uid: peer.uid, gid: peer.gid, pid: peer.pid) == .readable }
            return Request.Conflicts.Reply(files: shown.map { .init(path: $0.path.filePath, versions: $0.versions.map(VersionInfo.init)) })
        }
    }

    func noteRestored(_ id: RequestID, _ body: Request.VersionRestored) {
        let pid = peer.pid
        withVersions(id, body.path, changing: true) { (catalog, path) throws(ErrorDetail) -> Request.VersionRestored.Reply in
            do throws(Errno) {
                try catalog.restored(version: body.version, of: path, by: pid)
                return Request.VersionRestored.Reply(restored: true)
            } catch {
                throw Self.detail(error, path, body.version)
            }
        }
    }

    /// The client's process, as the version store's notices name who changed versions.
    private var origin: VersionOrigin {
        VersionOrigin(pid: peer.pid, uid: peer.uid, process: client ?? "")
    }

    /// The error a catalog's failure stands for.
    private static func detail(_ error: Errno, _ path: MountPath, _ version: Int64?) -> ErrorDetail {
        if error == .noSuchFileOrDirectory {
            return ErrorDetail(code: .noVersion, message: version.map { "\(path) has no version \($0)" } ?? "\(path) has no versions")
        }
        return ErrorDetail(code: .internal, message: "the version store: \(error)")
    }

    /// Admits `wire` as a path the client may read (with `changing`, one it may also write),
    /// then runs `work` off the loop (the index and the store are disk reads) and replies with
    /// its result on the loop.
    private func withVersions<Reply: Codable & Sendable>(_ id: RequestID, _ wire: FilePath, changing: Bool = false,
                                                        _ work: @escaping @Sendable (any VersionCatalog, MountPath) throws(ErrorDetail) -> Reply) {
        guard let catalog = context.versions else {
            return fail(id, .versionsOff, "this mount keeps no versions (mount it with --versions)")
        }
        let path: MountPath
        switch admit(wire) {
        case .failure(let detail): return fail(id, detail)
        case .success(let admitted): path = admitted
        }
        if changing && !gate.mayChange(path) {
            return fail(id, .notPermitted, "\(path): uid \(peer.uid) may not change it, nor its versions")
        }
        let context = self.context
        let sessionID = self.id
        DispatchQueue.global().async {
            let result: Result<Reply, ErrorDetail>
            do throws(ErrorDetail) { result = .success(try work(catalog, path)) } catch { result = .failure(error) }
            context.eventLoop.execute {
                guard let session = context.sessions[sessionID], !session.isClosed else { return }
                switch result {
                case .success(let reply): session.reply(id, reply)
                case .failure(let detail): session.fail(id, detail)
                }
                session.flush()
            }
        }
    }
}
