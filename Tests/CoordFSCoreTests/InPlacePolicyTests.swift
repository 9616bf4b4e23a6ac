import Glibc
import SystemPackage
import Testing
@testable import CoordFSCore

/// The in-place policy: default patterns, name and path patterns, `**`, the size threshold, and
/// the whole decision for an open (SQLite's header and companions) on real files.
@Suite struct InPlacePolicyTests {
    func path(_ text: String) -> MountPath { MountPath(text)! }

    @Test func defaultsMatchDatabasesAndLogs() {
        let policy = InPlacePolicy(patterns: InPlacePolicy.defaultPatterns, largerThan: nil)
        for name in ["foo.db", "foo.db-wal", "foo.db-shm", "foo.db-journal", "x/y/app.log", "deep/a/b/c.sqlite",
                     "c.sqlite3-wal", "data.mdb", "lock.mdb", "src/.main.c.swp", ".notes.swo", "vm/disk.qcow2",
                     "var/system.journal", "analytics.duckdb.wal"] {
            #expect(policy.isInPlace(path(name), size: 10), "\(name)")
        }
        for name in ["foo.dbx", "foo.db.bak", "db", "notes.txt", "logs", "app.log.1", "x/y/catalog", "main.swift",
                     "foo.DB", "swp", "main.c.swp"] {
            #expect(!policy.isInPlace(path(name), size: 10), "\(name)")
        }
        #expect(!policy.isInPlace(.root, size: 0))
    }

    @Test func defaultInitUsesDefaults() {
        let policy = InPlacePolicy()
        #expect(policy.patterns == InPlacePolicy.defaultPatterns)
        #expect(policy.largerThan == InPlacePolicy.defaultLargerThan)
        #expect(policy.isInPlace(path("a.db"), size: 0))
        #expect(policy.largerThan == 128 << 20)
        #expect(policy.isInPlace(path("movie.mkv"), size: (128 << 20) + 1))
        #expect(!policy.isInPlace(path("movie.mkv"), size: 128 << 20))
        #expect(!policy.isInPlace(path("movie.mkv"), size: (128 << 20) + 1, clones: { true }))
    }

