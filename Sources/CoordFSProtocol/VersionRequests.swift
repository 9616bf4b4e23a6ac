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
    /// The file's mode (type and permission bits) when it was kept.
    public var mode: UInt32
    public var resolved: Bool
    public var pinned: Bool

    public init(id: Int64, path: FilePath, size: Int64, modified: Int64, kept: Int64, kind: String, pid: Int32, uid: UInt32,
                process: String?, mode: UInt32, resolved: Bool, pinned: Bool) {
        self.id = id
        self.path = path
        self.size = size
        self.modified = modified
        self.kept = kept
        self.kind = kind
        self.pid = pid
        self.uid = uid
        self.process = process
        self.mode = mode
        self.resolved = resolved
        self.pinned = pinned
    }

    private enum CodingKeys: String, CodingKey {
        case id, path, pathBytes, size, modified, kept, kind, pid, uid, process, mode, resolved, pinned
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
        try container.encode(mode, forKey: .mode)
        try container.encode(resolved, forKey: .resolved)
        try container.encode(pinned, forKey: .pinned)
    }
}
