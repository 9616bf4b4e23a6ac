import CoordFSProtocol
import FoundationEssentials
import SystemPackage

// The version store (`coordfs mount --versions`): a file's versions and their bytes.
extension CoordFSConnection {
    /// The versions of the file at `path` (mount-relative): the one there now, or the last one
    /// deleted there. Fails with `no-version` when it has none, `versions-off` on a mount
    /// without a store.
    public func versions(of path: FilePath) async throws(CoordFSError) -> Request.Versions.Reply {
        try await perform(.versions(.init(path: path)), Request.Versions.Reply.self)
    }

    /// Calls `body` with the bytes of version `id` of the file at `path`, in order, a piece at a time.
    public func readVersion(_ id: Int64, of path: FilePath, _ body: ([UInt8]) throws -> Void) async throws {
        var offset: Int64 = 0
        while true {
            let reply = try await perform(.versionRead(.init(path: path, version: id, offset: offset, length: Request.VersionRead.maxLength)),
                                          Request.VersionRead.Reply.self)
            guard let data = Data(base64Encoded: reply.data) else {
                throw CoordFSError.protocolViolation("version-read: the server sent bytes that are not base64")
            }
            if !data.isEmpty { try body(Array(data)) }
            offset += Int64(data.count)
            if reply.eof { return }
        }
    }
}
