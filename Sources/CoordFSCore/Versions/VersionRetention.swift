/// How long versions are kept, and how much room they may take (`coordfs mount --versions-…`).
///
/// Staggered, as Syncthing's staggered versioning and Nextcloud's versions app thin them: of
/// the versions of the last hour, one per 30 seconds; of the last day, one per hour; of the
/// last 30 days, one per day; older, one per week, up to `maximumAge`. In each such step the
/// oldest version stays (so a version kept stands for its whole step). Never expired: pinned
/// versions, conflict versions not resolved yet, and the newest version of a file that still
/// exists (what its last save replaced). Never thinned, only aged out: the newest version of
/// a deleted file (what it held when it was deleted).
public struct VersionRetention: Sendable, Equatable {
    public enum Thinning: String, Sendable, Equatable, CaseIterable {
        /// One version per step, steps widening with age (see the type).
        case staggered
        /// Every version, up to the maximum age.
        case all
    }

    public var thinning: Thinning
    /// Versions older than this go; nil: none goes for its age.
    public var maximumAge: Duration?
    /// The most of the backing's room (its free space plus the store) the store may take:
    /// past it, the oldest versions that may expire go first.
    public var spaceShare: Double
    /// Below this much free space in the backing, no new version is kept (the saves go on).
    public var minimumFreeBytes: Int64
    /// Files whose versions are not kept.
    public var exclusions: PathPatternSet
    /// Where the backing cannot clone, files up to this many bytes are copied to keep what an
    /// in-place change or an append is about to replace; 0: such changes keep no version.
    public var copiesUpTo: Int64

    public static let defaultMaximumAge = Duration.seconds(365 * 86_400)
    public static let defaultSpaceShare = 0.5
    public static let defaultMinimumFreeBytes: Int64 = 1 << 30

    public init(thinning: Thinning = .staggered, maximumAge: Duration? = VersionRetention.defaultMaximumAge,
                spaceShare: Double = VersionRetention.defaultSpaceShare, minimumFreeBytes: Int64 = VersionRetention.defaultMinimumFreeBytes,
                exclusions: [String] = [], copiesUpTo: Int64 = 0) {
        self.thinning = thinning
        self.maximumAge = maximumAge
        self.spaceShare = spaceShare
        self.minimumFreeBytes = minimumFreeBytes
        self.exclusions = PathPatternSet(exclusions)
        self.copiesUpTo = copiesUpTo
    }

    /// The steps of staggered thinning: up to each age, one version per step.
    static let steps: [(upTo: Int64, step: Int64)] = [
        (3_600 * second, 30 * second),
        (86_400 * second, 3_600 * second),
        (30 * 86_400 * second, 86_400 * second),
        (Int64.max, 7 * 86_400 * second),
    ]
    static let second: Int64 = 1_000_000_000

    /// Whether a version may expire at all.
    public static func isProtected(_ version: VersionRecord) -> Bool {
        version.pinned || (version.kind == .conflict && !version.resolved)
    }

    /// The versions of one file (oldest first) that have expired at `now` (nanoseconds since
    /// the epoch). `fileExists`: the file is still there, so its newest version stays.
    public func expired(_ versions: [VersionRecord], now: Int64, fileExists: Bool) -> [Int64] {
        var expired: [Int64] = []
        let newest = versions.last?.id
        let maximumAge = self.maximumAge.map { Int64($0.components.seconds) * Self.second }
        var lastKept: Int64?
        for version in versions {
            let age = now - version.kept
            if (fileExists && version.id == newest) || Self.isProtected(version) {
                lastKept = version.kept // kept, so it stands for its step
                continue
            }
            if let maximumAge, age > maximumAge {
                expired.append(version.id)
                continue
            }
            if version.id == newest { continue } // a deleted file's last content
            guard thinning == .staggered else { continue }
            let step = Self.steps.first { age < $0.upTo }?.step ?? Self.steps[Self.steps.count - 1].step
            if let lastKept, version.kept - lastKept < step {
                expired.append(version.id)
                continue
            }
            lastKept = version.kept
        }
        return expired
    }
}
