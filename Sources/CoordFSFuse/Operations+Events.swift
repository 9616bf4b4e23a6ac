import CFuse
import CoordFSCore

/// Who caused a change, read from a request before it is answered (after that the request is gone).
struct ChangeOrigin: Sendable {
    let pid: Int32
    let uid: UInt32
}

extension FileSystem {
    func origin(of request: fuse_req_t) -> ChangeOrigin {
        let context = fuse_req_ctx(request)!.pointee
        return ChangeOrigin(pid: processes.threadGroup(of: context.pid), uid: context.uid)
    }

    /// Reports a change to subscribers. Not wired to the event hub yet (issue 4): the size is
    /// an autoclosure so that until then no operation pays a stat for it.
    func publish(_ kind: ChangeKind, origin: ChangeOrigin?, path: MountPath?, destination: MountPath? = nil, isDirectory: Bool,
                 size: @autoclosure () -> Int64?) {
    }
}
