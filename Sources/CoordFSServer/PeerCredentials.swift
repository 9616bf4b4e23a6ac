import Glibc
import NIOCore

/// Who is on the other end of a connection, as the kernel reported it (SO_PEERCRED).
public struct PeerCredentials: Sendable, Hashable {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32

    public init(pid: Int32, uid: UInt32, gid: UInt32) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }
}

/// The layout of Linux's `struct ucred` (which Swift's Glibc module does not export).
private struct RawPeerCredentials: Sendable {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}

extension PeerCredentials {
    /// SO_PEERCRED of an accepted connection: who connected, as the kernel recorded it at connect time.
    static func read(from channel: any Channel) -> EventLoopFuture<PeerCredentials> {
        guard let provider = channel as? any SocketOptionProvider else {
            return channel.eventLoop.makeFailedFuture(ControlSocketError("this channel cannot report its peer's credentials"))
        }
        let future: EventLoopFuture<RawPeerCredentials> = provider.unsafeGetSocketOption(
            level: NIOBSDSocket.OptionLevel(rawValue: SOL_SOCKET), name: NIOBSDSocket.Option(rawValue: SO_PEERCRED))
        return future.map { PeerCredentials(pid: $0.pid, uid: $0.uid, gid: $0.gid) }
    }
}
