import Glibc
import SystemPackage
import Testing
@testable import CoordFSCore

/// The recovery sweep on real trees: temps at several depths moved with their layout kept,
/// symlinks not followed, the recovery folder not searched, other filesystems not entered,
/// committed files untouched, and deep trees walked within a fixed number of descriptors.
@Suite struct RecoveryTests {
    let scratch: ScratchDirectory
    /// 2023-11-14T22:13:20Z
    let now: time_t = 1_700_000_000
    let folder = ".coordfs-recovery/2023-11-14T22-13-20Z"

    init() throws {
        scratch = try ScratchDirectory("recovery")
    }

    @Test func folderNames() {
        #expect(Recovery.folderName(at: 0) == "1970-01-01T00-00-00Z")
        #expect(Recovery.folderName(at: 1_700_000_000) == "2023-11-14T22-13-20Z")
        #expect(Recovery.folderName(at: 1_795_256_130) == "2026-11-21T10-15-30Z")
    }

    @Test func emptyTreeNeedsNoRecoveryFolder() throws {
        #expect(scratch.shell("mkdir -p a/b && echo x > a/b/file"))
        #expect(try Recovery.sweep(backingRoot: scratch.raw, now: now).isEmpty)
        #expect(!scratch.exists(".coordfs-recovery"))
    }

