/// How strongly a claim holds its path (and, on a directory, everything beneath it).
///
/// Ordered from weakest to strongest.
public enum ClaimMode: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    /// An ordinary open for reading: sees the last committed version, so it only waits for exclusive claims.
    case snapshotRead
    /// "Nobody changes this while I hold it": waits for writers, and writers wait for it.
    case read
    /// "I am the one writer": readers of snapshots may still come and go.
    case write
    /// "Nobody else sees or changes this while I hold it."
    case exclusive

    /// True when a claim in this mode and one in `other` may be held at once by different owners
    /// (the matrix in Docs/LOCKING.md, "Modes"; it is symmetric, so the order of the two never matters).
    @inlinable
    public func isCompatible(with other: ClaimMode) -> Bool {
        switch (self, other) {
        case (.exclusive, _), (_, .exclusive): return false
        case (.snapshotRead, _), (_, .snapshotRead): return true
        case (.read, .read): return true
        default: return false
        }
    }

    public var description: String {
        switch self {
        case .snapshotRead: return "snapshot-read"
        case .read: return "read"
        case .write: return "write"
        case .exclusive: return "exclusive"
        }
    }
}
