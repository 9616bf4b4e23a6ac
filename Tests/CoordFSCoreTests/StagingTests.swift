import Foundation
import Glibc
import SystemPackage
import Testing
@testable import CoordFSCore

/// Staging names: the exact pattern, the fast C-string check agreeing with the String one,
/// and which names are reserved where.
@Suite struct StagingNameTests {
    @Test func madeNamesHaveTheFixedShape() {
        for _ in 0..<100 {
            let name = StagingName.make()
            #expect(name.count == StagingName.length)
            #expect(name.description.hasPrefix(".coordfs-tmp-"))
            #expect(StagingName.isStaging(name))
        }
        #expect(StagingName.make(random: 0) == ".coordfs-tmp-0000000000000000")
        #expect(StagingName.make(random: .max) == ".coordfs-tmp-ffffffffffffffff")
        #expect(StagingName.make() != StagingName.make())
    }

    /// Names come from a per-process key and a counter: none repeats, even from many threads.
    @Test func madeNamesNeverRepeat() async {
        let batches = await withTaskGroup(of: [FileName].self) { group in
            for _ in 0..<8 { group.addTask { (0..<5_000).map { _ in StagingName.make() } } }
            return await group.reduce(into: [[FileName]]()) { $0.append($1) }
        }
        let names = batches.flatMap { $0 }
        #expect(Set(names).count == names.count)
        #expect(names.allSatisfy { StagingName.isStaging($0) })
        // Neighbouring counts land far apart: about half of the 64 bits differ.
        let differing = (StagingName.scramble(1) ^ StagingName.scramble(2)).nonzeroBitCount
        #expect((16...48).contains(differing))
    }

    static let samples: [(String, Bool)] = [
        (".coordfs-tmp-0123456789abcdef", true),
        (".coordfs-tmp-0000000000000000", true),
        (".coordfs-tmp-0123456789ABCDEF", false),  // uppercase
        (".coordfs-tmp-0123456789abcde", false),   // 15 digits
        (".coordfs-tmp-0123456789abcdef0", false), // 17 digits
        (".coordfs-tmp-0123456789abcdeg", false),
        (".coordfs-tmp-", false),
        (".coordfs-tmp", false),
        ("coordfs-tmp-0123456789abcdef", false),
        (".coordfs-tmp-0123456789abcdef.txt", false),
        ("x.coordfs-tmp-0123456789abcdef", false),
        ("", false),
        (".", false),
        (".coordfs-recovery", false),
        ("notes.txt", false),
    ]

    @Test(arguments: samples)
    func nameAndCStringChecksAgree(_ text: String, _ expected: Bool) {
        #expect(StagingName.isStaging(FileName(stringLiteral: text)) == expected)
        #expect(text.withCString { StagingName.isStaging($0) } == expected)
    }

    @Test func reservedNames() {
        let temp = StagingName.make()
        for inRoot in [true, false] {
            #expect(StagingName.isReserved(name: temp, inRoot: inRoot))
            #expect(temp.withCString { StagingName.isReserved(name: $0, inRoot: inRoot) })
            #expect(!StagingName.isReserved(name: "file.txt", inRoot: inRoot))
            #expect(!"file.txt".withCString { StagingName.isReserved(name: $0, inRoot: inRoot) })
        }
        #expect(StagingName.isReserved(name: ".coordfs-recovery", inRoot: true))
        #expect(".coordfs-recovery".withCString { StagingName.isReserved(name: $0, inRoot: true) })
        #expect(!StagingName.isReserved(name: ".coordfs-recovery", inRoot: false))
        #expect(!".coordfs-recovery".withCString { StagingName.isReserved(name: $0, inRoot: false) })
        #expect(!".coordfs-recoveryX".withCString { StagingName.isReserved(name: $0, inRoot: true) })
        #expect(!".coordfs-recover".withCString { StagingName.isReserved(name: $0, inRoot: true) })
    }
}

/// Staged temps against a real scratch directory (no mount), unnamed (O_TMPFILE: /tmp here is
/// ext4 or tmpfs, which have them) and named (the fallback) alike: contents copied byte for
/// byte by every method, metadata carried over (mode with set-id bits, owner, xattrs, ACLs),
/// commit by link (a new file) and by link and rename (a replaced one), discard, and failures
/// that leave nothing behind.
@Suite struct StagingTests {
    let scratch: ScratchDirectory

    init() throws {
        scratch = try ScratchDirectory("staging")
    }

    func stageCopy(of name: String, copyContents: Bool = true, unnamed: Bool = true) throws -> StagedFile {
        let target = try Syscall.openAt(scratch.raw, name, O_RDONLY)
        return try StagedFile.stage(in: scratch.raw, replacing: target.raw, copyContents: copyContents, owner: nil, mode: 0,
                                    unnamed: unnamed)
    }

    func temps(in relative: String = ".") throws -> [FileName] {
        try scratch.names(in: relative).filter { StagingName.isStaging($0) }
    }

    /// The temps the directory lists while `staged` is pending: its name, or none for an unnamed one.
    func expectedTemps(_ staged: borrowing StagedFile) -> [FileName] {
        staged.name.map { [$0] } ?? []
    }

    /// An unnamed temp has no name and no link, and the directory does not list it; a named
    /// one is a staging name the directory lists.
    func expectKind(_ staged: borrowing StagedFile, unnamed: Bool, sourceLocation: SourceLocation = #_sourceLocation) throws {
        if unnamed {
            #expect(staged.name == nil, sourceLocation: sourceLocation)
            #expect(try Syscall.stat(staged.descriptor.raw).st_nlink == 0, sourceLocation: sourceLocation)
        } else {
            let stagedName = staged.name
            let name = try #require(stagedName, sourceLocation: sourceLocation)
            #expect(StagingName.isStaging(name), sourceLocation: sourceLocation)
            #expect(try Syscall.stat(staged.descriptor.raw).st_nlink == 1, sourceLocation: sourceLocation)
        }
    }

