import CoordFSCore

/// A grant this host holds: `path` and everything beneath it, in `mode`.
///
/// It covers a local request on that subtree in `mode` or a weaker one (snapshot-read < read <
/// write < exclusive): each mode excludes, on other hosts, everything the weaker ones exclude.
struct HeldGrant: Hashable, Sendable, CustomStringConvertible {
    var path: MountPath
    var mode: ClaimMode

    init(_ path: MountPath, _ mode: ClaimMode) {
        self.path = path
        self.mode = mode
    }

    init(_ request: ClaimRequest) {
        self.init(request.path, request.mode)
    }

    func covers(_ request: ClaimRequest) -> Bool {
        request.path.isWithin(path) && request.mode.rawValue <= mode.rawValue
    }

    var description: String { "\(mode) \(path)" }
}

/// Another host's request queued in the database: what this host must give back.
struct QueuedRequest: Hashable, Sendable {
    var ticket: Int64
    var host: Int64
    var path: MountPath
    var mode: ClaimMode
}

/// Two uses on paths that overlap (one is the other or lies beneath it) in modes that cannot
/// be held at once by different owners.
func conflict(_ path: MountPath, _ mode: ClaimMode, _ otherPath: MountPath, _ otherMode: ClaimMode) -> Bool {
    !mode.isCompatible(with: otherMode) && (path.isWithin(otherPath) || otherPath.isWithin(path))
}

/// What this host holds and owes, as the session thread last learned it: its grants, other
/// hosts' queued requests, and the operations covered by those grants (uses). Plain state; the
/// session's lock guards it.
struct HostGrants {
    var grants: Set<HeldGrant> = []
    /// Other hosts' requests queued in the database (refreshed by every grant round trip and
    /// by a recall). While one conflicts with a local request, that request is not covered
    /// locally: it queues behind it through the database, so a busy host cannot starve another.
    var queued: [QueuedRequest] = []
    /// Covered operations not yet released, by use id.
    var uses: [UInt64: [ClaimRequest]] = [:]

    /// Whether every request is covered by a grant and waits for no other host's request.
    func covers(_ requests: [ClaimRequest]) -> Bool {
        requests.allSatisfy { request in
            grants.contains { $0.covers(request) }
                && !queued.contains { conflict(request.path, request.mode, $0.path, $0.mode) }
        }
    }

    /// The recall: for each grant another host's queued request conflicts with, the grants
    /// that may replace it, namely the requests of this host's uses beneath it (none when
    /// unused: the grant goes back whole). A grant a use stands on exactly stays until that use
    /// is released. Applies the change locally (before the database, so local coverage never
    /// exceeds what the database holds) and returns it for the database.
    mutating func recall() -> (dropped: [HeldGrant], added: [HeldGrant])? {
        guard !queued.isEmpty else { return nil }
        let inUse = uses.values.joined()
        var dropped: [HeldGrant] = []
        var added: Set<HeldGrant> = []
        for grant in grants where queued.contains(where: { conflict(grant.path, grant.mode, $0.path, $0.mode) }) {
            let needed = Set(inUse.filter { grant.covers($0) }.map(HeldGrant.init))
            if needed.contains(grant) { continue }
            dropped.append(grant)
            added.formUnion(needed)
        }
        guard !dropped.isEmpty else { return nil }
        grants.subtract(dropped)
        let new = added.subtracting(grants)
        grants.formUnion(new)
        return (dropped, Array(new))
    }
}