    @Test func nameWildcards() {
        let policy = InPlacePolicy(patterns: ["data-??.bin", "[abc]*.tmp", "[!x]y", "report[0-9][0-9].csv", "lit\\*eral", "é?"],
                                   largerThan: nil)
        let yes = ["data-01.bin", "q/data-xy.bin", "a.tmp", "cxyz.tmp", "ay", "report42.csv", "lit*eral", "éé", "é1"]
        let no = ["data-1.bin", "data-123.bin", "d.tmp", "xy", "report4x.csv", "literal", "litXeral", "é", "éab"]
        for name in yes { #expect(policy.isInPlace(path(name), size: 0), "\(name)") }
        for name in no { #expect(!policy.isInPlace(path(name), size: 0), "\(name)") }
    }

    @Test func globEdgeCases() {
        #expect(GlobPattern("*").matches(""))
        #expect(GlobPattern("*").matches(".hidden")) // as fnmatch without FNM_PERIOD
        #expect(GlobPattern("a*b*c").matches("aXXbYYbZc"))
        #expect(!GlobPattern("a*b*c").matches("aXXbYY"))
        #expect(GlobPattern("**.log").matches("x.log")) // ** within a name is *
        #expect(GlobPattern("[]]").matches("]"))
        #expect(GlobPattern("[!]]").matches("a"))
        #expect(!GlobPattern("[!]]").matches("]"))
        #expect(GlobPattern("[a-]").matches("-"))
        #expect(GlobPattern("[^a]").matches("b"))
        #expect(GlobPattern("[unclosed").matches("[unclosed"))
        #expect(!GlobPattern("[z-a]").matches("m"))
        #expect(GlobPattern(String(repeating: "*a", count: 30)).matches(String(repeating: "a", count: 40)))
        #expect(!GlobPattern(String(repeating: "*a", count: 30) + "b").matches(String(repeating: "a", count: 200)))
    }

    /// `*` then plain characters is matched as a suffix: the same answers as the general matcher.
    @Test func starThenLiteralsIsASuffix() {
        #expect(GlobPattern("*.db").literalSuffix == Array(".db".unicodeScalars))
        #expect(GlobPattern("*\\*").literalSuffix == ["*"])
        #expect(GlobPattern("*.sw?").literalSuffix == nil)
        #expect(GlobPattern("a*").literalSuffix == nil)
        for name in [".db", "a.db", "x.db.db", "é.db"] { #expect(GlobPattern("*.db").matches(name), "\(name)") }
        for name in ["", "db", "a.db-wal", "a.dB", "a.d"] { #expect(!GlobPattern("*.db").matches(name), "\(name)") }
        let names = ["", "*", "x*", "x", ".db", "a.db", "x.db.db", "a.db-wal", "café", "cafe", "é", "a.log", "log", ".log.log"]
        for pattern in InPlacePolicy.defaultPatterns + ["*", "**", "*\\*", "*é", "*.log"] {
            let glob = GlobPattern(pattern)
            for name in names {
                let scalars = Array(name.unicodeScalars)
                #expect(glob.matches(scalars: scalars) == glob.matchesTokens(scalars), "\(pattern) on \(name)")
            }
        }
    }

    /// A byte that is not valid UTF-8 is one character no text names: `?`, `*` and negated sets
    /// match it, a literal U+FFFD (its repair) or a range does not.
    @Test func badBytesAreCharactersNoPatternNames() throws {
        let dbFile = try #require(MountPath(bytes: [0x2F, 0x78, 0xFF] + Array(".db".utf8)))
        #expect(InPlacePolicy(patterns: ["*.db"], largerThan: nil).isInPlace(dbFile, size: 0))
        #expect(InPlacePolicy(patterns: ["x?.db"], largerThan: nil).isInPlace(dbFile, size: 0))
        #expect(InPlacePolicy(patterns: ["x[!a].db"], largerThan: nil).isInPlace(dbFile, size: 0))
        #expect(!InPlacePolicy(patterns: ["x[a-z].db"], largerThan: nil).isInPlace(dbFile, size: 0))
        #expect(!InPlacePolicy(patterns: ["x\u{FFFD}.db"], largerThan: nil).isInPlace(dbFile, size: 0))
        #expect(!InPlacePolicy(patterns: ["x??.db"], largerThan: nil).isInPlace(dbFile, size: 0), "one byte, one character")
        let journal = try #require(MountPath(bytes: Array("/d/".utf8) + [0xC3] + Array(".sqlite-journal".utf8)))
        #expect(InPlacePolicy().isInPlace(journal, size: 0))
        #expect(InPlacePolicy(patterns: ["d/*"], largerThan: nil).isInPlace(journal, size: 0))
    }

    @Test func pathPatternsMatchTheWholePath() {
        let policy = InPlacePolicy(patterns: ["data/**/*.bin", "/build/*", "**/cache/**", "exact/file.txt", "*/top.dat"],
                                   largerThan: nil)
        let yes = ["data/x.bin", "data/a/b/c/x.bin", "build/out", "cache", "cache/x", "a/b/cache/c/d",
                   "exact/file.txt", "one/top.dat"]
        let no = ["other/data/x.bin", "data/x.bim", "build/out/deeper", "build", "cached/x", "a/cachex/y",
                  "exact/file.txt/no", "sub/exact/file.txt", "top.dat", "a/b/top.dat", "x.bin"]
        for name in yes { #expect(policy.isInPlace(path(name), size: 0), "\(name)") }
        for name in no { #expect(!policy.isInPlace(path(name), size: 0), "\(name)") }
    }

    @Test func doubleStarAtEitherEnd() {
        #expect(PathPattern("**/x").matches(["x"]))
        #expect(PathPattern("**/x").matches(["a", "b", "x"]))
        #expect(!PathPattern("**/x").matches(["a", "x", "b"]))
        #expect(PathPattern("x/**").matches(["x", "a", "b"]))
        #expect(PathPattern("**").matches(["anything", "at", "all"]))
        #expect(PathPattern("a/**/b/**/c").matches(["a", "b", "c"]))
        #expect(PathPattern("a/**/b/**/c").matches(["a", "1", "b", "2", "3", "c"]))
        #expect(!PathPattern("a/**/b/**/c").matches(["a", "1", "c"]))
    }

    @Test func sizeThreshold() {
        let policy = InPlacePolicy(patterns: [], largerThan: 100)
        #expect(!policy.isInPlace(path("f"), size: 0))
        #expect(!policy.isInPlace(path("f"), size: 100))
        #expect(policy.isInPlace(path("f"), size: 101))
        let unlimited = InPlacePolicy(patterns: [], largerThan: nil)
        #expect(!unlimited.isInPlace(path("f"), size: .max))
    }

    /// Where copies are clones the threshold does not apply; the filesystem is asked only
    /// about a file above it that no pattern already sends in place.
    @Test func sizeThresholdOnlyWhereCopiesAreReal() {
        let policy = InPlacePolicy(patterns: ["*.db"], largerThan: 100)
        var asked = 0
        func clones(_ answer: Bool) -> () -> Bool { { asked += 1; return answer } }
        #expect(!policy.isInPlace(path("f"), size: 101, clones: clones(true)))
        #expect(policy.isInPlace(path("f"), size: 101, clones: clones(false)))
        #expect(asked == 2)
        #expect(!policy.isInPlace(path("f"), size: 100, clones: clones(false)))
        #expect(policy.isInPlace(path("a.db"), size: 101, clones: clones(true)))
        #expect(asked == 2, "below the threshold, or matched by a pattern: not asked")
    }

    @Test func emptyPatternsAreIgnored() {
        let policy = InPlacePolicy(patterns: ["", "/"], largerThan: nil)
        #expect(!policy.isInPlace(path("anything"), size: 0))
    }

    // MARK: Opens

    /// An open's whole answer, on files in a scratch directory: a SQLite database by its
    /// header, whatever its name, when opened read-write without O_TRUNC (the only opens that
    /// read the header); its companions by their suffixes, also when created; the size
    /// threshold on the file's size, which a truncating or creating open counts as 0.
    @Test func opensDecideByHeaderCompanionsAndSize() throws {
        let scratch = try ScratchDirectory("in-place")
        try scratch.write("store", Array("SQLite format 3\0".utf8) + randomBytes(100))
        try scratch.write("older", Array("SQLite format 2\0".utf8) + randomBytes(100))
        try scratch.write("cut", Array("SQLite format 3".utf8)) // 15 bytes: no whole header
        try scratch.write("big", randomBytes(2000))
        try scratch.write("app-wal", [])
        let table = try NodeTable(root: try Syscall.openAt(scratch.raw, ".", Linux.O_PATH | O_DIRECTORY))
        let policy = InPlacePolicy(patterns: ["*.log"], largerThan: 1000)
        var clones = false
        func writesInPlace(_ text: String, _ flags: Int32, creating: Bool = false) throws -> Bool {
            var existing: Node?
            if !creating {
                let descriptor = try Syscall.openAt(table.root.directory, name(text), Linux.O_PATH | O_NOFOLLOW)
                existing = table.lookUp(try Syscall.statOfPathDescriptor(descriptor.raw), descriptor: descriptor,
                                        parent: table.root, name: name(text))
            }
            return policy.writesInPlace(path(text), flags: flags, existing: existing, clones: { clones })
        }

        #expect(try writesInPlace("store", O_RDWR))
        for flags in [O_WRONLY, O_RDWR | O_TRUNC, O_WRONLY | O_TRUNC, O_RDONLY | O_TRUNC] {
            #expect(try !writesInPlace("store", flags), "flags \(flags): SQLite never opens so")
        }
        #expect(try !writesInPlace("older", O_RDWR))
        #expect(try !writesInPlace("cut", O_RDWR))

        for companion in ["app-wal", "x.sqlite-journal", "data-shm", "cache-journal"] {
            #expect(try writesInPlace(companion, O_WRONLY | O_CREAT, creating: companion != "app-wal"), "\(companion)")
        }
        for other in ["app-walrus", "journal", "x-wa", "shm"] {
            #expect(try !writesInPlace(other, O_WRONLY | O_CREAT, creating: true), "\(other)")
        }
        #expect(try writesInPlace("new.log", O_WRONLY | O_CREAT, creating: true))

        #expect(try writesInPlace("big", O_WRONLY))
        #expect(try writesInPlace("big", O_RDWR | O_APPEND))
        #expect(try !writesInPlace("big", O_WRONLY | O_TRUNC), "nothing is copied when the open truncates")
        #expect(try !writesInPlace("store", O_WRONLY), "below the threshold")
        clones = true
        #expect(try !writesInPlace("big", O_WRONLY), "copies are clones: the size does not matter")
    }
}
