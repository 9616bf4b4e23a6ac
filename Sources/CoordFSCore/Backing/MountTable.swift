import Glibc

/// The kernel's table of mounts, as `/proc/self/mountinfo` shows it.
public struct MountTable: Sendable {
    public struct Entry: Equatable, Sendable {
        public let mountpoint: String
        public let filesystemType: String
        /// The device's major and minor numbers, as `st_dev` of every file on it encodes them.
        public let major: UInt32
        public let minor: UInt32
        /// The filesystem's own options (the last field), e.g. `rw,noauto_da_alloc`.
        public let superOptions: String

        public init(mountpoint: String, filesystemType: String, major: UInt32 = 0, minor: UInt32 = 0, superOptions: String = "") {
            self.mountpoint = mountpoint
            self.filesystemType = filesystemType
            self.major = major
            self.minor = minor
            self.superOptions = superOptions
        }

        /// Whether the filesystem's options include `option` (a whole comma-separated word).
        public func hasOption(_ option: String) -> Bool {
            superOptions.split(separator: ",").contains { $0 == option }
        }
    }

    public let entries: [Entry]

    /// Parses mountinfo text: field 3 is major:minor, field 5 the mountpoint (octal-escaped);
    /// after " - " come the type, the source and the filesystem's options.
    public init(parsing text: String) {
        entries = text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ", omittingEmptySubsequences: false)
            guard fields.count >= 5, let separator = fields.firstIndex(of: "-"), separator + 1 < fields.count else { return nil }
            let device = fields[2].split(separator: ":")
            return Entry(mountpoint: Self.unescape(fields[4]), filesystemType: String(fields[separator + 1]),
                         major: device.count == 2 ? UInt32(device[0]) ?? 0 : 0, minor: device.count == 2 ? UInt32(device[1]) ?? 0 : 0,
                         superOptions: separator + 3 < fields.count ? String(fields[separator + 3]) : "")
        }
    }

    /// The mount of the filesystem a file with this `st_dev` lives on (the last one listed:
    /// bind mounts of one filesystem share its device and options).
    public func mount(ofDevice device: UInt64) -> Entry? {
        // Linux's dev_t layout (glibc's gnu_dev_major/minor).
        let major = UInt32(truncatingIfNeeded: ((device >> 8) & 0xfff) | ((device >> 32) & ~UInt64(0xfff)))
        let minor = UInt32(truncatingIfNeeded: (device & 0xff) | ((device >> 12) & ~UInt64(0xff)))
        return entries.last { $0.major == major && $0.minor == minor }
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

    /// Whether an ext4 filesystem keeps a journal: false only when sysfs says it has none
    /// (`/sys/fs/ext4/<device>/journal_task` reads `<none>`); true when it cannot tell.
    /// Without a journal ext4 orders nothing across a power loss, `data=ordered` included.
    public static func ext4HasJournal(_ entry: Entry) -> Bool {
        guard let link = try? Syscall.readLink(at: AT_FDCWD, "/sys/dev/block/\(entry.major):\(entry.minor)") else { return true }
        let device = String(decoding: link.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self).split(separator: "/").last ?? ""
        guard let file = fopen("/sys/fs/ext4/\(device)/journal_task", "r") else { return true }
        defer { fclose(file) }
        var text = [CChar](repeating: 0, count: 64)
        guard fgets(&text, Int32(text.count), file) != nil else { return true }
        let line = text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        return !line.starts(with: "<none>".utf8)
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
