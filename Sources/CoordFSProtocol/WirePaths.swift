#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import SystemPackage

// How a path travels in JSON, which has strings of text but not of bytes (Docs/PROTOCOL.md,
// "Paths that are not UTF-8"). A path that is valid UTF-8 (almost every one) is a plain JSON
// string, as always. Otherwise the field holds a readable stand-in (the bytes decoded with
// U+FFFD for what is not UTF-8) and a sibling field, named like it with `Bytes` appended,
// holds the exact bytes in base64; for a list of paths, the sibling lists every path's bytes.
// Whoever reads a message takes the sibling when it is there: nobody ever gets a repaired
// name back as if it were the real one. The types here carry paths as `FilePath`, whose bytes
// are exact on Linux.

/// A path the wire cannot carry: no file path holds a NUL byte.
public struct InvalidWirePath: Error, Sendable, Hashable {
    /// The field that held it.
    public var field: String
}

public enum WirePath {
    /// The path's bytes, exactly.
    public static func bytes(of path: FilePath) -> [UInt8] {
        path.withPlatformString { start in
            var count = 0
            while start[count] != 0 { count += 1 }
            return Array(UnsafeRawBufferPointer(start: start, count: count))
        }
    }

    /// The path made of `bytes`; nil when they hold a NUL byte, which no path can.
    public static func path(_ bytes: some Collection<UInt8>) -> FilePath? {
        guard !bytes.contains(0) else { return nil }
        let cString = bytes.map { CChar(bitPattern: $0) } + [0]
        return cString.withUnsafeBufferPointer { FilePath(platformString: $0.baseAddress!) }
    }

    /// What goes in the path field itself: the exact text when the bytes are UTF-8 (then no
    /// sibling is needed), else a stand-in with U+FFFD, and the sibling is needed.
    static func text(of bytes: [UInt8]) -> (text: String, exact: Bool) {
        if let text = String(validating: bytes, as: UTF8.self) { return (text, true) }
        return (String(decoding: bytes, as: UTF8.self), false)
    }

    static func base64(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString()
    }

    /// What a list of paths puts on the wire: its texts, and when any of them is not UTF-8,
    /// every path's bytes in base64 for the sibling field.
    static func fields(of paths: [FilePath]) -> (texts: [String], bytes: [String]?) {
        let bytes = paths.map(WirePath.bytes(of:))
        let texts = bytes.map(WirePath.text(of:))
        return (texts.map(\.text), texts.allSatisfy(\.exact) ? nil : bytes.map(WirePath.base64))
    }
}

extension KeyedEncodingContainer {
    /// The key of the field that carries the exact bytes of the paths in `key`.
    private func bytesKey(_ key: Key) -> Key {
        guard let sibling = Key(stringValue: key.stringValue + "Bytes") else {
            preconditionFailure("\(Key.self) needs a key \(key.stringValue)Bytes beside \(key.stringValue)")
        }
        return sibling
    }

    /// Encodes a path under `key`, with its bytes beside it when it is not UTF-8.
    public mutating func encodePath(_ path: FilePath, forKey key: Key) throws {
        let bytes = WirePath.bytes(of: path)
        let (text, exact) = WirePath.text(of: bytes)
        try encode(text, forKey: key)
        if !exact { try encode(WirePath.base64(bytes), forKey: bytesKey(key)) }
    }

    public mutating func encodePathIfPresent(_ path: FilePath?, forKey key: Key) throws {
        if let path { try encodePath(path, forKey: key) }
    }

    /// Encodes a list of paths under `key`; when any is not UTF-8, the bytes of all of them beside it.
    public mutating func encodePaths(_ paths: [FilePath], forKey key: Key) throws {
        let (texts, bytes) = WirePath.fields(of: paths)
        try encode(texts, forKey: key)
        if let bytes { try encode(bytes, forKey: bytesKey(key)) }
    }

    public mutating func encodePathsIfPresent(_ paths: [FilePath]?, forKey key: Key) throws {
        if let paths { try encodePaths(paths, forKey: key) }
    }
}

extension KeyedDecodingContainer {
    private func bytesKey(_ key: Key) -> Key {
        guard let sibling = Key(stringValue: key.stringValue + "Bytes") else {
            preconditionFailure("\(Key.self) needs a key \(key.stringValue)Bytes beside \(key.stringValue)")
        }
        return sibling
    }

    private func path(_ bytes: some Collection<UInt8>, _ key: Key) throws -> FilePath {
        guard let path = WirePath.path(bytes) else { throw InvalidWirePath(field: key.stringValue) }
        return path
    }

    private func decodeBase64(_ text: String, _ key: Key) throws -> [UInt8] {
        guard let data = Data(base64Encoded: text) else {
            throw DecodingError.dataCorruptedError(forKey: bytesKey(key), in: self,
                                                   debugDescription: "base64 of a path's bytes expected")
        }
        return Array(data)
    }

    /// The path under `key`: the exact bytes from its sibling when there is one, else the string.
    public func decodePath(forKey key: Key) throws -> FilePath {
        guard let path = try decodePathIfPresent(forKey: key) else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "missing path"))
        }
        return path
    }

    public func decodePathIfPresent(forKey key: Key) throws -> FilePath? {
        if let encoded = try decodeIfPresent(String.self, forKey: bytesKey(key)) {
            return try path(decodeBase64(encoded, key), key)
        }
        return try decodeIfPresent(String.self, forKey: key).map { try path($0.utf8, key) }
    }

    public func decodePaths(forKey key: Key) throws -> [FilePath] {
        guard let paths = try decodePathsIfPresent(forKey: key) else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "missing paths"))
        }
        return paths
    }

    public func decodePathsIfPresent(forKey key: Key) throws -> [FilePath]? {
        if let encoded = try decodeIfPresent([String].self, forKey: bytesKey(key)) {
            return try encoded.map { try path(decodeBase64($0, key), key) }
        }
        return try decodeIfPresent([String].self, forKey: key)?.map { try path($0.utf8, key) }
    }
}
