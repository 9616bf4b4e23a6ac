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

    /// Pins or unpins version `id`, marks it resolved or not (nil: unchanged); returns it as it is now.
    public func changeVersion(_ id: Int64, of path: FilePath, pinned: Bool? = nil, resolved: Bool? = nil) async throws(CoordFSError) -> VersionInfo {
        try await perform(.versionChange(.init(path: path, version: id, pinned: pinned, resolved: resolved)), VersionInfo.self)
    }

    /// Removes versions `ids` of the file at `path`, or all of them when nil; returns how many went.
    public func removeVersions(_ ids: [Int64]?, of path: FilePath) async throws(CoordFSError) -> Int {
        try await perform(.versionRemove(.init(path: path, versions: ids)), Request.VersionRemove.Reply.self).removed
    }

    /// The files at or beneath `path` with conflict versions not resolved yet.
    public func conflicts(beneath path: FilePath) async throws(CoordFSError) -> [Request.Conflicts.FileConflicts] {
        try await perform(.conflicts(.init(path: path)), Request.Conflicts.Reply.self).files
    }

    /// Tells the store that this process has just written version `id` back to `path` through the mount.
    public func noteRestored(_ id: Int64, of path: FilePath) async throws(CoordFSError) {
        _ = try await perform(.versionRestored(.init(path: path, version: id)), Request.VersionRestored.Reply.self)
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