    // MARK: Contents

    @Test(arguments: [0, 1, 4096, 3 << 20 | 12345], [true, false])
    func copyKeepsContentsByteForByte(size: Int, unnamed: Bool) throws {
        let contents = randomBytes(size)
        try scratch.write("file", contents)
        let staged = try stageCopy(of: "file", unnamed: unnamed)
        try expectKind(staged, unnamed: unnamed)
        #expect(try ScratchDirectory.readAll(staged.descriptor.raw) == contents)
        #expect(try Syscall.stat(staged.descriptor.raw).st_size == off_t(size))
        #expect(try scratch.read("file") == contents)
        #expect(try temps() == expectedTemps(staged))
    }

    @Test func sparseFileCopiesWithHolesAsZeros() throws {
        #expect(scratch.shell("truncate -s 24M sparse"))
        let file = try Syscall.openAt(scratch.raw, "sparse", O_WRONLY)
        let middle = randomBytes(5000)
        let tail = randomBytes(100)
        try scratch.write(file.raw, middle, at: 7 << 20)
        try scratch.write(file.raw, tail, at: (24 << 20) - 100)
        let staged = try stageCopy(of: "sparse")
        let copy = try ScratchDirectory.readAll(staged.descriptor.raw)
        #expect(copy.count == 24 << 20)
        #expect(copy == (try scratch.read("sparse")))
        #expect(Array(copy[(7 << 20)..<((7 << 20) + 5000)]) == middle)
        #expect(copy[0..<(7 << 20)].allSatisfy { $0 == 0 })
    }

    /// Each fallback on its own gives the same bytes; the reflink may be refused where the
    /// filesystem has none, but only with an errno that means "not here".
    @Test func everyCopyMethodGivesTheSameBytes() throws {
        let contents = randomBytes(2 << 20 | 777)
        try scratch.write("source", contents)
        let source = try Syscall.openAt(scratch.raw, "source", O_RDONLY)

        let byRanges = try Syscall.openAt(scratch.raw, "by-ranges", O_RDWR | O_CREAT | O_EXCL, 0o600)
        var offset: off_t = 0
        try ContentCopy.copyByRanges(from: source.raw, to: byRanges.raw, offset: &offset)
        #expect(offset == off_t(contents.count))
        #expect(try ScratchDirectory.readAll(byRanges.raw) == contents)

        let byReading = try Syscall.openAt(scratch.raw, "by-reading", O_RDWR | O_CREAT | O_EXCL, 0o600)
        try ContentCopy.copyByReading(from: source.raw, to: byReading.raw, offset: 0)
        #expect(try ScratchDirectory.readAll(byReading.raw) == contents)

        // Continuing from an offset copies only the rest.
        let resumed = try Syscall.openAt(scratch.raw, "resumed", O_RDWR | O_CREAT | O_EXCL, 0o600)
        try scratch.write(resumed.raw, Array(contents[0..<1000]))
        try ContentCopy.copyByReading(from: source.raw, to: resumed.raw, offset: 1000)
        #expect(try ScratchDirectory.readAll(resumed.raw) == contents)

        let cloned = try Syscall.openAt(scratch.raw, "cloned", O_RDWR | O_CREAT | O_EXCL, 0o600)
        let clones: Bool
        switch Result(catching: { () throws(Errno) in try Syscall.cloneContents(of: source.raw, into: cloned.raw) }) {
        case .success:
            #expect(try ScratchDirectory.readAll(cloned.raw) == contents)
            clones = true
        case .failure(let error):
            #expect(ContentCopy.cannotClone(error), "FICLONE failed with \(error)")
            clones = false
        }
        // The probe of the in-place policy's threshold (two empty temps) tells the same, leaving nothing.
        let before = Set(try names(in: scratch.raw))
        #expect(TempStaging.probeCloning(in: scratch.raw, unnamed: true) == clones)
        #expect(TempStaging.probeCloning(in: scratch.raw, unnamed: false) == clones)
        #expect(Set(try names(in: scratch.raw)) == before)

        let chosen = try Syscall.openAt(scratch.raw, "chosen", O_RDWR | O_CREAT | O_EXCL, 0o600)
        let method = try ContentCopy.copy(from: source.raw, to: chosen.raw)
        #expect(method != .readWrite) // this kernel has copy_file_range within one filesystem
        #expect(try ScratchDirectory.readAll(chosen.raw) == contents)
    }

