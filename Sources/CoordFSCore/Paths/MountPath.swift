/// A normalised path relative to the mount's root: no empty, `.` or `..` components.
///
/// The claim table keys on these, and ancestry between them is what makes claims
/// hierarchical, so they are compared component by component, never as raw strings.
public struct MountPath: Hashable, Sendable, CustomStringConvertible {
    public private(set) var components: [String]

    public static let root = MountPath(components: [])

    public init(components: [String]) {
        self.components = components
    }

    /// Parses a slash-separated path; rejects `..` so a path can never name anything outside the mount.
    public init?(_ text: String) {
        var parts: [String] = []
        for part in text.split(separator: "/", omittingEmptySubsequences: true) {
            if part == "." { continue }
            if part == ".." { return nil }
            parts.append(String(part))
        }
        self.components = parts
    }

    public var isRoot: Bool { components.isEmpty }

    public var name: String? { components.last }

    public var parent: MountPath? {
        isRoot ? nil : MountPath(components: Array(components.dropLast()))
    }

    public func appending(_ name: String) -> MountPath {
        MountPath(components: components + [name])
    }

    /// True when `self` is `other` or lies beneath it.
    public func isWithin(_ other: MountPath) -> Bool {
        other.components.count <= components.count && components.starts(with: other.components)
    }

    /// Every path from the root down to and including this one.
    public var lineage: [MountPath] {
        (0...components.count).map { MountPath(components: Array(components.prefix($0))) }
    }

    public var description: String { "/" + components.joined(separator: "/") }
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
