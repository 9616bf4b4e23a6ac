#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import SystemPackage

/// The messages of a short exchange (`hello`, `claim`, their replies, the location attribute)
/// written and read without Codable, for a command whose whole life is that exchange
/// (`coordfs exec`): Codable's first use in a process costs as long as the rest of the command
/// (see `JSONValue`). It writes through `JSONLineEncoder`'s own writer (`JSONTree`) and path
/// fields (`WirePath.fields`), only without the Encoder around them, so the bytes are
/// `WireFormat`'s, and what is read means the same (ShortExchangeTests checks both); error
/// replies, rare and not in a hurry, are read with Codable, blockers and all.
public enum ShortExchange {
    /// `WireFormat.line(RequestEnvelope(id: id, request: .hello(hello)))`.
    public static func line(id: Int64, hello: Request.Hello) -> [UInt8] {
        let object = envelope(id: id, op: "hello")
        object.set("version", .number(String(hello.version)))
        if let client = hello.client { object.set("client", .string(client)) }
        return line(object)
    }

    /// `WireFormat.line(RequestEnvelope(id: id, request: .claim(claim)))`; nil for a wait that
    /// is not a number JSON can hold (infinity, NaN), which `WireFormat` refuses too.
    public static func line(id: Int64, claim: Request.Claim) -> [UInt8]? {
        let object = envelope(id: id, op: "claim")
        for (key, paths) in [("read", claim.read), ("write", claim.write)] {
            guard let paths else { continue }
            let (texts, bytes) = WirePath.fields(of: paths)
            object.set(key, list(texts.map(JSONTree.string)))
            if let bytes { object.set(key + "Bytes", list(bytes.map(JSONTree.string))) }
        }
        if let wait = claim.wait {
            guard let text = JSONTree.text(of: wait) else { return nil }
            object.set("wait", .number(text))
        }
        if let nonblock = claim.nonblock { object.set("nonblock", .bool(nonblock)) }
        return line(object)
    }

    private static func envelope(id: Int64, op: String) -> JSONTree.ObjectBox {
        let object = JSONTree.ObjectBox()
        object.set("id", .number(String(id)))
        object.set("op", .string(op))
        return object
    }

    private static func list(_ items: [JSONTree]) -> JSONTree {
        let array = JSONTree.ArrayBox()
        array.items = items
        return .array(array)
    }

    private static func line(_ object: JSONTree.ObjectBox) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(128)
        JSONTree.write(.object(object), into: &bytes)
        bytes.append(UInt8(ascii: "\n"))
        return bytes
    }

    // MARK: Reading

    /// A line from the server, as far as a short exchange cares.
    public enum Message: Sendable {
        /// A successful reply and its `ok` body.
        case ok(id: RequestID, body: JSONValue)
        case error(id: RequestID?, ErrorDetail)
        /// A push; `bye` carries the reason the server gave.
        case push(bye: String?)
        /// A `broken` push: one of the connection's claims was taken away.
        case broken(BrokenPush)
    }

    /// What `line` is; nil when it is none of the protocol's messages.
    public static func message(_ line: [UInt8]) -> Message? {
        guard let value = JSONValue.parse(line) else { return nil }
        if let push = value["push"]?.string {
            if push == "broken", let broken = try? WireFormat.makeDecoder().decode(BrokenPush.self, from: Data(line)) {
                return .broken(broken)
            }
            return .push(bye: push == "bye" ? value["reason"]?.string : nil)
        }
        if value["error"] != nil {
            guard let reply = try? WireFormat.makeDecoder().decode(ErrorReply.self, from: Data(line)) else { return nil }
            return .error(id: reply.id, reply.error)
        }
        guard let id = value["id"].flatMap(requestID), let body = value["ok"] else { return nil }
        return .ok(id: id, body: body)
    }

    private static func requestID(_ value: JSONValue) -> RequestID? {
        if let number = value.int64 { return .number(number) }
        return value.string.map(RequestID.text)
    }

    /// The body of a `claim` reply.
    public static func claimReply(_ body: JSONValue) -> Request.Claim.Reply? {
        guard let claim = body["claim"]?.uint64, let waited = body["waited"]?.double,
              let read = paths(body, "read"), let write = paths(body, "write") else { return nil }
        return .init(claim: claim, read: read, write: write, waited: waited)
    }

    /// The value of the `user.coordfs.control` attribute (`ControlLocation(attributeValue:)`).
    static func location(_ bytes: [UInt8]) -> ControlLocation? {
        guard let value = JSONValue.parse(bytes), let version = value["version"]?.int64, let socket = value["socket"]?.string,
              let path = paths(value, "path", single: true)?.first else { return nil }
        return ControlLocation(version: Int(version), socket: socket, path: path)
    }

    /// The paths under `key`, from its `Bytes` sibling when there is one (as `WirePaths`
    /// decodes them); nil when missing or not paths. `single`: one path, not a list.
    private static func paths(_ object: JSONValue, _ key: String, single: Bool = false) -> [FilePath]? {
        func items(_ value: JSONValue?) -> [String]? {
            guard let value else { return nil }
            if single { return value.string.map { [$0] } }
            guard let array = value.array else { return nil }
            let strings = array.compactMap(\.string)
            return strings.count == array.count ? strings : nil
        }
        let bytes: [[UInt8]]
        if let encoded = items(object[key + "Bytes"]) {
            let decoded = encoded.compactMap { Data(base64Encoded: $0).map(Array.init) }
            guard decoded.count == encoded.count else { return nil }
            bytes = decoded
        } else if let texts = items(object[key]) {
            bytes = texts.map { Array($0.utf8) }
        } else {
            return nil
        }
        let paths = bytes.compactMap(WirePath.path)
        return paths.count == bytes.count ? paths : nil
    }
}
