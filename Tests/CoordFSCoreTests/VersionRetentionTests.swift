import Testing
@testable import CoordFSCore

/// Staggered thinning, the maximum age and what never expires, on versions made up with times.
@Suite struct VersionRetentionTests {
    static let second: Int64 = 1_000_000_000
    static let now: Int64 = 2_000_000_000 * second

    /// A version kept `age` seconds before `now`.
    static func version(_ id: Int64, age: Int64, kind: VersionKind = .save, pinned: Bool = false, resolved: Bool = false) -> VersionRecord {
        VersionRecord(id: id, file: 1, path: MountPath("/f")!, size: 1, modified: 0, kept: now - age * second, kind: kind,
                      origin: VersionOrigin(pid: 1, uid: 0, process: nil), mode: 0o100644, resolved: resolved, pinned: pinned)
    }

    /// Versions every `interval` seconds for `span` seconds back, oldest first.
    static func every(_ interval: Int64, for span: Int64) -> [VersionRecord] {
        stride(from: span, through: 1, by: -Int(interval)).enumerated().map { version(Int64($0.offset + 1), age: Int64($0.element)) }
    }

    @Test func theLastHourKeepsOnePerThirtySeconds() {
        let versions = Self.every(10, for: 3_590)
        let expired = Set(VersionRetention().expired(versions, now: Self.now, fileExists: true))
        let kept = versions.filter { !expired.contains($0.id) }
        // 359 versions over 3,590 s: one per 30 s, and the newest (what the last save replaced).
        #expect((120...121).contains(kept.count), "\(kept.count)")
        for (older, newer) in zip(kept, kept.dropFirst()) where newer.id != versions.last?.id {
            #expect(newer.kept - older.kept >= 30 * Self.second)
        }
    }

    @Test func aDayOfSavesEveryTenSecondsLeavesAboutOnePerStep() {
        let versions = Self.every(10, for: 86_390)
        let expired = Set(VersionRetention().expired(versions, now: Self.now, fileExists: true))
        let kept = versions.count - expired.count
        // 120 in the last hour, one per hour for the 23 before, and the newest.
        #expect((140...146).contains(kept), "\(kept) of \(versions.count) kept")
    }

    @Test func pinnedUnresolvedAndTheNewestNeverExpire() {
        let versions = [
            Self.version(1, age: 400 * 86_400, pinned: true),
            Self.version(2, age: 400 * 86_400, kind: .conflict),
            Self.version(3, age: 400 * 86_400, kind: .conflict, resolved: true),
            Self.version(4, age: 400 * 86_400),
        ]
        #expect(VersionRetention().expired(versions, now: Self.now, fileExists: true) == [3])
        #expect(VersionRetention().expired(versions, now: Self.now, fileExists: false) == [3, 4])
        // Without a maximum age, keeping all: nothing goes.
        #expect(VersionRetention(thinning: .all, maximumAge: nil).expired(versions, now: Self.now, fileExists: false).isEmpty)
    }

    /// A file saved and deleted within seconds: the delete's version (what it held last) stays
    /// beside the oldest of the step; only the versions between them go. It goes by age alone.
    @Test func aDeletedFilesLastContentIsNeverThinned() {
        let versions = [Self.version(1, age: 20), Self.version(2, age: 15), Self.version(3, age: 10, kind: .delete)]
        #expect(VersionRetention().expired(versions, now: Self.now, fileExists: false) == [2])
        let old = [Self.version(1, age: 400 * 86_400), Self.version(2, age: 399 * 86_400, kind: .delete)]
        #expect(VersionRetention().expired(old, now: Self.now, fileExists: false) == [1, 2])
    }

    @Test func keepAllThinsNothingButByAge() {
        let versions = Self.every(1, for: 600)
        #expect(VersionRetention(thinning: .all).expired(versions, now: Self.now, fileExists: true).isEmpty)
        let old = [Self.version(1, age: 10 * 86_400), Self.version(2, age: 5)]
        #expect(VersionRetention(thinning: .all, maximumAge: .seconds(86_400)).expired(old, now: Self.now, fileExists: true) == [1])
    }

    @Test func exclusionsMatchNamesAndPaths() {
        let retention = VersionRetention(exclusions: ["*.tmp", "/cache/**"])
        #expect(retention.exclusions.matches(MountPath("/a/b.tmp")!))
        #expect(retention.exclusions.matches(MountPath("/cache/x/y")!))
        #expect(!retention.exclusions.matches(MountPath("/notes.txt")!))
    }
}
