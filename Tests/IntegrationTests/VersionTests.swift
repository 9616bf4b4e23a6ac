import CoordFSTestSupport
import Foundation
import Glibc
import Testing

/// The version store (`coordfs mount --versions`, Docs/VERSIONS.md) on real mounts: what saves
/// replace and deletes remove comes back byte for byte through `coordfs versions`, versions
/// follow their file through renames, and the store stays out of sight.
@Suite struct VersionTests {
    static let nobody: (uid: UInt32, gid: UInt32) = (65534, 65534)

    /// `coordfs versions ARGUMENTS` in `directory`.
    static func versions(_ arguments: [String], in directory: String) throws -> CommandResult {
        try run([coordfsBinary, "versions"] + arguments, in: directory)
    }

    /// The versions `coordfs versions list --json` reports of `file`, oldest first.
    static func list(_ file: String, in directory: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> (deleted: Bool, versions: [[String: Any]]) {
        let result = try versions(["list", "--json", file], in: directory)
        try #require(result.status == 0, "\(result)", sourceLocation: sourceLocation)
        let reply = try #require(try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any], sourceLocation: sourceLocation)
        return (reply["deleted"] as? Bool ?? false, reply["versions"] as? [[String: Any]] ?? [])
    }

    static func randomBytes(_ count: Int) -> Data {
        var generator = SystemRandomNumberGenerator()
        return Data((0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    /// Three saves, a delete and a restore: each replaced version comes back byte for byte,
    /// with the permissions it had, and the restore keeps what it replaces in turn.
    @Test func savesAndDeletesKeepVersionsThatRestoreByteForByte() throws {
        let scratch = try Scratch()
        try scratch.mount(["--versions"])
        defer { scratch.unmount() }
        let contents = [Self.randomBytes(300_000), Self.randomBytes(70_000), Self.randomBytes(1)]
        let file = scratch.mountpoint + "/data.bin"
        for content in contents {
            // As a program saves: open with O_TRUNC, write, close.
            try content.write(to: URL(fileURLWithPath: file))
        }
        chmod(file, 0o640)
        var listed = try Self.list("data.bin", in: scratch.mountpoint)
        #expect(listed.versions.map { $0["kind"] as? String } == ["save", "save"], "a new file makes no version; each later save keeps one")
        #expect(listed.versions.map { $0["size"] as? Int } == [300_000, 70_000])
        for (version, content) in zip(listed.versions, contents) {
            let cat = try run([coordfsBinary, "versions", "cat", "data.bin", "\(version["id"] as? Int ?? 0)"], in: scratch.mountpoint)
            #expect(cat.status == 0 && Data(cat.outputBytes) == content, "version \(version["id"] ?? "?") is not what was saved")
        }

        #expect(unlink(file) == 0)
        listed = try Self.list("data.bin", in: scratch.mountpoint)
        #expect(listed.deleted)
        let deleted = try #require(listed.versions.last)
        #expect(deleted["kind"] as? String == "delete" && deleted["size"] as? Int == 1 && deleted["process"] != nil)

        let first = listed.versions[0]["id"] as? Int ?? 0
        let restored = try Self.versions(["restore", "data.bin", "\(first)"], in: scratch.mountpoint)
        #expect(restored.status == 0, "\(restored)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == contents[0])
        var status = stat()
        #expect(stat(file, &status) == 0 && status.st_mode & 0o7777 == 0o644, "a deleted file comes back with the version's permissions (0644 when kept)")

        // A restore over a file that exists keeps what it replaces.
        let second = listed.versions[1]["id"] as? Int ?? 0
        #expect(try Self.versions(["restore", "data.bin", "\(second)"], in: scratch.mountpoint).status == 0)
        #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == contents[1])
        let now = try Self.list("data.bin", in: scratch.mountpoint)
        let kept = try #require(now.versions.last)
        #expect(!now.deleted && kept["size"] as? Int == 300_000, "the restored file's replaced version is kept: \(now.versions)")

        // Nothing of the store shows through the mount, and its name cannot be taken there.
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.mountpoint) == ["data.bin"])
        #expect(mkdir(scratch.mountpoint + "/.coordfs-versions", 0o755) != 0)
        #expect(FileManager.default.fileExists(atPath: scratch.backing + "/.coordfs-versions/index.sqlite"))
    }

    /// Versions follow their file through a move into a directory and a rename of that
    /// directory; an editor's save (write a new file, rename it over the old) keeps the old
    /// one as a version of the same file, which a file moved over it does not inherit.
    @Test func versionsFollowTheirFileThroughRenames() throws {
        let scratch = try Scratch()
        try scratch.mount(["--versions"])
        defer { scratch.unmount() }
        let result = try shell("""
            set -e
            echo one > notes.txt; echo two > notes.txt
            mkdir drafts; mv notes.txt drafts/notes.txt; mv drafts kept
            printf 'three\\n' > .notes.txt.swp; mv .notes.txt.swp kept/notes.txt
            """, in: scratch.mountpoint)
        #expect(result.status == 0, "\(result)")
        let listed = try Self.list("kept/notes.txt", in: scratch.mountpoint)
        #expect(!listed.deleted)
        #expect(listed.versions.map { $0["size"] as? Int } == [4, 4], "\(listed.versions)")
        #expect(listed.versions.map { $0["path"] as? String } == ["/notes.txt", "/kept/notes.txt"])
        let versionIDs = listed.versions.compactMap { $0["id"] as? Int }
        let texts = try versionIDs.map { try Self.versions(["cat", "kept/notes.txt", "\($0)"], in: scratch.mountpoint).output }
        #expect(texts == ["one\n", "two\n"])
        #expect(try String(contentsOfFile: scratch.mountpoint + "/kept/notes.txt", encoding: .utf8) == "three\n")

        // A file with versions of its own moved over another: the other's versions stay with
        // it, as a deleted file's, and the moved file brings its own.
        let replace = try shell("echo a > other; echo b > other; mv other kept/notes.txt", in: scratch.mountpoint)
        #expect(replace.status == 0, "\(replace)")
        let after = try Self.list("kept/notes.txt", in: scratch.mountpoint)
        #expect(after.versions.map { $0["path"] as? String } == ["/other"], "\(after.versions)")
    }

    /// Behind the mount, as far as its watch can tell: a rename carries the versions, and a
    /// file deleted there leaves them to no file that later takes its name.
    @Test func versionsFollowRenamesBehindTheMount() throws {
        let scratch = try Scratch()
        try scratch.mount(["--versions"])
        defer { scratch.unmount() }
        #expect(try shell("echo one > f; echo two > f", in: scratch.mountpoint).status == 0)
        #expect(rename(scratch.backing + "/f", scratch.backing + "/g") == 0)
        let followed = eventually(within: .seconds(10)) {
            (try? Self.versions(["list", "--json", "g"], in: scratch.mountpoint).status) == 0
        }
        #expect(followed, "the versions did not follow the rename behind the mount")
        #expect(try Self.versions(["cat", "g", "1"], in: scratch.mountpoint).output == "one\n")

        #expect(unlink(scratch.backing + "/g") == 0)
        #expect(eventually(within: .seconds(10)) { (try? Self.list("g", in: scratch.mountpoint).deleted) == true })
        // A new file under the name starts without them; its first replaced version is its own.
        #expect(try shell("echo new > g; echo newer > g", in: scratch.mountpoint).status == 0)
        let now = try Self.list("g", in: scratch.mountpoint)
        #expect(!now.deleted && now.versions.map { $0["size"] as? Int } == [4], "\(now.versions)")
    }

    /// A file written in place (a database) keeps the version its handle's first write changes,
    /// by a reflink, where the backing clones (XFS); on ext4, which cannot, it keeps none and
    /// the writes go on as without versions.
    @Test(arguments: [true, false]) func inPlaceWritesKeepAClonedVersionWhereTheBackingClones(onXFS: Bool) throws {
        let scratch = try Scratch()
        let xfs = onXFS ? try XFSImage(mountedAt: scratch.backing, image: scratch.root + "/xfs.img", size: "300M") : nil
        defer { xfs?.tearDown() }
        // The image is smaller than the default free-space floor (1 GiB), below which versions pause.
        try scratch.mount(["--versions", "--versions-min-free", "16"])
        defer { scratch.unmount() }
        let first = Self.randomBytes(1 << 20)
        // Written in place (*.db is in the in-place patterns): created, then changed in the middle.
        try first.write(to: URL(fileURLWithPath: scratch.mountpoint + "/data.db"))
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: scratch.mountpoint + "/data.db"))
        try handle.seek(toOffset: 4096)
        try handle.write(contentsOf: Data(repeating: 0xAB, count: 4096))
        try handle.write(contentsOf: Data(repeating: 0xCD, count: 4096)) // the same handle: no second version
        try handle.close()
        var expected = first
        expected.replaceSubrange(4096..<12288, with: Data(repeating: 0xAB, count: 4096) + Data(repeating: 0xCD, count: 4096))
        #expect(try Data(contentsOf: URL(fileURLWithPath: scratch.mountpoint + "/data.db")) == expected)
        let listed = try Self.versions(["list", "--json", "data.db"], in: scratch.mountpoint)
        if onXFS {
            #expect(listed.status == 0, "\(listed)")
            let versions = try Self.list("data.db", in: scratch.mountpoint).versions
            #expect(versions.count == 1, "one version per handle's first change: \(versions)")
            let id = versions.first?["id"] as? Int ?? 0
            let cat = try run([coordfsBinary, "versions", "cat", "data.db", "\(id)"], in: scratch.mountpoint)
            #expect(Data(cat.outputBytes) == first, "the version is the file before the in-place change")
        } else {
            #expect(listed.status != 0 && listed.errors.contains("has no versions"), "\(listed)")
        }
    }

