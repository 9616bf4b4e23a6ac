import SystemPackage

// The version store's requests (`coordfs mount --versions`, Docs/VERSIONS.md).
extension Request {
    /// Lists the versions of the file at `path` (the one there now, or the last one deleted there).
    public struct Versions: Sendable, Hashable, Codable {
        public var path: FilePath

        public init(path: FilePath) {
            self.path = path
        }

        private enum CodingKeys: String, CodingKey {
            case path, pathBytes
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            path = try container.decodePath(forKey: .path)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encodePath(path, forKey: .path)
        }

        public struct Reply: Sendable, Hashable, Codable {
            /// The file's number in the store: the same through saves, renames and moves.
            public var file: Int64
            /// The file was deleted through the mount; its versions can restore it.
            public var deleted: Bool
            /// Oldest first.
            public var versions: [VersionInfo]

            public init(file: Int64, deleted: Bool, versions: [VersionInfo]) {
                self.file = file
                self.deleted = deleted
                self.versions = versions
            }
        }
    }

    /// Reads up to `length` bytes of a version from `offset`; the reply's `data` is base64.
    public struct VersionRead: Sendable, Hashable, Codable {
        public var path: FilePath
        public var version: Int64
        public var offset: Int64
        public var length: Int

        /// The most one read returns: lines stay well under the server's line limit.
        public static let maxLength = 256 * 1024

        public init(path: FilePath, version: Int64, offset: Int64, length: Int) {
            self.path = path
            self.version = version
            self.offset = offset
            self.length = length
        }

        private enum CodingKeys: String, CodingKey {
            case path, pathBytes, version, offset, length
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            path = try container.decodePath(forKey: .path)
            version = try container.decode(Int64.self, forKey: .version)
            offset = try container.decode(Int64.self, forKey: .offset)
            length = try container.decode(Int.self, forKey: .length)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encodePath(path, forKey: .path)
            try container.encode(version, forKey: .version)
            try container.encode(offset, forKey: .offset)
            try container.encode(length, forKey: .length)
        }

        public struct Reply: Sendable, Hashable, Codable {
            /// The bytes, base64; fewer than asked for only at the version's end.
            public var data: String
            public var eof: Bool

            public init(data: String, eof: Bool) {
                self.data = data
                self.eof = eof
            }
        }
    }
}

/// One version as the wire shows it.
public struct VersionInfo: Sendable, Hashable, Codable {
    public var id: Int64
    /// Where the file was when the version was kept.
    public var path: FilePath
    public var size: Int64
    /// Nanoseconds since the epoch: when the version was last modified, and when it was kept.
    public var modified: Int64
    public var kept: Int64
    /// save, delete, conflict or restore: what was about to make it go.
    public var kind: String
    public var pid: Int32
    public var uid: UInt32
    public var process: String?
    /// With several hosts (`--cluster`), the host the process ran on; absent otherwise.
    public var host: String?
    /// The file's mode (type and permission bits) when it was kept.
    public var mode: UInt32
    public var resolved: Bool
    public var pinned: Bool

    public init(id: Int64, path: FilePath, size: Int64, modified: Int64, kept: Int64, kind: String, pid: Int32, uid: UInt32,
                process: String?, host: String? = nil, mode: UInt32, resolved: Bool, pinned: Bool) {
        self.id = id
        self.path = path
        self.size = size
        self.modified = modified
        self.kept = kept
        self.kind = kind
        self.pid = pid
        self.uid = uid
        self.process = process
        self.host = host
        self.mode = mode
        self.resolved = resolved
        self.pinned = pinned
    }

    private enum CodingKeys: String, CodingKey {
        case id, path, pathBytes, size, modified, kept, kind, pid, uid, process, host, mode, resolved, pinned
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(Int64.self, forKey: .id)
        path = try container.decodePath(forKey: .path)
        size = try container.decode(Int64.self, forKey: .size)
        modified = try container.decode(Int64.self, forKey: .modified)
        kept = try container.decode(Int64.self, forKey: .kept)
        kind = try container.decode(String.self, forKey: .kind)
        pid = try container.decode(Int32.self, forKey: .pid)
        uid = try container.decode(UInt32.self, forKey: .uid)
        process = try container.decodeIfPresent(String.self, forKey: .process)
        host = try container.decodeIfPresent(String.self, forKey: .host)
        mode = try container.decode(UInt32.self, forKey: .mode)
        resolved = try container.decode(Bool.self, forKey: .resolved)
        pinned = try container.decode(Bool.self, forKey: .pinned)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encodePath(path, forKey: .path)
        try container.encode(size, forKey: .size)
        try container.encode(modified, forKey: .modified)
        try container.encode(kept, forKey: .kept)
        try container.encode(kind, forKey: .kind)
        try container.encode(pid, forKey: .pid)
        try container.encode(uid, forKey: .uid)
        try container.encodeIfPresent(process, forKey: .process)
        try container.encodeIfPresent(host, forKey: .host)
        try container.encode(mode, forKey: .mode)
        try container.encode(resolved, forKey: .resolved)
        try container.encode(pinned, forKey: .pinned)
    }
}

