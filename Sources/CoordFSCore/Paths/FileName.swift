import Glibc

/// One name in a directory (a path component), exactly as the kernel gave it: any bytes but
/// `/` and NUL.
///
/// Linux names are bytes, not text. A name that is not valid UTF-8 names a file as well as any
/// other, and decoding it to a `String` would repair it into a different name (each bad byte
/// becomes U+FFFD), so coordfs never holds a name as a `String`: the node table, claims, saves
/// and events all carry this type, and system calls get its bytes back as they came.
///
/// Names of up to 23 bytes (most of them) are stored in place, as a small `String` is, so
/// building one from the kernel's C string costs no allocation; longer ones keep their bytes
/// and a terminating NUL in one heap buffer, so either kind hands out a C string without copying.
public struct FileName: Sendable {
    private enum Storage: Sendable {
        /// `count` bytes, then zeros up to 24 bytes: the zeros end the C string.
        case inline(count: UInt8, words: (UInt64, UInt64, UInt64))
        /// Longer names.
        case outline(HeapBytes)
    }

    /// The bytes of a long name and a terminating NUL, on the heap. A class of its own rather
    /// than an array: an array lends its storage only to closures returning copyable values,
    /// and system calls here return noncopyable descriptors.
    /// Sendable: immutable after init.
    private final class HeapBytes: @unchecked Sendable {
        let start: UnsafeMutablePointer<CChar>
        let count: Int

        init(copying bytes: UnsafeRawBufferPointer) {
            count = bytes.count
            start = .allocate(capacity: bytes.count + 1)
            UnsafeMutableRawPointer(start).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
            start[bytes.count] = 0
        }

        deinit {
            start.deallocate()
        }

        var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: start, count: count) }
    }

    private let storage: Storage

    /// The longest name kept in place.
    static let inlineCapacity = 23

    /// Copies `bytes`, which the caller knows to hold neither NUL nor `/` (names the mount
    /// makes itself, written into a buffer of their own).
    init(unchecked bytes: UnsafeRawBufferPointer) {
        if bytes.count <= Self.inlineCapacity {
            var words: (UInt64, UInt64, UInt64) = (0, 0, 0)
            withUnsafeMutableBytes(of: &words) { $0.copyMemory(from: bytes) }
            storage = .inline(count: UInt8(bytes.count), words: words)
        } else {
            storage = .outline(HeapBytes(copying: bytes))
        }
    }

    /// The name the kernel handed over as a C string (a FUSE request, a directory entry),
    /// byte for byte: nothing is decoded or repaired.
    public init(cString: UnsafePointer<CChar>) {
        self.init(unchecked: UnsafeRawBufferPointer(start: cString, count: strlen(cString)))
    }

    /// A name made of `bytes`; nil when they are empty or hold `/` or NUL, which no name can.
    public init?(_ bytes: some Collection<UInt8>) {
        guard !bytes.isEmpty, !bytes.contains(where: { $0 == 0 || $0 == UInt8(ascii: "/") }) else { return nil }
        let copy = Array(bytes)
        self = copy.withUnsafeBytes { FileName(unchecked: $0) }
    }

    /// No name: what the root, and a node the kernel forgot, are known by.
    public static let empty = FileName(unchecked: UnsafeRawBufferPointer(start: nil, count: 0))

    /// The number of bytes.
    public var count: Int {
        switch storage {
        case .inline(let count, _): return Int(count)
        case .outline(let heap): return heap.count
        }
    }

    public var isEmpty: Bool { count == 0 }

    /// Runs `body` with the name as a NUL-terminated C string, for a system call. No copy is
    /// made on the heap; the pointer is valid only inside `body`.
    @inline(__always)
    public func withCString<R: ~Copyable, E: Error>(_ body: (UnsafePointer<CChar>) throws(E) -> R) throws(E) -> R {
        switch storage {
        case .inline(_, var words):
            return try withUnsafeMutableBytes(of: &words) { (raw) throws(E) -> R in
                try body(raw.bindMemory(to: CChar.self).baseAddress!)
            }
        case .outline(let heap):
            defer { withExtendedLifetime(heap) {} }
            return try body(heap.start)
        }
    }

    /// Runs `body` with the name's bytes (no terminating NUL).
    @inline(__always)
    public func withUnsafeBytes<R: ~Copyable, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        switch storage {
        case .inline(let count, var words):
            return try Swift.withUnsafeBytes(of: &words) { (raw) throws(E) -> R in
                try body(UnsafeRawBufferPointer(rebasing: raw[..<Int(count)]))
            }
        case .outline(let heap):
            defer { withExtendedLifetime(heap) {} }
            return try body(heap.bytes)
        }
    }

    /// The name's bytes.
    public var bytes: [UInt8] {
        withUnsafeBytes { Array($0) }
    }

    /// The name as text, when it is valid UTF-8 (then the text's UTF-8 is exactly the name);
    /// nil otherwise. Never a repaired approximation: see `description` for that.
    public var string: String? {
        withUnsafeBytes { String(validating: $0, as: UTF8.self) }
    }

    /// Whether the name is valid UTF-8, as almost every name is.
    public var isValidUTF8: Bool {
        withUnsafeBytes { raw in raw.allSatisfy { $0 < 0x80 } || String(validating: raw, as: UTF8.self) != nil }
    }

    /// Whether the name ends with `suffix`'s bytes.
    public func hasSuffix(_ suffix: StaticString) -> Bool {
        let tail = UnsafeRawBufferPointer(start: suffix.utf8Start, count: suffix.utf8CodeUnitCount)
        return withUnsafeBytes { raw in raw.count >= tail.count && raw.suffix(tail.count).elementsEqual(tail) }
    }

    /// The name followed by `suffix`'s bytes (which must hold no `/`).
    public func appending(_ suffix: some StringProtocol) -> FileName {
        FileName(bytes + Array(suffix.utf8))!
    }

    /// The Unicode scalars of the name, in order, with nil for each byte that is not part of
    /// valid UTF-8: what pattern matching compares, since a pattern is text and a bad byte is
    /// no character of any text.
    public var scalars: [Unicode.Scalar?] {
        var result: [Unicode.Scalar?] = []
        result.reserveCapacity(count)
        withUnsafeBytes { Self.decode($0, scalar: { result.append($0) }, invalid: { _ in result.append(nil) }) }
        return result
    }

    /// Walks `bytes` as UTF-8: each valid scalar to `scalar`, each byte that belongs to none to `invalid`.
    static func decode(_ bytes: UnsafeRawBufferPointer, scalar: (Unicode.Scalar) -> Void, invalid: (UInt8) -> Void) {
        var parser = Unicode.UTF8.ForwardParser()
        var iterator = bytes.makeIterator()
        var position = 0
        while true {
            switch parser.parseScalar(from: &iterator) {
            case .valid(let encoded):
                scalar(Unicode.UTF8.decode(encoded))
                position += encoded.count
            case .error(let length):
                for byte in bytes[position..<(position + length)] { invalid(byte) }
                position += length
            case .emptyInput:
                return
            }
        }
    }
}