    /// Where a version of a change that replaces no file comes from: a clone on XFS; on ext4,
    /// which cannot clone, a copy of a file within `--versions-copy-up-to` (none of a bigger
    /// one), or nothing without that option.
    enum ContentsBacking: String, CaseIterable, CustomTestStringConvertible {
        case xfsClones, ext4Copies, ext4Keeps
        var testDescription: String { rawValue }
    }

    /// Appends (`>>` to a plain file: the file grows in place and commits without a rename)
    /// keep the file as it was before each, byte for byte; so does a file written in place,
    /// by clone or copy as the backing allows, and a copy only up to the limit.
    @Test(arguments: ContentsBacking.allCases) func appendsAndInPlaceWritesKeepWhatTheyReplace(backing: ContentsBacking) throws {
        let scratch = try Scratch()
        let xfs = backing == .xfsClones ? try XFSImage(mountedAt: scratch.backing, image: scratch.root + "/xfs.img", size: "300M") : nil
        defer { xfs?.tearDown() }
        // Every version stays (no thinning), and the XFS image is below the default free-space floor.
        try scratch.mount(["--versions", "--versions-keep", "all", "--versions-min-free", "16"]
                          + (backing == .ext4Copies ? ["--versions-copy-up-to", "1"] : []))
        defer { scratch.unmount() }
        let appended = try shell("printf 'one\\n' > log.txt && printf 'two\\n' >> log.txt && printf 'three\\n' >> log.txt && cat log.txt",
                                 in: scratch.mountpoint)
        #expect(appended.status == 0 && appended.output == "one\ntwo\nthree\n", "\(appended)")
        // Within the limit (exactly 1 MiB) and past it, each written in place in its middle.
        let small = Self.randomBytes(1 << 20), large = Self.randomBytes(2 << 20)
        for (name, contents) in [("small.db", small), ("large.db", large)] {
            try contents.write(to: URL(fileURLWithPath: scratch.mountpoint + "/" + name))
            let handle = try FileHandle(forUpdating: URL(fileURLWithPath: scratch.mountpoint + "/" + name))
            try handle.seek(toOffset: 8192)
            try handle.write(contentsOf: Data(repeating: 0xEE, count: 4096))
            try handle.close()
        }
        func kept(_ name: String) throws -> [Data] {
            let listed = try Self.versions(["list", "--json", name], in: scratch.mountpoint)
            guard listed.status == 0 else {
                #expect(listed.errors.contains("has no versions"), "\(listed)")
                return []
            }
            return try Self.list(name, in: scratch.mountpoint).versions.map { version in
                let cat = try run([coordfsBinary, "versions", "cat", name, "\(version["id"] as? Int ?? 0)"], in: scratch.mountpoint)
                #expect(cat.status == 0, "\(cat)")
                return Data(cat.outputBytes)
            }
        }
        let keepsAny = backing != .ext4Keeps
        #expect(try kept("log.txt") == (keepsAny ? [Data("one\n".utf8), Data("one\ntwo\n".utf8)] : []), "the appends' versions")
        #expect(try kept("small.db") == (keepsAny ? [small] : []), "the file within the copy limit")
        #expect(try kept("large.db") == (backing == .xfsClones ? [large] : []), "the file past the copy limit")
        // Nothing of the versions shows through the mount; the files are as written.
        let listing = try FileManager.default.contentsOfDirectory(atPath: scratch.mountpoint).sorted()
        #expect(listing == ["large.db", "log.txt", "small.db"], "\(listing)")
    }

