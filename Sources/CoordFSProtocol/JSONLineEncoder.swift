/// An `Encoder` that writes compact JSON with object keys in the order they were encoded.
///
/// Foundation's `JSONEncoder` orders keys by hash (differently from run to run) or
/// alphabetically; a protocol read by people at a terminal reads better with `"push"` or
/// `"id"` first, fields in their declared order, and the same bytes every time. Slashes are
/// not escaped; non-ASCII text is written as UTF-8; non-finite numbers are refused.
public struct JSONLineEncoder: Sendable {
    public init() {}

    /// `value` as JSON, without a newline.
    public func encode(_ value: some Encodable) throws -> [UInt8] {
        let root = try TreeEncoder.tree(for: value, codingPath: [])
        var output: [UInt8] = []
        output.reserveCapacity(256)
        JSONTree.write(root, into: &output)
        return output
    }
}

/// The document being built; objects and arrays are boxes so containers can fill them in place.
enum JSONTree {
    case null
    case bool(Bool)
    case number(String)
    case string(String)
    case object(ObjectBox)
    case array(ArrayBox)

    final class ObjectBox {
        var entries: [(key: String, value: JSONTree)] = []

        func set(_ key: String, _ value: JSONTree) {
            if let index = entries.firstIndex(where: { $0.key == key }) {
                entries[index].value = value
            } else {
                entries.append((key, value))
            }
        }
    }

    final class ArrayBox {
        var items: [JSONTree] = []
    }

    static func write(_ tree: JSONTree, into output: inout [UInt8]) {
        switch tree {
        case .null: output.append(contentsOf: "null".utf8)
        case .bool(let value): output.append(contentsOf: (value ? "true" : "false").utf8)
        case .number(let text): output.append(contentsOf: text.utf8)
        case .string(let text): writeString(text, into: &output)
        case .object(let box):
            output.append(UInt8(ascii: "{"))
            for (index, entry) in box.entries.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                writeString(entry.key, into: &output)
                output.append(UInt8(ascii: ":"))
                write(entry.value, into: &output)
            }
            output.append(UInt8(ascii: "}"))
        case .array(let box):
            output.append(UInt8(ascii: "["))
            for (index, item) in box.items.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                write(item, into: &output)
            }
            output.append(UInt8(ascii: "]"))
        }
    }

    /// A number as JSON writes it (whole ones without a fraction); nil for infinity and NaN.
    static func text(of number: Double) -> String? {
        guard number.isFinite else { return nil }
        if number == number.rounded(), abs(number) < 1e15 { return String(Int64(number)) }
        return "\(number)"
    }

    static func writeString(_ text: String, into output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case UInt8(ascii: "\n"): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case UInt8(ascii: "\r"): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case UInt8(ascii: "\t"): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0..<0x20, 0x7f:
                let hex = Array("0123456789abcdef".utf8)
                output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                           hex[Int(byte >> 4)], hex[Int(byte & 0xf)]])
            default: output.append(byte)
            }
        }
        output.append(UInt8(ascii: "\""))
    }
}

/// The slot one encoded value lands in.
private final class TreeEncoder: Encoder {
    var codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    var value: JSONTree?

    init(codingPath: [any CodingKey]) {
        self.codingPath = codingPath
    }

    static func tree(for value: some Encodable, codingPath: [any CodingKey]) throws -> JSONTree {
        switch value {
        case let text as String: return .string(text)
        case let flag as Bool: return .bool(flag)
        case let number as Int: return .number(String(number))
        case let number as Int64: return .number(String(number))
        case let number as UInt64: return .number(String(number))
        case let number as Int32: return .number(String(number))
        case let number as UInt32: return .number(String(number))
        case let number as Double: return try .number(format(number, codingPath))
        default:
            let encoder = TreeEncoder(codingPath: codingPath)
            try value.encode(to: encoder)
            return encoder.value ?? .object(JSONTree.ObjectBox())
        }
    }