    @Test func tempsAtSeveralDepthsAreMovedWithTheirLayout() throws {
        let inRoot = StagingName.make()
        let inA = StagingName.make()
        let deep = StagingName.make()
        let dangling = StagingName.make()
        let beyondLink = StagingName.make()
        let alreadyRecovered = StagingName.make()
        let outside = try ScratchDirectory("recovery-outside")
        #expect(outside.shell("mkdir inner && echo outside > inner/\(beyondLink)"))
        #expect(scratch.shell("""
            mkdir -p tree a/b/c .coordfs-recovery/2020-01-01T00-00-00Z/x \
            && echo root-temp > \(inRoot) && echo committed > keep.txt \
            && echo a-temp > a/\(inA) && echo a-file > a/keep \
            && head -c 5000 /dev/urandom > a/b/c/\(deep) && echo c-file > a/b/c/keep \
            && ln -s /nonexistent a/b/\(dangling) \
            && ln -s '\(outside.path)/inner' link-out && ln -s a link-in && ln -s .. a/b/c/up \
            && echo old > .coordfs-recovery/2020-01-01T00-00-00Z/x/\(alreadyRecovered) \
            && echo lookalike > .coordfs-tmp-XYZ && echo lookalike > a/.coordfs-tmp-0123456789abcdef.txt
            """))
        let committedBefore = try committedFiles()

        let recovered = try Recovery.sweep(backingRoot: scratch.raw, now: now)

        let expected: [(String, String)] = [
            ("\(inRoot)", "\(folder)/\(inRoot)"),
            ("a/\(inA)", "\(folder)/a/\(inA)"),
            ("a/b/\(dangling)", "\(folder)/a/b/\(dangling)"),
            ("a/b/c/\(deep)", "\(folder)/a/b/c/\(deep)"),
        ]
        #expect(Set(recovered.map { "\($0.originalPath)" }) == Set(expected.map { "/" + $0.0 }))
        for item in recovered {
            let match = try #require(expected.first { "/" + $0.0 == "\(item.originalPath)" })
            #expect("\(item.recoveredPath)" == "/" + match.1)
            #expect(!scratch.exists(match.0))
            #expect(scratch.exists(match.1))
        }
        #expect(recovered.first { $0.originalPath.name == deep }?.size == 5000)
        #expect(try scratch.read("\(folder)/a/\(inA)") == Array("a-temp\n".utf8))
        #expect(try scratch.status("\(folder)/a/b/\(dangling)").st_mode & S_IFMT == S_IFLNK)

        // Untouched: committed files, look-alikes, what lies beyond symlinks, earlier recoveries.
        #expect(try committedFiles() == committedBefore)
        #expect(outside.exists("inner/\(beyondLink)"))
        #expect(scratch.exists(".coordfs-recovery/2020-01-01T00-00-00Z/x/\(alreadyRecovered)"))
        #expect(scratch.exists(".coordfs-tmp-XYZ"))
        #expect(scratch.exists("a/.coordfs-tmp-0123456789abcdef.txt"))

        // The folders made are private to the daemon.
        for made in [folder, "\(folder)/a", "\(folder)/a/b", "\(folder)/a/b/c"] {
            #expect(try scratch.status(made).st_mode & 0o777 == 0o700, "\(made)")
        }

        // Nothing left to find; the second sweep moves nothing.
        #expect(try Recovery.sweep(backingRoot: scratch.raw, now: now + 60).isEmpty)
        #expect(!scratch.exists(".coordfs-recovery/\(Recovery.folderName(at: now + 60))"))
    }

    /// Every non-temp file in the tree outside the recovery folder, with its contents.
    func committedFiles() throws -> [String: [UInt8]] {
        var result: [String: [UInt8]] = [:]
        let listing = try #require(popen("cd '\(scratch.path)' && find . -path ./.coordfs-recovery -prune -o -type f -print", "r"))
        defer { pclose(listing) }
        var line = [CChar](repeating: 0, count: 4096)
        while fgets(&line, Int32(line.count), listing) != nil {
            let path = String(decoding: line.prefix { $0 != 0 && $0 != 10 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let relative = String(path.dropFirst(2))
            if let last = relative.split(separator: "/").last, StagingName.isStaging(name(last)) { continue }
            result[relative] = try scratch.read(relative)
        }
        return result
    }

    /// The O_PATH root descriptor the node table holds works as the sweep's root.
    @Test func pathDescriptorRoot() throws {
        let temp = StagingName.make()
        #expect(scratch.shell("mkdir d && echo x > d/\(temp)"))
        let root = try Syscall.openAt(AT_FDCWD, scratch.path, Linux.O_PATH | O_DIRECTORY)
        let recovered = try Recovery.sweep(backingRoot: root.raw, now: now)
        #expect(recovered.map(\.recoveredPath.description) == ["/\(folder)/d/\(temp)"])
        #expect(try scratch.status(".coordfs-recovery").st_mode & 0o777 == 0o700)
    }

    /// A sweep in the same second as an earlier one adds to its folder without replacing anything.
    /// An empty temp holds nothing to recover (a save that had not written yet): deleted.
    @Test func emptyTempsAreDeleted() throws {
        let empty = StagingName.make()
        let full = StagingName.make()
        #expect(scratch.shell("mkdir a && : > a/\(empty) && echo data > a/\(full)"))
        let recovered = try Recovery.sweep(backingRoot: scratch.raw, now: now)
        #expect(recovered.map(\.originalPath.description) == ["/a/\(full)"])
        #expect(!scratch.exists("a/\(empty)"))
        #expect(!scratch.exists("\(folder)/a/\(empty)"))
    }

    /// What a crash can leave of a save: of an unnamed temp nothing, or, caught between the
    /// link that names it for its commit and the rename, a named temp like any other; of a
    /// named temp (a backing without unnamed files), the temp. Both are moved aside whole.
    @Test func whatACrashLeavesOfEitherKindOfTempIsRecovered() throws {
        #expect(scratch.shell("mkdir d && echo committed > d/file"))
        let directory = try Syscall.openAt(scratch.raw, "d", Linux.O_PATH | O_DIRECTORY)
        let target = try Syscall.openAt(directory.raw, "file", O_RDONLY)
        var linkedName = FileName.empty
        do {
            let vanishing = try StagedFile.stage(in: directory.raw, replacing: target.raw, copyContents: false, owner: nil, mode: 0)
            try scratch.write(vanishing.descriptor.raw, Array("never committed".utf8))
            let caught = try StagedFile.stage(in: directory.raw, replacing: target.raw, copyContents: false, owner: nil, mode: 0)
            try scratch.write(caught.descriptor.raw, Array("linked, not renamed".utf8))
            linkedName = try caught.linkUnderStagingName(in: directory.raw, names: StagingName.make)
        } // the process "crashes": every descriptor closes, nothing is discarded
        let named = try StagedFile.stage(in: directory.raw, replacing: target.raw, copyContents: false, owner: nil, mode: 0, unnamed: false)
        try scratch.write(named.descriptor.raw, Array("named".utf8))
        let stagedName = named.name
        let namedName = try #require(stagedName)
        #expect(try scratch.names(in: "d") == ["file", linkedName, namedName])

        let recovered = try Recovery.sweep(backingRoot: scratch.raw, now: now)
        #expect(Set(recovered.map(\.originalPath.description)) == ["/d/\(linkedName)", "/d/\(namedName)"])
        #expect(try scratch.read("\(folder)/d/\(linkedName)") == Array("linked, not renamed".utf8))
        #expect(try scratch.read("\(folder)/d/\(namedName)") == Array("named".utf8))
        #expect(try scratch.names(in: "d") == ["file"])
        #expect(try scratch.read("d/file") == Array("committed\n".utf8))
    }

    @Test func sameSecondTwiceKeepsBoth() throws {
        let temp = StagingName.make()
        #expect(scratch.shell("echo first > \(temp)"))
        _ = try Recovery.sweep(backingRoot: scratch.raw, now: now)
        #expect(scratch.shell("echo second > \(temp)"))
        let second = try Recovery.sweep(backingRoot: scratch.raw, now: now)
        #expect(second.map(\.recoveredPath.description) == ["/\(folder)/\(temp).1"])
        #expect(try scratch.read("\(folder)/\(temp)") == Array("first\n".utf8))
        #expect(try scratch.read("\(folder)/\(temp).1") == Array("second\n".utf8))
    }

    /// Depth 300 with temps at several depths and a second deep branch near the top, walked
    /// with a budget of 8 directory descriptors: all found, the budget kept (whichever branch
    /// goes first, the fork's descriptor is given up below it and reopened for the other), and
    /// no descriptor left open.
    @Test func deepTreeStaysWithinTheDescriptorBudget() throws {
        let depth = 300
        let chain = Array(repeating: "d", count: depth).joined(separator: "/")
        let at150 = Array(repeating: "d", count: 150).joined(separator: "/")
        let at10 = Array(repeating: "d", count: 10).joined(separator: "/")
        let side = "\(at10)/" + Array(repeating: "s", count: 20).joined(separator: "/")
        let temps = (StagingName.make(), StagingName.make(), StagingName.make(), StagingName.make())
        #expect(scratch.shell("""
            mkdir -p \(chain) \(side) \
            && echo bottom > \(chain)/\(temps.0) && echo middle > \(at150)/\(temps.1) \
            && echo side > \(side)/\(temps.2) && echo bottom-file > \(chain)/keep \
            && echo after > \(at10)/z-\(temps.3)
            """))
        let before = openDescriptorCount()
        var statistics = Recovery.Statistics()
        let recovered = try Recovery.sweep(backingRoot: scratch.raw, now: now, descriptorBudget: 8, statistics: &statistics)
        #expect(openDescriptorCount() == before)
        #expect(recovered.count == 3)
        #expect(Set(recovered.map(\.originalPath.description)) == [
            "/\(chain)/\(temps.0)", "/\(at150)/\(temps.1)", "/\(side)/\(temps.2)",
        ])
        #expect(statistics.peakHeld <= 8)
        #expect(statistics.reopened > 0)
        #expect(try scratch.read("\(folder)/\(chain)/\(temps.0)") == Array("bottom\n".utf8))
        #expect(try scratch.read("\(chain)/keep") == Array("bottom-file\n".utf8))
        #expect(scratch.exists("\(at10)/z-\(temps.3)")) // a look-alike: the name does not match exactly

        // The public entry point with its default budget agrees: nothing left.
        #expect(try Recovery.sweep(backingRoot: scratch.raw, now: now).isEmpty)
    }

    /// Another filesystem mounted inside the backing is not entered. Root only (it mounts a tmpfs).
    @Test(.enabled(if: isRoot, "mounting a tmpfs needs root"))
    func otherFilesystemsAreNotEntered() throws {
        let inside = StagingName.make()
        let beside = StagingName.make()
        #expect(scratch.shell("mkdir mnt && mount -t tmpfs -o size=1m tmpfs mnt && echo x > mnt/\(inside) && echo y > \(beside)"))
        defer { _ = system("umount -l '\(scratch.path)/mnt'") }
        let recovered = try Recovery.sweep(backingRoot: scratch.raw, now: now)
        #expect(recovered.map(\.originalPath.description) == ["/\(beside)"])
        #expect(scratch.exists("mnt/\(inside)"))
    }

    /// Descriptors of this process open on something inside this test's scratch directory
    /// (other tests, running in parallel, open their own elsewhere).
    func openDescriptorCount() -> Int {
        guard let numbers = try? scratch.names(in: "/proc/self/fd") else { return -1 }
        return numbers.filter { number in
            guard let target = try? Syscall.readLink(at: AT_FDCWD, "/proc/self/fd/\(number)") else { return false }
            return String(decoding: target.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self).hasPrefix(scratch.path)
        }.count
    }
}