    /// Below the free-space floor versions pause: saves and deletes go on as without versions,
    /// and status says so. (A 16 MiB tmpfs is far below the default floor of 1 GiB.)
    @Test func belowTheFreeSpaceFloorSavesGoOnWithoutVersions() throws {
        let scratch = try Scratch()
        let small = try run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", scratch.backing])
        try #require(small.status == 0, "\(small)")
        defer { _ = try? run(["umount", scratch.backing]) }
        try scratch.mount(["--versions"])
        defer { scratch.unmount() }
        let saved = try shell("echo one > f && echo two > f && cat f && rm f && ! test -e f", in: scratch.mountpoint)
        #expect(saved.status == 0 && saved.output == "two\n", "\(saved)")
        let listed = try Self.versions(["list", "f"], in: scratch.mountpoint)
        #expect(listed.status != 0 && listed.errors.contains("has no versions"), "\(listed)")
        let status = try run([coordfsBinary, "status", scratch.mountpoint])
        #expect(status.output.contains("versions paused"), "\(status)")
    }

    /// What the command says when there is nothing to show: one line and a non-zero exit.
    @Test func unknownVersionsFailWithOneClearLine() throws {
        let scratch = try Scratch()
        try scratch.mount(["--versions"])
        defer { scratch.unmount() }
        try "new\n".write(toFile: scratch.mountpoint + "/fresh", atomically: false, encoding: .utf8)
        let none = try Self.versions(["list", "fresh"], in: scratch.mountpoint)
        #expect(none.status != 0 && none.errors.contains("has no versions"), "\(none)")
        try "newer\n".write(toFile: scratch.mountpoint + "/fresh", atomically: false, encoding: .utf8)
        let missing = try Self.versions(["cat", "fresh", "999"], in: scratch.mountpoint)
        #expect(missing.status != 0 && missing.errors.contains("has no version 999") && missing.output.isEmpty, "\(missing)")
        let restore = try Self.versions(["restore", "fresh", "999"], in: scratch.mountpoint)
        #expect(restore.status != 0 && restore.errors.contains("has no version 999"), "\(restore)")
        #expect(try String(contentsOfFile: scratch.mountpoint + "/fresh", encoding: .utf8) == "newer\n", "a failed restore changes nothing")
        let outside = try Self.versions(["list", "/etc/hostname"], in: scratch.mountpoint)
        #expect(outside.status != 0 && outside.errors.contains("not inside a coordfs mount"), "\(outside)")
        #expect(outside.errors.split(separator: "\n").count == 1, "\(outside)")

        let plain = try Scratch()
        try plain.mount()
        defer { plain.unmount() }
        try "x".write(toFile: plain.mountpoint + "/f", atomically: false, encoding: .utf8)
        let off = try Self.versions(["list", "f"], in: plain.mountpoint)
        #expect(off.status != 0 && off.errors.contains("keeps no versions"), "\(off)")
    }

