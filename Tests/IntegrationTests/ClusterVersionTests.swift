import CoordFSTestSupport
import Foundation
import Glibc
import Testing

/// Versions across hosts (`--cluster … --versions`): two daemons on one backing and one private
/// PostgreSQL share the store's folder and its index, so what one host keeps, every host
/// lists, reads, restores and resolves, and each host's subscribers hear of it.
@Suite(.serialized) struct ClusterVersionTests {
    static func list(_ file: String, on mount: Scratch, sourceLocation: SourceLocation = #_sourceLocation) throws -> (deleted: Bool, versions: [[String: Any]]) {
        try VersionTests.list(file, in: mount.mountpoint, sourceLocation: sourceLocation)
    }

    static func cat(_ file: String, _ version: Any?, on mount: Scratch) throws -> String {
        try run([coordfsBinary, "versions", "cat", file, "\(version as? Int ?? 0)"], in: mount.mountpoint).output
    }

    /// Saves on A, a rename on A and a save on B, a restore on B, a delete on A: each host
    /// lists the same versions of the file under its name now, byte for byte, with the host
    /// that kept each, and B's
    /// subscriber hears of each version A keeps, with its id and A's host.
    @Test func versionsKeptOnOneHostAreEveryHosts() throws {
        // Every version stays (staggered retention would thin the saves a second apart).
        try ClusterTests.withCluster(2, ["--versions", "--versions-keep", "all"]) { _, mounts in
            let (a, b) = (mounts[0], mounts[1])
            let onB = try ControlSocketTests.connect(to: b)
            #expect(try onB.request(#"{"id":1,"op":"subscribe","path":"/","recursive":true,"kinds":["version-added"]}"#).ok != nil)
            for text in ["one", "two", "three"] {
                try text.write(toFile: a.mountpoint + "/f", atomically: false, encoding: .utf8)
            }
            var onBoth = try [a, b].map { try Self.list("f", on: $0).versions }
            #expect(onBoth[0].map { $0["id"] as? Int } == onBoth[1].map { $0["id"] as? Int } && onBoth[1].count == 2, "\(onBoth)")
            #expect(try onBoth[1].map { try Self.cat("f", $0["id"], on: b) } == ["one", "two"])
            #expect(onBoth[1].allSatisfy { $0["host"] as? String == ClusterEventTests.hostname }, "each version names the host that kept it")
            let heard = ClusterEventTests.drain(onB).compactMap { $0["event"] as? [String: Any] }
            #expect(heard.map { $0["version"] as? Int } == onBoth[0].map { $0["id"] as? Int } && heard.allSatisfy { ($0["origin"] as? [String: Any])?["host"] != nil },
                    "\(heard)")

            // Renamed on A, saved on B under the new name: the versions followed the file.
            #expect(rename(a.mountpoint + "/f", a.mountpoint + "/g") == 0)
            try "four".write(toFile: b.mountpoint + "/g", atomically: false, encoding: .utf8)
            onBoth = try [a, b].map { try Self.list("g", on: $0).versions }
            #expect(try onBoth[0].map { try Self.cat("g", $0["id"], on: a) } == ["one", "two", "three"], "\(onBoth)")
            #expect(onBoth[0].map { $0["id"] as? Int } == onBoth[1].map { $0["id"] as? Int })

            // Restored on B; A sees the restored bytes and lists the restore's version.
            let restored = try run([coordfsBinary, "versions", "restore", "g", "\(onBoth[1][0]["id"] as? Int ?? 0)"], in: b.mountpoint)
            #expect(restored.status == 0, "\(restored)")
            #expect(ClusterTests.text(a.mountpoint + "/g") == "one")
            let afterRestore = try Self.list("g", on: a).versions
            let replacedByRestore = try Self.cat("g", afterRestore.last?["id"], on: a)
            #expect(afterRestore.last?["kind"] as? String == "restore" && replacedByRestore == "four", "\(afterRestore)")

            // Deleted on A: B lists the file as deleted, its last version the deleted bytes.
            #expect(unlink(a.mountpoint + "/g") == 0)
            let deleted = try Self.list("g", on: b)
            #expect(deleted.deleted && deleted.versions.last?["kind"] as? String == "delete", "\(deleted)")
            #expect(try Self.cat("g", deleted.versions.last?["id"], on: b) == "one")
        }
    }
}