    /// On a filesystem with reflinks the copy is a clone. Needs root and mkfs.xfs (xfsprogs)
    /// for a loop-mounted xfs image; skipped with a message where loop devices are missing.
    @Test(.enabled(if: isRoot && system("command -v mkfs.xfs >/dev/null") == 0, "needs root and mkfs.xfs"))
    func reflinkFilesystemClones() throws {
        guard scratch.shell("truncate -s 320M image && mkfs.xfs -q -m reflink=1 image && mkdir xfs && mount -o loop image xfs") else {
            print("could not mount a loop xfs image here: the reflink test is skipped")
            return
        }
        defer { _ = system("umount -l '\(scratch.path)/xfs'") }
        let xfs = try Syscall.openAt(scratch.raw, "xfs", O_RDONLY | O_DIRECTORY)
        let contents = randomBytes(3 << 20 | 5)
        let source = try Syscall.openAt(xfs.raw, "source", O_RDWR | O_CREAT | O_EXCL, 0o640)
        try scratch.write(source.raw, contents)
        let target = try Syscall.openAt(xfs.raw, "clone", O_RDWR | O_CREAT | O_EXCL, 0o600)
        #expect(try ContentCopy.copy(from: source.raw, to: target.raw) == .clone)
        #expect(try ScratchDirectory.readAll(target.raw) == contents)
        #expect(TempStaging.probeCloning(in: xfs.raw, unnamed: true) == true)
        #expect(TempStaging.probeCloning(in: xfs.raw, unnamed: false) == true, "named temps (no O_TMPFILE) clone too")

        let staged = try StagedFile.stage(in: xfs.raw, replacing: source.raw, copyContents: true, owner: nil, mode: 0)
        try scratch.write(staged.descriptor.raw, [1, 2, 3]) // a write to the clone leaves the original alone
        #expect(try ScratchDirectory.readAll(source.raw) == contents)
        #expect(try ScratchDirectory.readAll(staged.descriptor.raw) == [1, 2, 3] + contents.dropFirst(3))
        #expect(try Syscall.stat(staged.descriptor.raw).st_mode & 0o7777 == 0o640)
        try staged.commit(in: xfs.raw, as: "source", replacingExistingFile: true, durability: .full)
        // Bound for the read: a descriptor only borrowed for `.raw` is closed before the read.
        let committed = try Syscall.openAt(xfs.raw, "source", O_RDONLY)
        #expect(try ScratchDirectory.readAll(committed.raw) == [1, 2, 3] + contents.dropFirst(3))
        #expect(Set(try names(in: xfs.raw)) == ["source", "clone"])
    }