    /// Another user may list and read the versions of a file it may read, and of no other.
    @Test func anotherUserSeesOnlyVersionsOfFilesItMayRead() throws {
        let scratch = try Scratch()
        try scratch.mount(["--versions", "--allow-other", "--socket-mode", "666"])
        defer { scratch.unmount() }
        for name in ["open", "secret"] {
            try "1".write(toFile: scratch.mountpoint + "/" + name, atomically: false, encoding: .utf8)
            if name == "secret" { chmod(scratch.mountpoint + "/secret", 0o600) } // its version is kept 0600
            try "2".write(toFile: scratch.mountpoint + "/" + name, atomically: false, encoding: .utf8)
        }
        let id = try #require(try Self.list("open", in: scratch.mountpoint).versions.first?["id"] as? Int)
        let binary = shellQuoted(coordfsBinary)
        let readable = try shell("\(binary) versions cat open \(id)", in: scratch.mountpoint, user: Self.nobody)
        #expect(readable.status == 0 && readable.output == "1", "\(readable)")
        let secretID = try #require(try Self.list("secret", in: scratch.mountpoint).versions.first?["id"] as? Int)
        for command in ["list secret", "cat secret \(secretID)"] {
            let refused = try shell("\(binary) versions \(command)", in: scratch.mountpoint, user: Self.nobody)
            #expect(refused.status != 0 && refused.output.isEmpty && refused.errors.contains("may not read"), "\(command): \(refused)")
        }
        // A version keeps the permissions the file had: made readable later, or deleted, its
        // earlier 0600 content stays root's.
        chmod(scratch.mountpoint + "/secret", 0o644)
        let earlier = try shell("\(binary) versions cat secret \(secretID)", in: scratch.mountpoint, user: Self.nobody)
        #expect(earlier.status != 0 && earlier.output.isEmpty && earlier.errors.contains("may not read version"), "\(earlier)")
        chmod(scratch.mountpoint + "/secret", 0o600)
        #expect(unlink(scratch.mountpoint + "/secret") == 0)
        let deleted = try #require(try Self.list("secret", in: scratch.mountpoint).versions.last?["id"] as? Int)
        let gone = try shell("\(binary) versions cat secret \(deleted)", in: scratch.mountpoint, user: Self.nobody)
        #expect(gone.status != 0 && gone.output.isEmpty && gone.errors.contains("may not read version"), "\(gone)")
    }

