import CoordFSCore
import Foundation
import Glibc
import Testing

/// What a user can observe of a tree, entry by entry, for comparing a mount with a plain
/// directory: type, permission bits, owner, size, link count, content, symlink target, user
/// xattrs, and (when asked) modification times to the nanosecond. Names, targets and
/// attributes are bytes: each is recorded exactly (see `escaped`), UTF-8 or not.
struct TreeSnapshot: Equatable, CustomStringConvertible {
    struct Entry: Equatable, CustomStringConvertible {
        /// The relative path, `escaped`.
        var path: String
        var summary: String
        var description: String { "\(path): \(summary)" }
    }

    var entries: [Entry]

    struct Options {
        /// Compare modification times set on purpose (cp -a, touch -d, tar x), to the nanosecond.
        var times = false
        /// Paths (relative, as "a/b") whose contents are not compared (e.g. git's index, which records inode numbers).
        var ignoringContents: Set<String> = []
        /// Compare uid/gid.
        var owners = true
    }

    init(entries: [Entry]) {
        self.entries = entries
    }

    init(of root: String, _ options: Options = Options()) throws {
        entries = []
        try walk(Array(root.utf8), relative: [], options)
        entries.sort { $0.path < $1.path }
    }

    /// Bytes as text that tells every byte string apart: printable ASCII as it is (a backslash
    /// doubled), every other byte as `\xHH`.
    static func escaped(_ bytes: some Sequence<UInt8>) -> String {
        var text = ""
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "\\"): text += "\\\\"
            case 0x20..<0x7F: text.unicodeScalars.append(Unicode.Scalar(byte))
            default: text += "\\x" + String(byte >> 4, radix: 16, uppercase: true) + String(byte & 0xF, radix: 16, uppercase: true)
            }
        }
        return text
    }

    /// Runs `body` with `path` as a C string.
    private static func withPath<R>(_ path: [UInt8], _ body: (UnsafePointer<CChar>) throws -> R) rethrows -> R {
        try (path.map { CChar(bitPattern: $0) } + [0]).withUnsafeBufferPointer { try body($0.baseAddress!) }
    }

    private mutating func walk(_ absolute: [UInt8], relative: [UInt8], _ options: Options) throws {
        var status = stat()
        guard Self.withPath(absolute, { lstat($0, &status) }) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        let relativeText = Self.escaped(relative)
        var parts: [String] = []
        let type = status.st_mode & S_IFMT
        let typeName: String = switch type {
        case S_IFREG: "file"
        case S_IFDIR: "dir"
        case S_IFLNK: "symlink"
        case S_IFIFO: "fifo"
        case S_IFSOCK: "socket"
        case S_IFCHR: "char"
        case S_IFBLK: "block"
        default: "unknown"
        }
        parts.append(typeName)
        if type != S_IFLNK { parts.append(String(status.st_mode & 0o7777, radix: 8)) }
        if options.owners { parts.append("\(status.st_uid):\(status.st_gid)") }
        parts.append("links=\(status.st_nlink)")
        if type == S_IFREG || type == S_IFLNK { parts.append("size=\(status.st_size)") }
        if options.times && type != S_IFLNK && !relative.isEmpty {
            // Times set to "now" differ between two runs by nature; only times the work set
            // on purpose (an hour or more in the past) are compared exactly.
            let setOnPurpose = Int(status.st_mtim.tv_sec) < Int(time(nil)) - 3600
            parts.append(setOnPurpose ? "mtime=\(status.st_mtim.tv_sec).\(status.st_mtim.tv_nsec)" : "mtime=now")
        }
        if type == S_IFREG && !options.ignoringContents.contains(relativeText) {
            parts.append("content=\(try contentDigest(absolute))")
        }
        if type == S_IFLNK {
            var target = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
            let count = Self.withPath(absolute) { path in target.withUnsafeMutableBytes { readlink(path, $0.baseAddress!, $0.count) } }
            parts.append("target=\(count < 0 ? "?" : Self.escaped(target[0..<count]))")
        }
        if type == S_IFREG || type == S_IFDIR {
            let attributes = extendedAttributes(absolute)
            if !attributes.isEmpty { parts.append("xattrs=\(attributes)") }
        }
        if !relative.isEmpty { entries.append(Entry(path: relativeText, summary: parts.joined(separator: " "))) }
        if type == S_IFDIR {
            for name in try Self.names(in: absolute).sorted(by: { $0.lexicographicallyPrecedes($1) }) {
                try walk(absolute + [UInt8(ascii: "/")] + name, relative: relative.isEmpty ? name : relative + [UInt8(ascii: "/")] + name, options)
            }
        }
    }

    /// The names in a directory, as readdir gives them (bytes), without . and ..
    static func names(in directory: [UInt8]) throws -> [[UInt8]] {
        guard let stream = withPath(directory, { opendir($0) }) else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { closedir(stream) }
        var names: [[UInt8]] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: &entry.pointee.d_name) { Array($0.prefix { $0 != 0 }) }
            if name != [UInt8(ascii: ".")] && name != [UInt8(ascii: "."), UInt8(ascii: ".")] { names.append(name) }
        }
        return names
    }

    /// 64-bit FNV-1a of the content and its length: enough to tell versions apart in a test.
    private func contentDigest(_ path: [UInt8]) throws -> String {
        let descriptor = Self.withPath(path) { open($0, O_RDONLY | O_CLOEXEC) }
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(descriptor) }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress!, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            if count == 0 { break }
            for byte in buffer[0..<count] { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        }
        return String(hash, radix: 16)
    }

    /// The user.* attributes, names and values as bytes.
    private func extendedAttributes(_ path: [UInt8]) -> String {
        var names = [CChar](repeating: 0, count: 65_536)
        let length = (try? names.withUnsafeMutableBytes { buffer in
            try Self.withPath(path) { try Syscall.listExtendedAttributes($0, into: buffer, followLinks: false) }
        }) ?? 0
        guard length > 0 else { return "" }
        let list = names[0..<length].split(separator: 0).map { $0.map { UInt8(bitPattern: $0) } }
        return list.filter { $0.starts(with: "user.".utf8) }.sorted { $0.lexicographicallyPrecedes($1) }.map { name -> String in
            var value = [UInt8](repeating: 0, count: 65_536)
            let count = (try? value.withUnsafeMutableBytes { buffer in
                try Self.withPath(path) { p in try Self.withPath(name) { try Syscall.getExtendedAttribute(p, $0, into: buffer, followLinks: false) } }
            }) ?? -1
            return "\(Self.escaped(name))=\(count < 0 ? "?" : Self.escaped(value[0..<count]))"
        }.joined(separator: ",")
    }

    var description: String { entries.map(\.description).joined(separator: "\n") }

    /// The entries that differ, for a readable failure message.
    func difference(from other: TreeSnapshot) -> String {
        let mine = Dictionary(entries.map { ($0.path, $0.summary) }, uniquingKeysWith: { a, _ in a })
        let theirs = Dictionary(other.entries.map { ($0.path, $0.summary) }, uniquingKeysWith: { a, _ in a })
        var lines: [String] = []
        for path in Set(mine.keys).union(theirs.keys).sorted() where mine[path] != theirs[path] {
            lines.append("\(path):\n  mount: \(mine[path] ?? "(missing)")\n  plain: \(theirs[path] ?? "(missing)")")
        }
        return lines.joined(separator: "\n")
    }
}

