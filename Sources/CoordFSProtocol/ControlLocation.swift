import SystemPackage

/// Where a path's mount takes control requests, and what the path is called inside it.
///
/// Every item in a coordfs mount has the virtual extended attribute `user.coordfs.control`,
/// whose value is this, as JSON: `{"version":1,"socket":"/run/…/x.sock","path":"/rel/path"}`
/// (with `pathBytes` beside `path` when the path is not UTF-8, as everywhere on the wire).
/// Clients find the socket from any path in the mount without being told where it is.
public struct ControlLocation: Sendable, Hashable, Codable {
    public var version: Int
    /// The control socket.
    public var socket: String
    /// The path, relative to the mount's root ("/" for the mountpoint itself).
    public var path: FilePath

    public init(version: Int = 1, socket: String, path: FilePath) {
        self.version = version
        self.socket = socket
        self.path = path
    }

    /// The name of the attribute the mount answers with its location.
    public static let attributeName = "user.coordfs.control"

    /// The attribute's value: this location as JSON.
    public func attributeValue() throws -> [UInt8] {
        try JSONLineEncoder().encode(self)
    }

    /// The location an attribute's value gives; nil when it is not one. Read without Codable,
    /// for a command that starts fast (`ShortExchange`).
    public init?(attributeValue: [UInt8]) {
        guard let location = ShortExchange.location(attributeValue) else { return nil }
        self = location
    }

    private enum CodingKeys: String, CodingKey {
        case version, socket, path, pathBytes
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        version = try container.decode(Int.self, forKey: .version)
        socket = try container.decode(String.self, forKey: .socket)
        path = try container.decodePath(forKey: .path)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(version, forKey: .version)
        try container.encode(socket, forKey: .socket)
        try container.encodePath(path, forKey: .path)
    }
}