    /// A save that meets a change made behind the mount keeps the outside version as an
    /// unresolved conflict version (beside the sibling copy); `conflicts` finds it until it is
    /// resolved; a restore is recorded as one; pins and removals change only the versions.
    @Test func conflictsBecomeVersionsToResolve() throws {
        let scratch = try Scratch()
        try scratch.mount(["--versions"])
        defer { scratch.unmount() }
        let script = """
            import sys
            open("docs/f", "w").write("first\\n")
            mine = open("docs/f", "w"); mine.write("mine\\n"); mine.flush()
            with open(sys.argv[1] + "/docs/f", "a") as outside: outside.write("outside\\n")
            mine.close()
            """
        try FileManager.default.createDirectory(atPath: scratch.mountpoint + "/docs", withIntermediateDirectories: false)
        let saved = try run(["python3", "-c", script, scratch.backing], in: scratch.mountpoint)
        #expect(saved.status == 0, "\(saved)")
        let listed = try Self.list("docs/f", in: scratch.mountpoint)
        let conflict = try #require(listed.versions.first)
        #expect(conflict["kind"] as? String == "conflict" && conflict["resolved"] as? Bool == false, "\(listed.versions)")
        let id = conflict["id"] as? Int ?? 0
        #expect(try Self.versions(["cat", "docs/f", "\(id)"], in: scratch.mountpoint).output == "first\noutside\n")
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.mountpoint + "/docs").contains { $0.hasPrefix("f.conflict-") },
                "the sibling copy stays for programs that know nothing of versions")

        let open = try Self.versions(["conflicts", "."], in: scratch.mountpoint)
        #expect(open.status == 0 && open.output == "./docs/f  conflict version \(id)\n", "\(open)")
        #expect(try Self.versions(["resolve", "docs/f"], in: scratch.mountpoint).status == 0)
        #expect(try Self.versions(["conflicts", "."], in: scratch.mountpoint).output.isEmpty)

        #expect(try Self.versions(["pin", "docs/f", "\(id)"], in: scratch.mountpoint).status == 0)
        let pinned = try Self.list("docs/f", in: scratch.mountpoint).versions.first
        #expect(pinned?["pinned"] as? Bool == true && pinned?["resolved"] as? Bool == true)

        // A restore: the version it replaces is marked as a restore's.
        #expect(try Self.versions(["restore", "docs/f", "\(id)"], in: scratch.mountpoint).status == 0)
        #expect(try String(contentsOfFile: scratch.mountpoint + "/docs/f", encoding: .utf8) == "first\noutside\n")
        let kinds = try Self.list("docs/f", in: scratch.mountpoint).versions.compactMap { $0["kind"] as? String }
        #expect(kinds == ["conflict", "restore"], "\(kinds)")

        let removed = try Self.versions(["remove", "docs/f", "--all"], in: scratch.mountpoint)
        #expect(removed.status == 0 && removed.output == "2 versions removed\n", "\(removed)")
        #expect(try Self.list("docs/f", in: scratch.mountpoint).versions.isEmpty)
        #expect(try String(contentsOfFile: scratch.mountpoint + "/docs/f", encoding: .utf8) == "first\noutside\n")
    }

    /// With `--no-conflict-copies`, and for a file that is itself a conflict copy, the outside
    /// version is kept as a conflict version only: no sibling copy (and never a copy of a copy).
    @Test(arguments: [(["--no-conflict-copies"], "f.txt"), ([], "f.conflict-20261128-010203.txt")])
    func conflictVersionsWithoutSiblingCopies(options: [String], name: String) throws {
        let scratch = try Scratch()
        try scratch.mount(["--versions"] + options)
        defer { scratch.unmount() }
        let script = """
            import sys
            name, backing = sys.argv[1:3]
            open(name, "w").write("first\\n")
            mine = open(name, "w"); mine.write("mine\\n"); mine.flush()
            with open(backing + "/" + name, "a") as outside: outside.write("outside\\n")
            mine.close()
            """
        let saved = try run(["python3", "-c", script, name, scratch.backing], in: scratch.mountpoint)
        #expect(saved.status == 0, "\(saved)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.mountpoint) == [name])
        let versions = try Self.list(name, in: scratch.mountpoint).versions
        #expect(versions.map { $0["kind"] as? String } == ["conflict"], "\(versions)")
        #expect(try Self.versions(["cat", name, "\(versions.first?["id"] as? Int ?? 0)"], in: scratch.mountpoint).output == "first\noutside\n")
        #expect(try String(contentsOfFile: scratch.mountpoint + "/" + name, encoding: .utf8) == "mine\n")
    }

    /// Pinning, resolving and removing change what others find: a user who may only read the
    /// file may not; the owner of the file may.
    @Test func changingVersionsNeedsWritePermission() throws {
        let scratch = try Scratch()
        try scratch.mount(["--versions", "--allow-other", "--socket-mode", "666"])
        defer { scratch.unmount() }
        for name in ["roots", "nobodys"] {
            try "1".write(toFile: scratch.mountpoint + "/" + name, atomically: false, encoding: .utf8)
            try "2".write(toFile: scratch.mountpoint + "/" + name, atomically: false, encoding: .utf8)
        }
        chown(scratch.mountpoint + "/nobodys", Self.nobody.uid, Self.nobody.gid)
        let binary = shellQuoted(coordfsBinary)
        let rootsID = try #require(try Self.list("roots", in: scratch.mountpoint).versions.first?["id"] as? Int)
        let nobodysID = try #require(try Self.list("nobodys", in: scratch.mountpoint).versions.first?["id"] as? Int)
        for command in ["pin roots \(rootsID)", "resolve roots \(rootsID)", "remove roots \(rootsID)", "remove roots --all"] {
            let refused = try shell("\(binary) versions \(command)", in: scratch.mountpoint, user: Self.nobody)
            #expect(refused.status != 0 && refused.errors.contains("may not change it"), "\(command): \(refused)")
        }
        #expect(try Self.list("roots", in: scratch.mountpoint).versions.count == 1)
        let allowed = try shell("\(binary) versions pin nobodys \(nobodysID) && \(binary) versions remove nobodys \(nobodysID)",
                                in: scratch.mountpoint, user: Self.nobody)
        #expect(allowed.status == 0, "\(allowed)")
        #expect(try Self.list("nobodys", in: scratch.mountpoint).versions.isEmpty)
    }

    /// Subscribers and presenters hear of versions: a directory's presenter of a version
    /// gained by a file in it, lost, and a conflict resolved; a subscriber gets events of the
    /// same kinds, with the version's id, in order with the changes that made them.
    @Test func subscribersAndPresentersHearOfVersions() throws {
        let scratch = try Scratch()
        try scratch.mount(["--versions"])
        defer { scratch.unmount() }
        try FileManager.default.createDirectory(atPath: scratch.mountpoint + "/docs", withIntermediateDirectories: false)
        let client = try ControlSocketTests.connect(to: scratch)
        #expect(try client.request(#"{"id":1,"op":"subscribe","path":"/docs","recursive":true}"#).ok != nil)
        // A presenter in a process of its own: presenters are not told of their own process tree's changes.
        let presenter = try ControlSocketTests.startPresenter(in: scratch, of: "docs", answering: "save", behaviour: "ok")
        defer { presenter.stop() }
        #expect(try shell("echo one > docs/f; echo two > docs/f", in: scratch.mountpoint).status == 0)
        let id = try #require(try Self.list("docs/f", in: scratch.mountpoint).versions.first?["id"] as? Int)
        #expect(try Self.versions(["remove", "docs/f", "\(id)"], in: scratch.mountpoint).status == 0)

        var events: [String] = []
        while !events.contains(where: { $0.hasPrefix("version-removed") }), let push = try? client.nextPush(timeout: .seconds(5)) {
            guard push["push"] as? String == "event", let event = push["event"] as? [String: Any] else { continue }
            events.append("\(event["kind"] as? String ?? "?") \(event["path"] as? String ?? "?")" + ((event["version"] as? Int).map { " \($0)" } ?? ""))
        }
        let added = try #require(events.firstIndex(of: "version-added /docs/f \(id)"), "\(events)")
        #expect(events[..<added].contains { $0.hasPrefix("created /docs/f") }, "the version comes after the file's creation: \(events)")
        #expect(events.last == "version-removed /docs/f \(id)", "\(events)")
        #expect(presenter.eventuallyPrints("notify did-gain-version /docs/f"), "\(presenter.output)")
        #expect(presenter.eventuallyPrints("notify did-lose-version /docs/f"), "\(presenter.output)")
    }

    /// The "write a temp, rename it into place, then close" pattern (Rust's tempfile, many
    /// loggers) over an existing file: at the close the new file replaces the old one, so
    /// subscribers hear `changed` (not `created`) and the old file is kept as a version.
    @Test func aNewFileRenamedOverAnotherBeforeItsCloseReplacesIt() throws {
        let scratch = try Scratch()
        try scratch.mount(["--versions"])
        defer { scratch.unmount() }
        #expect(try shell("echo old > target", in: scratch.mountpoint).status == 0)
        let client = try ControlSocketTests.connect(to: scratch)
        #expect(try client.request(#"{"id":1,"op":"subscribe","path":"/","recursive":true}"#).ok != nil)
        let script = """
            import os
            f = open("target.tmp", "w"); f.write("new\\n"); f.flush()
            os.rename("target.tmp", "target")
            f.close()
            """
        let saved = try run(["python3", "-c", script], in: scratch.mountpoint)
        #expect(saved.status == 0, "\(saved)")
        var events: [String] = []
        while !events.contains(where: { $0.hasSuffix("/target") && !$0.hasPrefix("version") }), let push = try? client.nextPush(timeout: .seconds(5)) {
            guard push["push"] as? String == "event", let event = push["event"] as? [String: Any] else { continue }
            events.append("\(event["kind"] as? String ?? "?") \(event["path"] as? String ?? "?")")
        }
        #expect(events == ["version-added /target", "changed /target"], "\(events)")
        #expect(try String(contentsOfFile: scratch.mountpoint + "/target", encoding: .utf8) == "new\n")
        let versions = try Self.list("target", in: scratch.mountpoint).versions
        let id = try #require(versions.first?["id"] as? Int, "\(versions)")
        let cat = try run([coordfsBinary, "versions", "cat", "target", "\(id)"], in: scratch.mountpoint)
        #expect(cat.output == "old\n" && versions.count == 1, "\(cat) \(versions)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.mountpoint) == ["target"])
    }

    /// Files whose times lie past what nanoseconds since 1970 hold in 64 bits (CPython's tests
    /// set such times): their versions are kept, with the times held at the ends of the range,
    /// and the daemon lives on (it trapped on the overflow before).
    @Test func filesWithFarTimesKeepVersions() throws {
        let scratch = try Scratch()
        try scratch.mount(["--versions"])
        defer { scratch.unmount() }
        let changed = try shell("echo a > f && touch -d @99999999999 f && echo b > f && touch -d @-99999999999 f && rm f",
                                in: scratch.mountpoint)
        #expect(changed.status == 0, "\(changed)")
        let listed = try Self.list("f", in: scratch.mountpoint)
        #expect(listed.deleted && listed.versions.count == 2, "\(listed)")
        #expect(try shell("echo alive > g && cat g", in: scratch.mountpoint).output == "alive\n")
    }

    /// A file deleted while open is gone as on a plain disk: its open descriptor shows no
    /// link left, though the store keeps it.
    @Test func aFileDeletedWhileOpenShowsNoLinkLeft() throws {
        let scratch = try Scratch()
        try scratch.mount(["--versions"])
        defer { scratch.unmount() }
        let script = """
            import os, sys
            for name in ("f", "f"):
                with open(name, "w") as f: f.write("x")
            fd = os.open("f", os.O_RDONLY)
            os.unlink("f")
            print(os.fstat(fd).st_nlink, os.path.exists("f"))
            """
        for directory in [scratch.mountpoint, scratch.plain] {
            let result = try run(["python3", "-c", script], in: directory)
            #expect(result.output == "0 False\n", "\(directory): \(result)")
        }
        #expect(try Self.list("f", in: scratch.mountpoint).deleted)
    }

    /// The store and its index agree again at the next start after a crash: a record whose
    /// version never got its link goes, a version found without a record is recorded (as a
    /// version of the mount's root), and nothing else changes.
    @Test func storeAndIndexAgreeAfterACrash() throws {
        let scratch = try Scratch()
        try scratch.mount(["--versions"])
        for text in ["a", "b", "c"] { try text.write(toFile: scratch.mountpoint + "/f", atomically: false, encoding: .utf8) }
        let before = try Self.list("f", in: scratch.mountpoint).versions.compactMap { $0["id"] as? Int }
        try #require(before.count == 2)
        scratch.killDaemon()
        // As a crash between the record and the link, and a power cut that lost a record, would leave them.
        let objects = scratch.backing + "/.coordfs-versions/objects/"
        #expect(unlink(objects + "\(before[1])") == 0)
        try "found".write(toFile: objects + "9999", atomically: false, encoding: .utf8)
        try scratch.mount(["--versions"])
        defer { scratch.unmount() }
        let after = try Self.list("f", in: scratch.mountpoint).versions.compactMap { $0["id"] as? Int }
        #expect(after == [before[0]])
        #expect(try Self.versions(["cat", "f", "\(before[0])"], in: scratch.mountpoint).output == "a")
        let found = try Self.list(".", in: scratch.mountpoint)
        #expect(found.versions.compactMap { $0["id"] as? Int } == [9999])
        #expect(try Self.versions(["cat", ".", "9999"], in: scratch.mountpoint).output == "found")
        #expect(try String(contentsOfFile: scratch.mountpoint + "/f", encoding: .utf8) == "c")
    }
}