/// Runs `script` once in the mount and once in the plain directory, then expects the same
/// status, output and errors (with the directory's own path masked) and the same tree, and
/// the backing to hold exactly what the mount shows (`expectBackingMatchesMount`).
/// Returns both runs, for checks on what the script saw beyond parity.
@discardableResult
func expectParity(_ script: String, in scratch: Scratch, snapshot options: TreeSnapshot.Options = .init(),
                  user: (uid: UInt32, gid: UInt32)? = nil, compareTree: Bool = true,
                  sourceLocation: SourceLocation = #_sourceLocation) throws -> (mount: CommandResult, plain: CommandResult) {
    let throughMount = try shell(script, in: scratch.mountpoint, user: user)
    let onPlain = try shell(script, in: scratch.plain, user: user)
    func masked(_ text: String, _ directory: String) -> String { text.replacingOccurrences(of: directory, with: "$DIR") }
    #expect(throughMount.status == onPlain.status, "status: mount \(throughMount) plain \(onPlain)", sourceLocation: sourceLocation)
    #expect(masked(throughMount.output, scratch.mountpoint) == masked(onPlain.output, scratch.plain),
            "stdout differs:\nmount:\n\(throughMount.output)\nplain:\n\(onPlain.output)", sourceLocation: sourceLocation)
    #expect(masked(throughMount.errors, scratch.mountpoint) == masked(onPlain.errors, scratch.plain),
            "stderr differs:\nmount:\n\(throughMount.errors)\nplain:\n\(onPlain.errors)", sourceLocation: sourceLocation)
    try expectBackingMatchesMount(scratch, sourceLocation: sourceLocation)
    guard compareTree else { return (throughMount, onPlain) }
    let mounted = try TreeSnapshot(of: scratch.mountpoint, options)
    let plain = try TreeSnapshot(of: scratch.plain, options)
    #expect(mounted == plain, "trees differ:\n\(mounted.difference(from: plain))", sourceLocation: sourceLocation)
    #expect(!mounted.entries.isEmpty || plain.entries.isEmpty, sourceLocation: sourceLocation)
    return (throughMount, onPlain)
}

