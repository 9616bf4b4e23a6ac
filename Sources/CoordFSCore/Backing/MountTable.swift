import Glibc

/// The kernel's table of mounts, as `/proc/self/mountinfo` shows it.
public struct MountTable: Sendable {
    public struct Entry: Equatable, Sendable {
        public let mountpoint: String
        public let filesystemType: String
    }

    public let entries: [Entry]

    /// Parses mountinfo text: field 5 is the mountpoint (octal-escaped), the type follows " - ".
    public init(parsing text: String) {
        entries = text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ", omittingEmptySubsequences: false)
            guard fields.count >= 5, let separator = fields.firstIndex(of: "-"), separator + 1 < fields.count else { return nil }
            return Entry(mountpoint: Self.unescape(fields[4]), filesystemType: String(fields[separator + 1]))
        }
    }

    /// Reads the current table; an unreadable table reads as empty.
    public static func current() -> MountTable {
        guard let file = fopen("/proc/self/mountinfo", "r") else { return MountTable(parsing: "") }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = fread(&chunk, 1, chunk.count, file)
            if count <= 0 { break }
            bytes.append(contentsOf: chunk[0..<count])
        }
        return MountTable(parsing: String(decoding: bytes, as: UTF8.self))
    }

    /// The last mount on `path` (later mounts hide earlier ones), if any.
    public func mount(at path: String) -> Entry? {
        entries.last { $0.mountpoint == path }
    }

    /// Undoes mountinfo's `\ooo` escapes (space, tab, newline, backslash).
    static func unescape(_ field: Substring) -> String {
        var bytes: [UInt8] = []
        var iterator = Array(field.utf8)[...]
        while let byte = iterator.popFirst() {
            if byte == UInt8(ascii: "\\"), iterator.count >= 3,
               let value = UInt8(String(decoding: iterator.prefix(3), as: UTF8.self), radix: 8) {
                bytes.append(value)
                iterator = iterator.dropFirst(3)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
