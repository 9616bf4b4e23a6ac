import Glibc
import Synchronization

/// The kernel's table of mounts, as `/proc/self/mountinfo` shows it.
public struct MountTable: Sendable {
    public struct Entry: Equatable, Sendable {
        public let mountpoint: String
        public let filesystemType: String
        /// The device's major and minor numbers, as `st_dev` of every file on it encodes them.
        public let major: UInt32
        public let minor: UInt32
        /// The mount's id (field 1), as /proc/PID/fdinfo's `mnt_id` names it.
        public let id: Int32
        /// The filesystem's own options (the last field), e.g. `rw,noauto_da_alloc`.
        public let superOptions: String
        /// The mount's own options (field 6), e.g. `rw,nosuid,nodev,relatime`.
        public let mountOptions: String

        public init(mountpoint: String, filesystemType: String, major: UInt32 = 0, minor: UInt32 = 0, superOptions: String = "",
                    mountOptions: String = "", id: Int32 = -1) {
            self.id = id
            self.mountpoint = mountpoint
            self.filesystemType = filesystemType
            self.major = major
            self.minor = minor
            self.superOptions = superOptions
            self.mountOptions = mountOptions
        }

        /// The flags a remount passes to keep the mount's own options (nosuid, nodev, noexec
        /// and the atime rule), which a remount without them would clear.
        public var keptMountFlags: UInt {
            let flags: [String: UInt] = [
                "nosuid": UInt(MS_NOSUID), "nodev": UInt(MS_NODEV), "noexec": UInt(MS_NOEXEC), "noatime": UInt(MS_NOATIME),
                "nodiratime": UInt(MS_NODIRATIME), "relatime": UInt(MS_RELATIME), "strictatime": UInt(MS_STRICTATIME),
            ]
            return mountOptions.split(separator: ",").reduce(0) { $0 | (flags[String($1)] ?? 0) }
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
                         superOptions: separator + 3 < fields.count ? String(fields[separator + 3]) : "",
                         mountOptions: fields.count > 5 ? String(fields[5]) : "", id: Int32(fields[0]) ?? -1)
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

/// The mount the kernel made of this daemon's session, as /proc names it (mountinfo's id, and
/// the device lock lines name files by): known once mounted, set once.
///
/// Sendable: atomics.
public final class KernelMountIdentity: Sendable {
    /// `major << 32 | minor`, plus one; 0 until known.
    private let packedDevice = Atomic<UInt64>(0)
    private let mountID = Atomic<Int64>(-1)

    public init() {}

    public func set(id: Int32, major: UInt32, minor: UInt32) {
        mountID.store(Int64(id), ordering: .relaxed)
        packedDevice.store((UInt64(major) << 32 | UInt64(minor)) + 1, ordering: .relaxed)
    }

    public var device: (major: UInt32, minor: UInt32)? {
        let packed = packedDevice.load(ordering: .relaxed)
        guard packed != 0 else { return nil }
        return (UInt32(truncatingIfNeeded: (packed - 1) >> 32), UInt32(truncatingIfNeeded: packed - 1))
    }

    public var id: Int32? {
        let value = mountID.load(ordering: .relaxed)
        return value >= 0 ? Int32(value) : nil
    }
}