    func names(in directory: Int32) throws -> [String] {
        let stream = try Syscall.openDirectoryStream(directory)
        defer { Syscall.closeDirectoryStream(stream) }
        var names: [String] = []
        while let entry = try Syscall.readDirectory(stream) {
            let name = withUnsafePointer(to: &entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Offsets are explicit: neither descriptor's position moves.
    @Test func copyingLeavesFilePositionsAlone() throws {
        try scratch.write("file", randomBytes(10000))
        let target = try Syscall.openAt(scratch.raw, "file", O_RDONLY)
        _ = try Syscall.seek(target.raw, 123, whence: SEEK_SET)
        let staged = try StagedFile.stage(in: scratch.raw, replacing: target.raw, copyContents: true, owner: nil, mode: 0)
        #expect(try Syscall.seek(target.raw, 0, whence: SEEK_CUR) == 123)
        #expect(try Syscall.seek(staged.descriptor.raw, 0, whence: SEEK_CUR) == 0)
    }

    // MARK: Metadata

    /// Gives `name` a set-gid mode, user and (as root) trusted xattrs, an ACL when setfacl is
    /// there, and as root the owner 65534:65534. Returns whether the ACL was set.
    func decorate(_ name: String) throws -> Bool {
        if isRoot { #expect(scratch.shell("chown 65534:65534 \(name)")) }
        #expect(scratch.shell("chmod 2751 \(name)"))
        let file = try Syscall.openAt(scratch.raw, name, O_RDONLY)
        let attributes: [(String, [UInt8])] = [
            ("user.alpha", Array("first value".utf8)),
            ("user.empty", []),
            ("user.binary", [0, 1, 2, 255, 0, 7]),
            ("user.large", randomBytes(3000)),
        ] + (isRoot ? [("trusted.coordfs-test", Array("root only".utf8))] : [])
        for (key, value) in attributes {
            try value.withUnsafeBytes { bytes in
                Result { () throws(Errno) in try Syscall.setExtendedAttribute(file.raw, key, bytes, flags: 0) }
            }.get()
        }
        guard system("command -v setfacl >/dev/null") == 0 else {
            print("setfacl is not installed (apt-get install -y acl): the POSIX ACL part of this test is skipped")
            return false
        }
        #expect(scratch.shell("setfacl -m u:65534:rwx,g:65534:r,m::rwx \(name)"))
        return true
    }

    func attributeNames(_ fd: Int32) throws -> Set<String> {
        let list = try ExtendedAttributes.list(fd).map { UInt8(bitPattern: $0) }
        return Set(list.split(separator: 0).map { String(decoding: $0, as: UTF8.self) })
    }

    func expectSameMetadata(_ name: String, _ temp: Int32, aclSet: Bool) throws {
        let source = try Syscall.openAt(scratch.raw, name, O_RDONLY)
        let original = try Syscall.stat(source.raw)
        let copy = try Syscall.stat(temp)
        #expect(copy.st_mode & 0o7777 == original.st_mode & 0o7777)
        #expect(copy.st_mode & S_ISGID != 0)
        if isRoot {
            #expect(copy.st_uid == 65534)
            #expect(copy.st_gid == 65534)
        }
        #expect(try attributeNames(temp) == attributeNames(source.raw))
        for key in ["user.alpha", "user.empty", "user.binary", "user.large"] + (isRoot ? ["trusted.coordfs-test"] : []) {
            let value = try ExtendedAttributes.value(of: source.raw, Array(key.utf8CString))
            #expect(try ExtendedAttributes.value(of: temp, Array(key.utf8CString)) == value, "\(key)")
        }
        let acl = Array(MetadataCopy.accessACL.utf8CString)
        if aclSet {
            let value = try ExtendedAttributes.value(of: source.raw, acl)
            #expect(!value.isEmpty)
            #expect(try ExtendedAttributes.value(of: temp, acl) == value)
        }
    }

    @Test(arguments: [true, false])
    func copyCarriesModeOwnerExtendedAttributesAndACL(unnamed: Bool) throws {
        try scratch.write("file", Array("contents".utf8))
        let aclSet = try decorate("file")
        let staged = try stageCopy(of: "file", unnamed: unnamed)
        try expectKind(staged, unnamed: unnamed)
        try expectSameMetadata("file", staged.descriptor.raw, aclSet: aclSet)
        #expect(try ScratchDirectory.readAll(staged.descriptor.raw) == Array("contents".utf8))
    }

    /// What an open with O_TRUNC stages: an empty file with the target's metadata.
    @Test(arguments: [true, false])
    func truncatingStageStartsEmptyButKeepsMetadata(unnamed: Bool) throws {
        try scratch.write("file", randomBytes(50000))
        let aclSet = try decorate("file")
        let staged = try stageCopy(of: "file", copyContents: false, unnamed: unnamed)
        #expect(try Syscall.stat(staged.descriptor.raw).st_size == 0)
        try expectSameMetadata("file", staged.descriptor.raw, aclSet: aclSet)
        #expect(try scratch.status("file").st_size == 50000)
    }

    /// The node table holds files as O_PATH descriptors: enough for a truncating stage
    /// (metadata only; extended attributes are read through /proc/self/fd), not for a copy.
    @Test func pathDescriptorTargetForTruncatingStage() throws {
        try scratch.write("file", randomBytes(100))
        let aclSet = try decorate("file")
        let target = try Syscall.openAt(scratch.raw, "file", Linux.O_PATH)
        let staged = try StagedFile.stage(in: scratch.raw, replacing: target.raw, copyContents: false, owner: nil, mode: 0)
        try expectSameMetadata("file", staged.descriptor.raw, aclSet: aclSet)
        #expect(throws: Errno(rawValue: EBADF)) {
            _ = try StagedFile.stage(in: self.scratch.raw, replacing: target.raw, copyContents: true, owner: nil, mode: 0)
        }
        #expect(try temps().isEmpty)
        #expect(try scratch.names() == ["file"])
    }

    /// A default ACL on the directory hands the temp an access ACL at creation; a target
    /// without an ACL must not gain one by being saved.
    @Test(arguments: [true, false])
    func inheritedACLIsNotAddedToATargetWithout(unnamed: Bool) throws {
        guard system("command -v setfacl >/dev/null") == 0 else {
            print("setfacl is not installed (apt-get install -y acl): skipped")
            return
        }
        try scratch.write("plain", Array("x".utf8))
        #expect(scratch.shell("chmod 640 plain && setfacl -d -m u:65534:rwx .")) // after the file exists
        let staged = try stageCopy(of: "plain", unnamed: unnamed)
        try expectKind(staged, unnamed: unnamed)
        #expect(!MetadataCopy.hasAttribute(staged.descriptor.raw, MetadataCopy.accessACL))
        #expect(try Syscall.stat(staged.descriptor.raw).st_mode & 0o7777 == 0o640)
    }

    /// The mode asked less the creating thread's umask (which `withCreationMask` sets for
    /// this thread alone, and puts back), set-id bits kept.
    @Test(arguments: [true, false])
    func newFileGetsTheModeAndOwnerAsked(unnamed: Bool) throws {
        let owner: (uid_t, gid_t)? = isRoot ? (65534, 65534) : nil
        let processMask = try readUmask()
        var duringOnThisThread: String?
        var duringOnTheMainThread: String?
        let staged = try Syscall.withCreationMask(0o027, mode: S_IFREG | 0o2667) { (mode) throws(Errno) in
            duringOnThisThread = try? readUmask()
            duringOnTheMainThread = try? readUmask("/proc/self/status")
            return try StagedFile.stage(in: scratch.raw, replacing: nil, copyContents: false, owner: owner, mode: mode, unnamed: unnamed)
        }
        try expectKind(staged, unnamed: unnamed)
        #expect(duringOnThisThread == "Umask:\t0027")
        if !Thread.isMainThread { #expect(duringOnTheMainThread == processMask) }
        #expect(try readUmask() == processMask)
        let status = try Syscall.stat(staged.descriptor.raw)
        #expect(status.st_mode & 0o7777 == 0o2640)
        #expect(status.st_size == 0)
        if isRoot {
            #expect(status.st_uid == 65534)
            #expect(status.st_gid == 65534)
        } else {
            #expect(status.st_uid == geteuid())
        }
    }

    /// A thread's umask line, by default this thread's, from /proc (umask(2) cannot read it
    /// without setting it).
    private func readUmask(_ statusFile: String = "/proc/thread-self/status") throws -> String {
        let status = try String(contentsOfFile: statusFile, encoding: .utf8)
        return try #require(status.split(separator: "\n").first { $0.hasPrefix("Umask:") }.map(String.init))
    }

    /// In a directory with a default ACL, the ACL (not the mode asked, not the umask) decides
    /// the permission bits of a new file, as on a plain disk, and the file inherits it as an
    /// access ACL, whether it starts unnamed or named.
    @Test(arguments: [true, false])
    func newFileInADirectoryWithDefaultACLFollowsIt(unnamed: Bool) throws {
        guard system("command -v setfacl >/dev/null") == 0 else {
            print("setfacl is not installed (apt-get install -y acl): skipped")
            return
        }
        #expect(scratch.shell("mkdir d && setfacl -d -m u::rw,g::r,o::-,u:65534:r d"))
        let directory = try Syscall.openAt(scratch.raw, "d", Linux.O_PATH | O_DIRECTORY) // as the node table holds it
        let staged = try StagedFile.stage(in: directory.raw, replacing: nil, copyContents: false, owner: nil, mode: 0o666, unnamed: unnamed)
        try expectKind(staged, unnamed: unnamed)
        let plain = try Syscall.openAt(directory.raw, "plain", O_RDWR | O_CREAT | O_EXCL, 0o666)
        #expect(try Syscall.stat(staged.descriptor.raw).st_mode & 0o7777 == (try Syscall.stat(plain.raw).st_mode & 0o7777))
        #expect(try Syscall.stat(staged.descriptor.raw).st_mode & 0o7777 == 0o640)
        #expect(MetadataCopy.hasAttribute(staged.descriptor.raw, MetadataCopy.accessACL))
        let acl = Array(MetadataCopy.accessACL.utf8CString)
        #expect(try ExtendedAttributes.value(of: staged.descriptor.raw, acl) == ExtendedAttributes.value(of: plain.raw, acl))
    }

    @Test func nameCollisionDrawsAgain() throws {
        let taken = StagingName.make(random: 42)
        try scratch.write(taken, Array("someone else's".utf8))
        var drawn: [FileName] = []
        let staged = try StagedFile.createNamed(in: scratch.raw, mode: 0o600) {
            let name = drawn.isEmpty ? taken : StagingName.make()
            drawn.append(name)
            return name
        }
        #expect(drawn.count == 2)
        #expect(staged.name == drawn[1])
        #expect(try scratch.read("\(taken)") == Array("someone else's".utf8))

        // The name an unnamed temp commits under draws again the same way.
        let unnamed = try StagedFile.stage(in: scratch.raw, replacing: nil, copyContents: false, owner: nil, mode: 0o600)
        drawn = []
        let linked = try unnamed.linkUnderStagingName(in: scratch.raw) {
            let name = drawn.isEmpty ? taken : StagingName.make()
            drawn.append(name)
            return name
        }
        #expect(drawn.count == 2 && linked == drawn[1])
        #expect(FileIdentity(try scratch.status(linked)) == FileIdentity(try Syscall.stat(unnamed.descriptor.raw)))
        #expect(try scratch.read("\(taken)") == Array("someone else's".utf8))
    }

    // MARK: Commit and discard

    @Test(arguments: Durability.allCases, [true, false])
    func commitReplacesTheTargetAtomically(durability: Durability, unnamed: Bool) throws {
        try scratch.write("doc.txt", Array("old version".utf8))
        let reader = try Syscall.openAt(scratch.raw, "doc.txt", O_RDONLY)
        let staged = try stageCopy(of: "doc.txt", unnamed: unnamed)
        try Syscall.truncate(staged.descriptor.raw, 0)
        try scratch.write(staged.descriptor.raw, Array("the new version".utf8))
        // Before the commit everyone sees the old version.
        #expect(try scratch.read("doc.txt") == Array("old version".utf8))

        let result = try staged.commit(in: scratch.raw, as: "doc.txt", replacingExistingFile: true, durability: durability)
        #expect(result == nil)
        #expect(try scratch.read("doc.txt") == Array("the new version".utf8))
        // A descriptor opened on the old file still reads the old contents: it was replaced, not rewritten.
        #expect(try ScratchDirectory.readAll(reader.raw) == Array("old version".utf8))
        #expect(FileIdentity(try scratch.status("doc.txt")) == FileIdentity(try Syscall.stat(staged.descriptor.raw)))
        #expect(try temps().isEmpty)
        #expect(try scratch.names() == ["doc.txt"])
    }

    /// A new file's temp becomes the file itself: an unnamed one is linked to its name (the
    /// same inode, one link), a named one renamed.
    @Test(arguments: Durability.allCases, [true, false])
    func commitOfANewFileCreatesIt(durability: Durability, unnamed: Bool) throws {
        let directory = try Syscall.openAt(scratch.raw, ".", Linux.O_PATH | O_DIRECTORY) // fsync must reopen it
        let staged = try StagedFile.stage(in: directory.raw, replacing: nil, copyContents: false, owner: nil, mode: 0o644, unnamed: unnamed)
        try expectKind(staged, unnamed: unnamed)
        try scratch.write(staged.descriptor.raw, Array("fresh".utf8))
        #expect(!scratch.exists("new.txt"))
        #expect(try scratch.names() == Set(expectedTemps(staged)))
        #expect(try staged.commit(in: directory.raw, as: "new.txt", replacingExistingFile: false, durability: durability) == nil)
        #expect(try scratch.read("new.txt") == Array("fresh".utf8))
        #expect(try scratch.status("new.txt").st_mode & 0o7777 == 0o644)
        #expect(FileIdentity(try scratch.status("new.txt")) == FileIdentity(try Syscall.stat(staged.descriptor.raw)))
        #expect(try Syscall.stat(staged.descriptor.raw).st_nlink == 1)
        #expect(try scratch.names() == ["new.txt"])
    }

    /// A new file's name that appeared meanwhile (behind the mount, or the creator renamed its
    /// pending file over another) is replaced, as the rename a named temp commits with would:
    /// through a staging name, which is gone afterwards.
    @Test(arguments: [true, false])
    func commitOfANewFileOverANameThatAppeared(unnamed: Bool) throws {
        let staged = try StagedFile.stage(in: scratch.raw, replacing: nil, copyContents: false, owner: nil, mode: 0o600, unnamed: unnamed)
        try scratch.write(staged.descriptor.raw, Array("mine".utf8))
        try scratch.write("new.txt", Array("someone else's".utf8))
        #expect(try staged.commit(in: scratch.raw, as: "new.txt", replacingExistingFile: false, durability: .none) == nil)
        #expect(try scratch.read("new.txt") == Array("mine".utf8))
        #expect(try scratch.names() == ["new.txt"])
    }

    /// Staging leaves the directory alone (an unnamed temp adds no name; a named one puts the
    /// time back), and so does a commit that replaces a file, as a save on a plain disk does;
    /// a new file changes it.
    @Test(arguments: [true, false])
    func savesLeaveTheDirectoryTimeAlone(unnamed: Bool) throws {
        try scratch.write("doc.txt", Array("old".utf8))
        #expect(scratch.shell("touch -d 2001-02-03 ."))
        func directoryTime() throws -> [Int] {
            let time = try Syscall.stat(scratch.raw).st_mtim
            return [time.tv_sec, time.tv_nsec]
        }
        let before = try directoryTime()
        let staged = try stageCopy(of: "doc.txt", unnamed: unnamed)
        #expect(try directoryTime() == before)
        try scratch.write(staged.descriptor.raw, Array("new".utf8))
        try staged.commit(in: scratch.raw, as: "doc.txt", replacingExistingFile: true, durability: .none)
        #expect(try directoryTime() == before)
        #expect(try scratch.read("doc.txt") == Array("new".utf8))

        let discarded = try stageCopy(of: "doc.txt", unnamed: unnamed)
        discarded.discard(in: scratch.raw)
        #expect(try directoryTime() == before)

        let fresh = try StagedFile.stage(in: scratch.raw, replacing: nil, copyContents: false, owner: nil, mode: 0o600, unnamed: unnamed)
        try fresh.commit(in: scratch.raw, as: "fresh.txt", replacingExistingFile: false, durability: .none)
        #expect(try directoryTime() != before)
        #expect(try scratch.names() == ["doc.txt", "fresh.txt"])
    }

    @Test func durabilityNamesAndRecommendation() {
        #expect(Durability.allCases.map(\.rawValue) == ["none", "replacing", "file", "full"])
        #expect(Durability.recommended == .replacing)
        #expect(Durability.replacing.forCommit(replacingExistingFile: true) == .file)
        #expect(Durability.replacing.forCommit(replacingExistingFile: false) == Durability.none)
        #expect(Durability.full.forCommit(replacingExistingFile: false) == .full)
        #expect(!Durability.none.syncsFile && !Durability.none.syncsDirectory)
        #expect(Durability.file.syncsFile && !Durability.file.syncsDirectory)
        #expect(Durability.full.syncsFile && Durability.full.syncsDirectory)
    }

    /// The target was renamed meanwhile (by its owner): the commit goes where it is told.
    @Test func commitUnderTheNameGivenAtCommitTime() throws {
        try scratch.write("before", Array("v1".utf8))
        let staged = try stageCopy(of: "before")
        #expect(scratch.shell("mv before after"))
        try scratch.write(staged.descriptor.raw, Array("v2".utf8))
        try staged.commit(in: scratch.raw, as: "after", replacingExistingFile: true, durability: .file)
        #expect(try scratch.read("after") == Array("v2".utf8))
        #expect(try scratch.names() == ["after"])
    }

    /// The target moved to another directory: a named temp follows, or commits across; an
    /// unnamed one is in no directory and commits wherever the target is.
    @Test(arguments: [true, false])
    func commitAcrossDirectories(unnamed: Bool) throws {
        #expect(scratch.shell("mkdir a b c"))
        let a = try Syscall.openAt(scratch.raw, "a", O_RDONLY | O_DIRECTORY)
        let b = try Syscall.openAt(scratch.raw, "b", Linux.O_PATH | O_DIRECTORY)
        let c = try Syscall.openAt(scratch.raw, "c", O_RDONLY | O_DIRECTORY)

        let first = try StagedFile.stage(in: a.raw, replacing: nil, copyContents: false, owner: nil, mode: 0o600, unnamed: unnamed)
        try first.move(from: a.raw, to: b.raw)
        #expect(try scratch.names(in: "a").isEmpty)
        #expect(try scratch.names(in: "b") == Set(expectedTemps(first)))
        #expect(try first.commit(in: b.raw, as: "one", replacingExistingFile: false, durability: .full) == nil)

        let second = try StagedFile.stage(in: a.raw, replacing: nil, copyContents: false, owner: nil, mode: 0o600, unnamed: unnamed)
        #expect(try second.commit(from: a.raw, to: c.raw, as: "two", replacingExistingFile: false, durability: .full) == nil)
        #expect(try scratch.names(in: "a").isEmpty)
        #expect(try scratch.names(in: "b") == ["one"])
        #expect(try scratch.names(in: "c") == ["two"])

        // A replacing commit into another directory than the one the temp was staged in.
        let third = try StagedFile.stage(in: a.raw, replacing: nil, copyContents: false, owner: nil, mode: 0o600, unnamed: unnamed)
        try scratch.write(third.descriptor.raw, Array("3".utf8))
        #expect(try third.commit(from: a.raw, to: c.raw, as: "two", replacingExistingFile: true, durability: .full) == nil)
        #expect(try scratch.read("c/two") == Array("3".utf8))
        #expect(try scratch.names(in: "a").isEmpty)
        #expect(try scratch.names(in: "c") == ["two"])
    }

    /// A commit that fails changes nothing: the temp is as it was (unnamed, or under its name)
    /// and can still be discarded, and no staging name stays behind.
    @Test(arguments: [true, false], [true, false])
    func failedCommitLeavesTheTempToDiscard(unnamed: Bool, replacing: Bool) throws {
        #expect(scratch.shell("mkdir target-is-a-directory && touch target-is-a-directory/x"))
        let staged = try StagedFile.stage(in: scratch.raw, replacing: nil, copyContents: false, owner: nil, mode: 0o600, unnamed: unnamed)
        #expect(throws: Errno(rawValue: EISDIR)) {
            try staged.commit(in: scratch.raw, as: "target-is-a-directory", replacingExistingFile: replacing, durability: .file)
        }
        #expect(try temps() == expectedTemps(staged))
        try expectKind(staged, unnamed: unnamed)
        #expect(staged.discard(in: scratch.raw) == nil)
        #expect(try temps().isEmpty)
        #expect(try scratch.names() == ["target-is-a-directory"])
    }

    @Test(arguments: [true, false])
    func discardLeavesTheTargetUntouched(unnamed: Bool) throws {
        try scratch.write("keep", Array("committed".utf8))
        let before = try scratch.status("keep")
        let staged = try stageCopy(of: "keep", unnamed: unnamed)
        try scratch.write(staged.descriptor.raw, Array("uncommitted".utf8))
        #expect(staged.discard(in: scratch.raw) == nil)
        #expect(try scratch.read("keep") == Array("committed".utf8))
        #expect(FileIdentity(try scratch.status("keep")) == FileIdentity(before))
        #expect(try scratch.names() == ["keep"])
        #expect(staged.discard(in: scratch.raw) == nil) // already gone: fine
    }

    // MARK: Unnamed temps and the fallback

    /// While a save is in flight the directory lists nothing but what it held: the temp has no
    /// name until its commit, and none is left after it.
    @Test func unnamedTempLeavesNoTraceUntilCommit() throws {
        try scratch.write("doc.txt", Array("v1".utf8))
        let staged = try stageCopy(of: "doc.txt", copyContents: false)
        try expectKind(staged, unnamed: true)
        try scratch.write(staged.descriptor.raw, Array("v2".utf8))
        #expect(try scratch.names() == ["doc.txt"])
        try staged.commit(in: scratch.raw, as: "doc.txt", replacingExistingFile: true, durability: .none)
        #expect(try scratch.names() == ["doc.txt"])
        #expect(try scratch.read("doc.txt") == Array("v2".utf8))
    }

    /// The mount's staging: unnamed where the filesystem has unnamed files, named when told
    /// (`--named-temps`); what refuses unnamed files is told by its errno.
    @Test func tempStagingChoosesUnnamedWherePossible() throws {
        try scratch.write("doc.txt", Array("v1".utf8))
        let target = try Syscall.openAt(scratch.raw, "doc.txt", O_RDONLY)
        let table = try NodeTable(root: try Syscall.openAt(scratch.raw, ".", Linux.O_PATH | O_DIRECTORY))
        let device = table.root.identity.device
        let staging = TempStaging()
        #expect(staging.mayStageUnnamed(on: device))
        let unnamed = try staging.stage(in: table.root, replacing: target.raw, copyContents: true, owner: nil, mode: 0)
        try expectKind(unnamed, unnamed: true)
        let new = try staging.stage(in: table.root, replacing: nil, copyContents: false, owner: nil, mode: 0o640)
        try expectKind(new, unnamed: true)
        #expect(staging.mayStageUnnamed(on: device))

        let forced = TempStaging(unnamed: false)
        #expect(!forced.mayStageUnnamed(on: device))
        for _ in 0..<3 { // no file is made ahead for named temps
            let named = try forced.stage(in: table.root, replacing: target.raw, copyContents: true, owner: nil, mode: 0)
            try expectKind(named, unnamed: false)
            #expect(try temps() == expectedTemps(named))
            named.discard(in: scratch.raw)
        }
        forced.waitForMaking()
        #expect(forced.readyFiles == 0)
        #expect(try scratch.names() == ["doc.txt"])

        // How a refusal reads: these errnos mean "no unnamed files here", others a failed open.
        for refusal in [EOPNOTSUPP, EISDIR, EINVAL] { #expect(StagedFile.refusesUnnamedFiles(Errno(rawValue: refusal))) }
        for failure in [EACCES, ENOSPC, EDQUOT, EROFS, ENOENT] { #expect(!StagedFile.refusesUnnamedFiles(Errno(rawValue: failure))) }
    }

    /// From the second save of an existing file in a directory on, unnamed files are made ahead
    /// there (two, here), and a save takes one: the same temp a fresh one would be (the
    /// target's contents and metadata, dated now, unnamed), committed the same way. The
    /// directory lists nothing of them, and the pool keeps to its bound, the directory saved
    /// in least recently giving its files up.
    @Test func filesMadeAheadBecomeTheTempsAFreshStageWouldGive() throws {
        let table = try NodeTable(root: try Syscall.openAt(scratch.raw, ".", Linux.O_PATH | O_DIRECTORY))
        try scratch.write("file", randomBytes(20000))
        let aclSet = try decorate("file")
        let staging = TempStaging(perDirectory: 2, capacity: 3)
        func stage(copyContents: Bool = true) throws -> StagedFile {
            let target = try Syscall.openAt(scratch.raw, "file", O_RDONLY)
            return try staging.stage(in: table.root, replacing: target.raw, copyContents: copyContents, owner: nil, mode: 0)
        }
        let first = try stage()
        staging.waitForMaking()
        #expect(staging.readyFiles == 0) // one save is not a pattern yet
        first.discard(in: scratch.raw)
        let second = try stage()
        staging.waitForMaking()
        #expect(staging.readyFiles == 2)
        second.discard(in: scratch.raw)
        #expect(scratch.shell("touch -d 2001-01-01 file"))
        let before = time(nil)
        for copyContents in [true, false] {
            let made = try stage(copyContents: copyContents)
            try expectKind(made, unnamed: true)
            #expect(try Syscall.stat(made.descriptor.raw).st_mtim.tv_sec >= before)
            #expect(try ScratchDirectory.readAll(made.descriptor.raw) == (copyContents ? try scratch.read("file") : []))
            try expectSameMetadata("file", made.descriptor.raw, aclSet: aclSet)
            staging.waitForMaking()
            #expect(staging.readyFiles == 2) // topped up again
            #expect(try scratch.names() == ["file"])
            if !copyContents {
                try scratch.write(made.descriptor.raw, Array("new".utf8))
                try made.commit(in: scratch.raw, as: "file", replacingExistingFile: true, durability: .none)
                #expect(try scratch.read("file") == Array("new".utf8))
                #expect(try scratch.names() == ["file"])
            }
        }

        // Another directory saved in twice: the bound (3) makes the root give its files up.
        #expect(scratch.shell("mkdir d && echo x > d/g"))
        let directory = try Syscall.openAt(scratch.raw, "d", Linux.O_PATH | O_DIRECTORY)
        let node = table.lookUp(try Syscall.statOfPathDescriptor(directory.raw), descriptor: directory, parent: table.root, name: "d")
        let g = try Syscall.openAt(node.directory, "g", O_RDONLY)
        for _ in 0..<2 { _ = try staging.stage(in: node, replacing: g.raw, copyContents: true, owner: nil, mode: 0) }
        staging.waitForMaking()
        #expect(staging.readyFiles == 2)
        #expect(try scratch.names(in: "d") == ["g"])
    }

    /// ext4 starts writing back a file truncated to zero at the next close of an open of it
    /// (`auto_da_alloc`); a temp truncated through `StagedFile.truncate` is spared that: once
    /// written and closed, its data is still waiting for the flusher (delayed allocation), where
    /// the same steps with a plain ftruncate leave it allocated. ext4 only: elsewhere neither
    /// flushes at close.
    @Test(.enabled(if: MountTable.current().mount(ofDevice: UInt64(ScratchDirectory.temporaryDevice))?.filesystemType == "ext4"))
    func truncatedTempIsNotWrittenBackAtClose() throws {
        for (name, quiet) in [("plain", false), ("quiet", true)] {
            try scratch.write(name, randomBytes(8192))
            #expect(scratch.shell("sync \(name)"))
            let file = try Syscall.openAt(scratch.raw, name, O_RDWR)
            if quiet { try StagedFile.truncate(file.raw, to: 0) } else { try Syscall.truncate(file.raw, 0) }
            try scratch.write(file.raw, randomBytes(8192))
        }
        #expect(scratch.shell("filefrag -v quiet | grep -q delalloc"))
        #expect(scratch.shell("! filefrag -v plain | grep -q delalloc"))
    }

    static func reopen(_ descriptor: Int32, _ flags: Int32) throws(Errno) -> OwnedDescriptor {
        let path = "/proc/self/fd/\(descriptor)"
        return try Syscall.openAt(AT_FDCWD, path, flags)
    }

    // MARK: Failures

    /// A full filesystem: the copy fails with ENOSPC and the temp is gone. Root only (it
    /// mounts a 1 MiB tmpfs).
    @Test(.enabled(if: isRoot, "mounting a tmpfs needs root"))
    func fullFilesystemFailsWithENOSPCAndLeavesNoTemp() throws {
        #expect(scratch.shell("mkdir small && mount -t tmpfs -o size=1m tmpfs small"))
        defer { _ = system("umount -l '\(scratch.path)/small'") }
        let small = try Syscall.openAt(scratch.raw, "small", O_RDONLY | O_DIRECTORY)
        let big = try Syscall.openAt(small.raw, "big", O_RDWR | O_CREAT | O_EXCL, 0o644)
        try scratch.write(big.raw, randomBytes(700 << 10))

        // Within the tmpfs: a copy of 700 KiB does not fit beside the original.
        #expect(throws: Errno(rawValue: ENOSPC)) {
            _ = try StagedFile.stage(in: small.raw, replacing: big.raw, copyContents: true, owner: nil, mode: 0)
        }
        #expect(try scratch.names(in: "small") == ["big"])

        // From another filesystem (FICLONE and copy_file_range refuse: reads and writes).
        try scratch.write("outside", randomBytes(2 << 20))
        let outside = try Syscall.openAt(scratch.raw, "outside", O_RDONLY)
        #expect(throws: Errno(rawValue: ENOSPC)) {
            _ = try StagedFile.stage(in: small.raw, replacing: outside.raw, copyContents: true, owner: nil, mode: 0)
        }
        #expect(try scratch.names(in: "small") == ["big"])

        // Without copying, staging still works there, unnamed (tmpfs has unnamed files) or named.
        for unnamed in [true, false] {
            let empty = try StagedFile.stage(in: small.raw, replacing: big.raw, copyContents: false, owner: nil, mode: 0, unnamed: unnamed)
            try expectKind(empty, unnamed: unnamed)
            #expect(try scratch.names(in: "small") == Set(["big"] + expectedTemps(empty)))
            empty.discard(in: small.raw)
            #expect(try scratch.names(in: "small") == ["big"])
        }
    }
}
