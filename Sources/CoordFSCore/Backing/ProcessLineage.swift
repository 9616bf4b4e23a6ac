/// The processes a requester descends from, itself first, up to init: read from /proc before
/// the claim table is asked, so that the table decides who passes through an explicit claim
/// without reading /proc under its lock (Docs/LOCKING.md, "The daemon's own locks").
///
/// Only a process needs one, and only while explicit claims exist (`ClaimTable.hasExplicitClaims`):
/// `.none` stands for "in no explicit claim's tree".
public struct ProcessLineage: Hashable, Sendable {
    public let pids: [Int32]

    public static let none = ProcessLineage([])

    public init(_ pids: [Int32]) {
        self.pids = pids
    }
}