extension Request {
    /// Pins or unpins a version, marks it resolved or not (absent: unchanged). Needs write
    /// permission on the file. The reply is the version as it is now.
    public struct VersionChange: Sendable, Hashable, Codable {
        public var path: FilePath
        public var version: Int64
        public var pinned: Bool?
        public var resolved: Bool?

        public init(path: FilePath, version: Int64, pinned: Bool? = nil, resolved: Bool? = nil) {
            self.path = path
            self.version = version
            self.pinned = pinned
            self.resolved = resolved
        }

        private enum CodingKeys: String, CodingKey {
            case path, pathBytes, version, pinned, resolved
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            path = try container.decodePath(forKey: .path)
            version = try container.decode(Int64.self, forKey: .version)
            pinned = try container.decodeIfPresent(Bool.self, forKey: .pinned)
            resolved = try container.decodeIfPresent(Bool.self, forKey: .resolved)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encodePath(path, forKey: .path)
            try container.encode(version, forKey: .version)
            try container.encodeIfPresent(pinned, forKey: .pinned)
            try container.encodeIfPresent(resolved, forKey: .resolved)
        }
    }

    /// Removes versions of a file: `versions`, or all of them when absent. Needs write
    /// permission on the file. The reply says how many went: `{"removed":N}`.
    public struct VersionRemove: Sendable, Hashable, Codable {
        public var path: FilePath
        public var versions: [Int64]?

        public init(path: FilePath, versions: [Int64]?) {
            self.path = path
            self.versions = versions
        }

        private enum CodingKeys: String, CodingKey {
            case path, pathBytes, versions
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            path = try container.decodePath(forKey: .path)
            versions = try container.decodeIfPresent([Int64].self, forKey: .versions)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encodePath(path, forKey: .path)
            try container.encodeIfPresent(versions, forKey: .versions)
        }

        public struct Reply: Sendable, Hashable, Codable {
            public var removed: Int

            public init(removed: Int) {
                self.removed = removed
            }
        }
    }

    /// The files at or beneath a path with conflict versions not resolved yet (only files the
    /// client's user may read).
    public struct Conflicts: Sendable, Hashable, Codable {
        public var path: FilePath

        public init(path: FilePath) {
            self.path = path
        }

        private enum CodingKeys: String, CodingKey {
            case path, pathBytes
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            path = try container.decodePath(forKey: .path)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encodePath(path, forKey: .path)
        }

        public struct Reply: Sendable, Hashable, Codable {
            public var files: [FileConflicts]

            public init(files: [FileConflicts]) {
                self.files = files
            }
        }

        public struct FileConflicts: Sendable, Hashable, Codable {
            /// The file as it is named now.
            public var path: FilePath
            public var versions: [VersionInfo]

            public init(path: FilePath, versions: [VersionInfo]) {
                self.path = path
                self.versions = versions
            }

            private enum CodingKeys: String, CodingKey {
                case path, pathBytes, versions
            }

            public init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: CodingKeys.self)
                path = try container.decodePath(forKey: .path)
                versions = try container.decode([VersionInfo].self, forKey: .versions)
            }

            public func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: CodingKeys.self)
                try container.encodePath(path, forKey: .path)
                try container.encode(versions, forKey: .versions)
            }
        }
    }

    /// Says that this client has just restored `version` of the file by writing it through the
    /// mount (as `coordfs versions restore` does): the version that write replaced is marked
    /// `restore`, and a deleted file brought back keeps its versions. Needs write permission.
    public struct VersionRestored: Sendable, Hashable, Codable {
        public var path: FilePath
        public var version: Int64

        public init(path: FilePath, version: Int64) {
            self.path = path
            self.version = version
        }

        private enum CodingKeys: String, CodingKey {
            case path, pathBytes, version
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            path = try container.decodePath(forKey: .path)
            version = try container.decode(Int64.self, forKey: .version)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encodePath(path, forKey: .path)
            try container.encode(version, forKey: .version)
        }

        public struct Reply: Sendable, Hashable, Codable {
            public var restored: Bool

            public init(restored: Bool) {
                self.restored = restored
            }
        }
    }
}