    static func format(_ number: Double, _ codingPath: [any CodingKey]) throws -> String {
        guard let text = JSONTree.text(of: number) else {
            throw EncodingError.invalidValue(number, .init(codingPath: codingPath, debugDescription: "JSON has no infinity or NaN"))
        }
        return text
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let box: JSONTree.ObjectBox
        if case .object(let existing)? = value {
            box = existing
        } else {
            box = JSONTree.ObjectBox()
            value = .object(box)
        }
        return KeyedEncodingContainer(KeyedContainer<Key>(box: box, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let box: JSONTree.ArrayBox
        if case .array(let existing)? = value {
            box = existing
        } else {
            box = JSONTree.ArrayBox()
            value = .array(box)
        }
        return UnkeyedContainer(box: box, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleContainer(encoder: self)
    }
}

private struct IndexKey: CodingKey {
    var stringValue: String { String(intValue!) }
    var intValue: Int?
    init(_ index: Int) { intValue = index }
    init?(stringValue: String) { nil }
    init?(intValue: Int) { self.intValue = intValue }
}

private struct KeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let box: JSONTree.ObjectBox
    let codingPath: [any CodingKey]

    mutating func encodeNil(forKey key: Key) throws { box.set(key.stringValue, .null) }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        box.set(key.stringValue, try TreeEncoder.tree(for: value, codingPath: codingPath + [key]))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        let nested = JSONTree.ObjectBox()
        box.set(key.stringValue, .object(nested))
        return KeyedEncodingContainer(KeyedContainer<NestedKey>(box: nested, codingPath: codingPath + [key]))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let nested = JSONTree.ArrayBox()
        box.set(key.stringValue, .array(nested))
        return UnkeyedContainer(box: nested, codingPath: codingPath + [key])
    }

    mutating func superEncoder() -> any Encoder { SlotEncoder(codingPath: codingPath) { [box] in box.set("super", $0) } }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        SlotEncoder(codingPath: codingPath + [key]) { [box] in box.set(key.stringValue, $0) }
    }
}

private struct UnkeyedContainer: UnkeyedEncodingContainer {
    let box: JSONTree.ArrayBox
    let codingPath: [any CodingKey]
    var count: Int { box.items.count }

    mutating func encodeNil() throws { box.items.append(.null) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        box.items.append(try TreeEncoder.tree(for: value, codingPath: codingPath + [IndexKey(count)]))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let nested = JSONTree.ObjectBox()
        let path = codingPath + [IndexKey(count)]
        box.items.append(.object(nested))
        return KeyedEncodingContainer(KeyedContainer<NestedKey>(box: nested, codingPath: path))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let nested = JSONTree.ArrayBox()
        let path = codingPath + [IndexKey(count)]
        box.items.append(.array(nested))
        return UnkeyedContainer(box: nested, codingPath: path)
    }

    mutating func superEncoder() -> any Encoder {
        let index = box.items.count
        box.items.append(.null)
        return SlotEncoder(codingPath: codingPath + [IndexKey(index)]) { [box] in box.items[index] = $0 }
    }
}

private struct SingleContainer: SingleValueEncodingContainer {
    let encoder: TreeEncoder
    var codingPath: [any CodingKey] { encoder.codingPath }

    mutating func encodeNil() throws { encoder.value = .null }

    mutating func encode<T: Encodable>(_ value: T) throws {
        encoder.value = try TreeEncoder.tree(for: value, codingPath: codingPath)
    }
}

/// An encoder whose result is stored by a closure (for `superEncoder`, which nobody here uses,
/// but the protocol asks for).
private final class SlotEncoder: Encoder {
    let inner: TreeEncoder
    let store: (JSONTree) -> Void
    var codingPath: [any CodingKey] { inner.codingPath }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(codingPath: [any CodingKey], store: @escaping (JSONTree) -> Void) {
        self.inner = TreeEncoder(codingPath: codingPath)
        self.store = store
    }

    deinit {
        store(inner.value ?? .null)
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> { inner.container(keyedBy: type) }
    func unkeyedContainer() -> any UnkeyedEncodingContainer { inner.unkeyedContainer() }
    func singleValueContainer() -> any SingleValueEncodingContainer { inner.singleValueContainer() }
}