/// Every name under `root`, at every depth, as the raw bytes readdir gives ("dir/name" paths,
/// sorted): nothing decoded, nothing hidden, symlinks listed and not followed.
func rawNames(under root: String) throws -> [[UInt8]] {
    var names: [[UInt8]] = []
    func walk(_ directory: Int32, _ prefix: [UInt8]) throws {
        var subdirectories: [[UInt8]] = []
        let stream = try Syscall.openDirectoryStream(directory)
        defer { Syscall.closeDirectoryStream(stream) }
        while let entry = try Syscall.readDirectory(stream) {
            let (name, isDirectory): ([UInt8], Bool) = withUnsafePointer(to: &entry.pointee.d_name) { tuple in
                tuple.withMemoryRebound(to: CChar.self, capacity: Int(NAME_MAX) + 1) { name in
                    let bytes = Array(UnsafeRawBufferPointer(start: name, count: strlen(name)))
                    let type = Int(entry.pointee.d_type)
                    let isDirectory = type == DT_DIR
                        || (type == DT_UNKNOWN && ((try? Syscall.stat(at: directory, name)).map { $0.st_mode & S_IFMT == S_IFDIR } ?? false))
                    return (bytes, isDirectory)
                }
            }
            if name == [0x2E] || name == [0x2E, 0x2E] { continue }
            names.append(prefix + name)
            if isDirectory { subdirectories.append(name) }
        }
        for name in subdirectories {
            try (name + [0]).withUnsafeBufferPointer { buffer in
                try buffer.withMemoryRebound(to: CChar.self) { cName in
                    let child = try Syscall.openAt(directory, cName.baseAddress!, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
                    try walk(child.raw, prefix + name + [0x2F])
                }
            }
        }
    }
    let top = try Syscall.openAt(AT_FDCWD, root, O_RDONLY | O_DIRECTORY)
    try walk(top.raw, [])
    return names.sorted { $0.lexicographicallyPrecedes($1) }
}

/// Expects the backing to hold exactly the names the mount shows, at every depth: once no save
/// is in flight, coordfs leaves nothing of its own there (no temp, named or not), so backups,
/// syncs, diffs and `git status` of the backing see what users see.
/// (A mount with `--versions` keeps its store in the backing's `.coordfs-versions`, which the
/// mount never shows: it is left out.)
func expectBackingMatchesMount(_ scratch: Scratch, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let store = Array(".coordfs-versions".utf8)
    let backing = try rawNames(under: scratch.backing).filter { $0 != store && !$0.starts(with: store + [0x2F]) }
    let mounted = try rawNames(under: scratch.mountpoint)
    func shown(_ names: [[UInt8]]) -> String {
        names.map { String(decoding: $0, as: UTF8.self) }.joined(separator: "\n  ")
    }
    let onlyInBacking = backing.filter { !mounted.contains($0) }
    let onlyInMount = mounted.filter { !backing.contains($0) }
    #expect(backing == mounted, "the backing differs from the mount:\n only in the backing:\n  \(shown(onlyInBacking))\n only in the mount:\n  \(shown(onlyInMount))",
            sourceLocation: sourceLocation)
}

/// Whether the filesystem of `directory` has unnamed files (O_TMPFILE), as ext4, XFS, btrfs and
/// tmpfs have.
func hasUnnamedFiles(_ directory: String) -> Bool {
    do {
        let opened = try Syscall.openAt(AT_FDCWD, directory, O_RDONLY | O_DIRECTORY)
        _ = try Syscall.openUnnamed(in: opened.raw, mode: 0o600)
        return true
    } catch {
        return false
    }
}