extension FileName: Hashable {
    public static func == (lhs: FileName, rhs: FileName) -> Bool {
        switch (lhs.storage, rhs.storage) {
        case let (.inline(leftCount, left), .inline(rightCount, right)):
            return leftCount == rightCount && left == right
        case let (.outline(left), .outline(right)):
            return left === right || (left.count == right.count && memcmp(left.start, right.start, left.count) == 0)
        default:
            return false // the length decides the storage, so different storages differ in length
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch storage {
        case .inline(_, let words):
            // The zero padding makes the words alone tell names apart (no name holds NUL).
            hasher.combine(words.0)
            hasher.combine(words.1)
            hasher.combine(words.2)
        case .outline(let heap):
            hasher.combine(bytes: heap.bytes)
        }
    }
}

extension FileName: Comparable {
    /// Byte order, as `ls` sorts in the C locale.
    public static func < (lhs: FileName, rhs: FileName) -> Bool {
        lhs.withUnsafeBytes { left in rhs.withUnsafeBytes { right in left.lexicographicallyPrecedes(right) } }
    }
}

extension FileName: CustomStringConvertible, CustomDebugStringConvertible {
    /// For people and logs only, never to name a file: the text of the name, with each byte
    /// that is not valid UTF-8, and each control character, written as `\xHH`.
    public var description: String {
        if let text = string, !text.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) { return text }
        var text = ""
        withUnsafeBytes { bytes in
            Self.decode(bytes, scalar: { scalar in
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    text += Self.escaped(UInt8(scalar.value))
                } else {
                    text.unicodeScalars.append(scalar)
                }
            }, invalid: { text += Self.escaped($0) })
        }
        return text
    }

    public var debugDescription: String { "\"\(description)\"" }

    private static func escaped(_ byte: UInt8) -> String {
        let hex = Array("0123456789ABCDEF".unicodeScalars)
        return "\\x" + String(hex[Int(byte >> 4)]) + String(hex[Int(byte & 0xF)])
    }
}
