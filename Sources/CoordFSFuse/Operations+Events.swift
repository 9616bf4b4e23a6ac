import CFuse
import CoordFSCore

/// Who caused a change, read from a request before it is answered (after that the request is gone).
struct ChangeOrigin: Sendable {
    let pid: Int32
    let uid: UInt32
}

enum PendingChangeKind { case created, changed, deleted, moved, attributes }

extension FileSystem {
    func origin(of request: fuse_req_t) -> ChangeOrigin {
        let context = fuse_req_ctx(request)!.pointee
        return ChangeOrigin(pid: processes.threadGroup(of: context.pid), uid: context.uid)
    }

    /// Reports a change to subscribers (wired to the event hub with the control socket).
    func publish(_ kind: PendingChangeKind, origin: ChangeOrigin?, path: MountPath?, destination: MountPath? = nil, isDirectory: Bool, size: Int64?) {
    }
}
