import SystemPackage

/// A normalised path relative to the mount's root: no empty, `.` or `..` components.
///
/// The claim table keys on these, and ancestry between them is what makes claims
/// hierarchical, so they are compared component by component, never as raw strings. Each
/// component is a `FileName`, bytes as the kernel gave them.
public struct MountPath: Hashable, Sendable, CustomStringConvertible {
    public private(set) var components: [FileName]

    public static let root = MountPath(components: [])

    public init(components: [FileName]) {
        self.components = components
    }

    /// Parses slash-separated bytes; rejects `..` so a path can never name anything outside the
    /// mount, and NUL, which no name holds.
    public init?(bytes: some Collection<UInt8>) {
        var parts: [FileName] = []
        for part in bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true) {
            if part.elementsEqual(CollectionOfOne(UInt8(ascii: "."))) { continue }
            if part.elementsEqual([UInt8(ascii: "."), UInt8(ascii: ".")]) { return nil }
            guard let name = FileName(part) else { return nil }
            parts.append(name)
        }
        self.components = parts
    }

    /// Parses a slash-separated path written as text (its UTF-8).
    public init?(_ text: String) {
        self.init(bytes: text.utf8)
    }

    public var isRoot: Bool { components.isEmpty }

    public var name: FileName? { components.last }

    public var parent: MountPath? {
        isRoot ? nil : MountPath(components: Array(components.dropLast()))
    }

    public func appending(_ name: FileName) -> MountPath {
        // One allocation: every operation that names an entry builds its path this way.
        var longer: [FileName] = []
        longer.reserveCapacity(components.count + 1)
        longer.append(contentsOf: components)
        longer.append(name)
        return MountPath(components: longer)
    }

    /// True when `self` is `other` or lies beneath it.
    public func isWithin(_ other: MountPath) -> Bool {
        other.components.count <= components.count && components.starts(with: other.components)
    }

    /// Every path from the root down to and including this one.
    public var lineage: [MountPath] {
        (0...components.count).map { MountPath(components: Array(components.prefix($0))) }
    }

    /// The path as the bytes "/a/b" ("/" for the root): exact, for the wire and for comparisons.
    public var bytes: [UInt8] {
        guard !isRoot else { return [UInt8(ascii: "/")] }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(components.reduce(0) { $0 + $1.count + 1 })
        for component in components {
            bytes.append(UInt8(ascii: "/"))
            component.withUnsafeBytes { bytes.append(contentsOf: $0) }
        }
        return bytes
    }

    /// Runs `body` with the path relative to the root as a C string ("a/b", "." for the root):
    /// for the `*at` calls that take it from the backing root's descriptor.
    public func withRelativeCString<R, E: Error>(_ body: (UnsafePointer<CChar>) throws(E) -> R) throws(E) -> R {
        var cString = isRoot ? [CChar(bitPattern: UInt8(ascii: "."))] : bytes.dropFirst().map { CChar(bitPattern: $0) }
        cString.append(0)
        return try cString.withUnsafeBufferPointer { (buffer) throws(E) -> R in try body(buffer.baseAddress!) }
    }

    /// The path as a `FilePath` ("/a/b"), bytes exact: what the control socket's messages carry.
    public var filePath: FilePath {
        let cString = bytes.map { CChar(bitPattern: $0) } + [0]
        return cString.withUnsafeBufferPointer { FilePath(platformString: $0.baseAddress!) }
    }

    /// "/a/b", for people and logs only (see `FileName.description`); `bytes` is exact.
    public var description: String { "/" + components.map(\.description).joined(separator: "/") }
}

extension MountPath: Comparable {
    /// The order of `bytes`: what lists of paths are sorted by.
    public static func < (lhs: MountPath, rhs: MountPath) -> Bool {
        lhs.bytes.lexicographicallyPrecedes(rhs.bytes)
    }
}

/// Checks on the two directories a mount joins, on their canonical (symlink-free) paths.
public enum MountLayout {
    public enum Problem: Equatable, Sendable, CustomStringConvertible {
        case same(String)
        case mountpointInsideBacking(mountpoint: String, backing: String)
        case backingInsideMountpoint(backing: String, mountpoint: String)

        public var description: String {
            switch self {
            case .same(let path):
                return "the backing directory and the mountpoint are the same directory (\(path))"
            case .mountpointInsideBacking(let mountpoint, let backing):
                return "the mountpoint \(mountpoint) lies inside the backing directory \(backing); the mount would contain itself"
            case .backingInsideMountpoint(let backing, let mountpoint):
                return "the backing directory \(backing) lies inside the mountpoint \(mountpoint); it would be hidden by the mount"
            }
        }
    }

    /// Returns why `backing` and `mountpoint` cannot be mounted together, or nil when they can.
    public static func problem(backing: String, mountpoint: String) -> Problem? {
        guard let backingPath = MountPath(backing), let mountPath = MountPath(mountpoint) else { return nil }
        if backingPath == mountPath { return .same(backing) }
        if mountPath.isWithin(backingPath) { return .mountpointInsideBacking(mountpoint: mountpoint, backing: backing) }
        if backingPath.isWithin(mountPath) { return .backingInsideMountpoint(backing: backing, mountpoint: mountpoint) }
        return nil
    }
}
