/// A parsed JSON document, for the few messages a short-lived client reads (`coordfs exec`:
/// the location attribute, the replies to `hello` and `claim`; see `ShortExchange`).
///
/// Codable costs nothing per message once warm, but its first use in a process instantiates
/// the generic metadata of every container and key type it meets: about a millisecond, as long
/// as the rest of a whole `exec -- true`. This reads plain values, with no generics.
public enum JSONValue: Sendable {
    case null
    case bool(Bool)
    /// The number's text, exactly as written (converted on use).
    case number(String)
    case string(String)
    case array([JSONValue])
    /// Members in their order; a repeated key keeps its last value (`subscript` looks from the end).
    case object([(key: String, value: JSONValue)])

    /// The member `key` of an object (nil for a missing key or a value that is not an object).
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.last(where: { $0.key == key })?.value
    }

    public var string: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    public var array: [JSONValue]? {
        if case .array(let items) = self { return items }
        return nil
    }

    public var double: Double? {
        if case .number(let text) = self { return Double(text) }
        return nil
    }

    public var uint64: UInt64? {
        if case .number(let text) = self { return UInt64(text) }
        return nil
    }

    public var int64: Int64? {
        if case .number(let text) = self { return Int64(text) }
        return nil
    }

    /// Parses one JSON document (surrounding white space allowed); nil when it is not JSON.
    /// (An array, not any collection: unspecialised generic code is what this type avoids.)
    public static func parse(_ bytes: [UInt8]) -> JSONValue? {
        var reader = Reader(bytes: bytes)
        guard let value = reader.value(depth: 0) else { return nil }
        reader.skipSpace()
        return reader.offset == reader.bytes.count ? value : nil
    }

    private struct Reader {
        let bytes: [UInt8]
        var offset = 0
        /// Nesting deeper than any message of the protocol is refused, never recursed into.
        static let maxDepth = 64

        mutating func skipSpace() {
            while offset < bytes.count, [0x20, 0x09, 0x0a, 0x0d].contains(bytes[offset]) { offset += 1 }
        }

        mutating func take(_ literal: String) -> Bool {
            let utf8 = Array(literal.utf8)
            guard bytes.count - offset >= utf8.count, bytes[offset..<(offset + utf8.count)].elementsEqual(utf8) else { return false }
            offset += utf8.count
            return true
        }

        mutating func value(depth: Int) -> JSONValue? {
            skipSpace()
            guard offset < bytes.count, depth < Self.maxDepth else { return nil }
            switch bytes[offset] {
            case UInt8(ascii: "{"):
                offset += 1
                var members: [(key: String, value: JSONValue)] = []
                skipSpace()
                if offset < bytes.count, bytes[offset] == UInt8(ascii: "}") {
                    offset += 1
                    return .object(members)
                }
                while true {
                    skipSpace()
                    guard let key = string() else { return nil }
                    skipSpace()
                    guard take(":"), let member = value(depth: depth + 1) else { return nil }
                    members.append((key, member))
                    skipSpace()
                    if take(",") { continue }
                    return take("}") ? .object(members) : nil
                }
            case UInt8(ascii: "["):
                offset += 1
                var items: [JSONValue] = []
                skipSpace()
                if take("]") { return .array(items) }
                while true {
                    guard let item = value(depth: depth + 1) else { return nil }
                    items.append(item)
                    skipSpace()
                    if take(",") { continue }
                    return take("]") ? .array(items) : nil
                }
            case UInt8(ascii: "\""):
                return string().map(JSONValue.string)
            case UInt8(ascii: "t"):
                return take("true") ? .bool(true) : nil
            case UInt8(ascii: "f"):
                return take("false") ? .bool(false) : nil
            case UInt8(ascii: "n"):
                return take("null") ? .null : nil
            default:
                return number()
            }
        }

        mutating func number() -> JSONValue? {
            let start = offset
            while offset < bytes.count, "+-0123456789.eE".utf8.contains(bytes[offset]) { offset += 1 }
            let text = String(decoding: bytes[start..<offset], as: UTF8.self)
            // JSON's grammar is stricter than Double's (no "+1", no ".5"): checked here.
            guard let first = text.utf8.first, first == UInt8(ascii: "-") || (0x30...0x39).contains(first),
                  !text.hasPrefix("-.") && text.last.map({ $0.isNumber }) == true, Double(text) != nil else { return nil }
            return .number(text)
        }

        /// A string at `offset` (which holds its opening quote), its escapes resolved.
        mutating func string() -> String? {
            guard offset < bytes.count, bytes[offset] == UInt8(ascii: "\"") else { return nil }
            offset += 1
            var utf8: [UInt8] = []
            while offset < bytes.count {
                let byte = bytes[offset]
                offset += 1
                switch byte {
                case UInt8(ascii: "\""):
                    return String(validating: utf8, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    guard offset < bytes.count else { return nil }
                    let escaped = bytes[offset]
                    offset += 1
                    switch escaped {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(escaped)
                    case UInt8(ascii: "b"): utf8.append(0x08)
                    case UInt8(ascii: "f"): utf8.append(0x0c)
                    case UInt8(ascii: "n"): utf8.append(0x0a)
                    case UInt8(ascii: "r"): utf8.append(0x0d)
                    case UInt8(ascii: "t"): utf8.append(0x09)
                    case UInt8(ascii: "u"):
                        guard var scalar = hex4() else { return nil }
                        if (0xd800..<0xdc00).contains(scalar) {
                            // A surrogate pair: the low half must follow.
                            guard take("\\u"), let low = hex4(), (0xdc00..<0xe000).contains(low) else { return nil }
                            scalar = 0x10000 + ((scalar - 0xd800) << 10) + (low - 0xdc00)
                        }
                        guard let character = Unicode.Scalar(scalar) else { return nil }
                        utf8.append(contentsOf: String(Character(character)).utf8)
                    default:
                        return nil
                    }
                case 0..<0x20:
                    return nil
                default:
                    utf8.append(byte)
                }
            }
            return nil
        }

        mutating func hex4() -> UInt32? {
            guard bytes.count - offset >= 4 else { return nil }
            var value: UInt32 = 0
            for byte in bytes[offset..<(offset + 4)] {
                guard let digit = Character(Unicode.Scalar(byte)).hexDigitValue else { return nil }
                value = value << 4 | UInt32(digit)
            }
            offset += 4
            return value
        }
    }
}
