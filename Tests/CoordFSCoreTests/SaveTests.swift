import CoordFSTestSupport
import Glibc
import SystemPackage
import Testing
@testable import CoordFSCore

/// Saves driven directly on a scratch directory, without a mount: what the FUSE layer asks of
/// a save (changes, the owner's view, commits, discards, renames, failures), with unnamed temps
/// and with named ones, and what the backing holds after each.
@Suite struct SaveTests {
    @Test(arguments: [true, false])
    func commitReplacesTheFileAndTheNodesBacking(unnamed: Bool) throws {
        let fixture = try SaveFixture(unnamed: unnamed)
        try fixture.scratch.write("doc", Array("version 1".utf8))
        let (node, save) = try fixture.save(of: "doc")
        let before = node.identity
        #expect(!save.hasUncommittedChanges)
        #expect(try fixture.commit(save) == nil, "nothing to commit before a change")

        try fixture.write(save, Array("version 2, longer".utf8))
        #expect(save.hasUncommittedChanges)
        let report = try #require(try fixture.commit(save, durability: .full))
        #expect(!report.created)
        #expect(report.path?.description == "/doc")
        #expect(report.size == Int64("version 2, longer".utf8.count))
        #expect(report.replaced?.identity == before, "the report hands over the replaced file")
        #expect(try fixture.scratch.read("doc") == Array("version 2, longer".utf8))
        let after = FileIdentity(try fixture.scratch.status("doc"))
        #expect(after != before)
        #expect(node.identity == after, "the node stands for the committed file")
        #expect(!save.hasUncommittedChanges)
        #expect(try fixture.commit(save) == nil)
        #expect(try fixture.scratch.names() == ["doc"], "no temp left behind")

        // A change after a commit stages again, from the committed version.
        try fixture.write(save, Array("V".utf8))
        #expect(try fixture.scratch.read("doc") == Array("version 2, longer".utf8))
        _ = try #require(try fixture.commit(save))
        #expect(try fixture.scratch.read("doc") == Array("Version 2, longer".utf8))
        #expect(try fixture.scratch.names() == ["doc"])
    }

    /// A file created through the mount: the node stands for the temp from the start, the
    /// name appears at the first commit, and the node keeps its identity through it.
    @Test(arguments: [true, false])
    func firstCommitOfANewFileCreatesIt(unnamed: Bool) throws {
        let fixture = try SaveFixture(unnamed: unnamed)
        let (node, save) = try fixture.creatingSave(named: "new")
        let identity = node.identity
        #expect(!save.target.exists)
        #expect(save.hasUncommittedChanges, "the temp is the new file's content")
        try fixture.write(save, Array("fresh".utf8))
        #expect(!fixture.scratch.exists("new"))
        #expect(try fixture.scratch.names().count == (unnamed ? 0 : 1), "only a named temp shows, under its hidden name")

        let report = try #require(try fixture.commit(save))
        #expect(report.created)
        #expect(report.path?.description == "/new")
        #expect(report.size == 5)
        #expect(report.replaced == nil)
        #expect(save.target.exists)
        #expect(try fixture.scratch.read("new") == Array("fresh".utf8))
        #expect(FileIdentity(try fixture.scratch.status("new")) == identity)
        #expect(node.identity == identity)
        #expect(try fixture.scratch.names() == ["new"])

        // The next commit replaces the file it created, as for any existing file.
        try fixture.write(save, Array("F".utf8))
        let second = try #require(try fixture.commit(save))
        #expect(!second.created)
        #expect(try fixture.scratch.read("new") == Array("Fresh".utf8))
    }

    /// The owner reads and stats its uncommitted version; the committed file is untouched.
    @Test(arguments: [true, false])
    func ownerSeesUncommittedWrites(unnamed: Bool) throws {
        let fixture = try SaveFixture(unnamed: unnamed)
        try fixture.scratch.write("doc", Array("hello world".utf8))
        let (_, save) = try fixture.save(of: "doc")
        #expect(try ScratchDirectory.readAll(save.current.raw) == Array("hello world".utf8))

        try save.truncate(to: 5)
        try fixture.write(save, Array("!".utf8), at: 5)
        #expect(try ScratchDirectory.readAll(save.current.raw) == Array("hello!".utf8))
        let status = try save.currentStatus()
        #expect(status.st_size == 6)
        #expect(status.st_nlink == 1, "a temp shows the link its commit gives it")
        #expect(try fixture.scratch.read("doc") == Array("hello world".utf8))
        #expect(try fixture.scratch.status("doc").st_size == 11)

        // A truncation to zero stages an empty temp (no copy) the owner then writes.
        let (_, other) = try fixture.save(of: "doc")
        try other.truncate(to: 0)
        #expect(try other.currentStatus().st_size == 0)
        #expect(try fixture.scratch.read("doc") == Array("hello world".utf8))
    }

    @Test func shownToOwnerGivesAnUnnamedTempItsLink() {
        var status = stat()
        status.st_nlink = 0
        #expect(Save.shownToOwner(status).st_nlink == 1)
        status.st_nlink = 3
        #expect(Save.shownToOwner(status).st_nlink == 3)
    }

    /// The owner unlinked the file: nothing commits, the name never comes back, and later
    /// changes go to the unlinked file, which the owner sees as it is.
    @Test(arguments: [true, false])
    func discardedSaveCommitsNothing(unnamed: Bool) throws {
        let fixture = try SaveFixture(unnamed: unnamed)
        try fixture.scratch.write("doc", Array("kept?".utf8))
        let (node, save) = try fixture.save(of: "doc")
        try fixture.write(save, Array("lost".utf8))
        #expect(fixture.scratch.shell("rm doc"))
        _ = fixture.table.removedName("doc", in: fixture.table.root)
        #expect(fixture.table.isUnlinked(node))
        save.discard()
        #expect(!save.hasUncommittedChanges)
        #expect(try fixture.commit(save) == nil)
        #expect(try fixture.scratch.names() == [])

        try fixture.write(save, Array("L".utf8))
        #expect(try ScratchDirectory.readAll(save.current.raw) == Array("Lost?".utf8))
        #expect(try save.currentStatus().st_nlink == 0, "a discarded save shows its file as it is")
        #expect(try fixture.commit(save) == nil)
        #expect(try fixture.scratch.names() == [])
    }

    /// A change that fails (ENOSPC, EIO) fails the save: later changes and the commit throw
    /// its error, and at the save's end the temp goes while the committed file stays.
    @Test(arguments: [true, false])
    func failedChangeFailsTheSave(unnamed: Bool) throws {
        let fixture = try SaveFixture(unnamed: unnamed)
        try fixture.scratch.write("doc", Array("safe".utf8))
        let (_, save) = try fixture.save(of: "doc")
        save.addWriter()
        #expect(throws: Errno.noSpace) {
            try save.change() { (_) throws(Errno) in throw Errno.noSpace }
        }
        #expect(save.hasFailed)
        var ran = false
        #expect(throws: Errno.noSpace) {
            try save.change() { (_) throws(Errno) in ran = true }
        }
        #expect(!ran, "a failed save runs no change")
        #expect(throws: Errno.noSpace) { try fixture.commit(save) }

        save.discardIfFailed()
        #expect(save.hasUncommittedChanges, "a writer is still open: the temp stays until the end")
        #expect(save.removeWriter())
        save.discardIfFailed()
        #expect(!save.hasUncommittedChanges)
        #expect(try fixture.scratch.read("doc") == Array("safe".utf8))
        #expect(try fixture.scratch.names() == ["doc"])
        #expect(throws: Errno.noSpace) { try fixture.commit(save) }
    }

    /// A save of a file that is not failed keeps its temp at the end (the last writer commits it).
    @Test func discardIfFailedSparesAHealthySave() throws {
        let fixture = try SaveFixture(unnamed: true)
        try fixture.scratch.write("doc", Array("one".utf8))
        let (_, save) = try fixture.save(of: "doc")
        try fixture.write(save, Array("two".utf8))
        save.discardIfFailed()
        #expect(save.hasUncommittedChanges)
        _ = try #require(try fixture.commit(save))
        #expect(try fixture.scratch.read("doc") == Array("two".utf8))
    }

    /// The owner renamed the file into another directory: the commit goes to the new name.
    @Test(arguments: [true, false])
    func retargetedSaveCommitsToTheNewName(unnamed: Bool) throws {
        let fixture = try SaveFixture(unnamed: unnamed)
        #expect(fixture.scratch.shell("mkdir d && printf old > doc"))
        let directory = try fixture.lookUp("d")
        let (node, save) = try fixture.save(of: "doc")
        try fixture.write(save, Array("new".utf8))
        #expect(fixture.scratch.shell("mv doc d/moved"))
        fixture.table.moved(node, to: directory, name: "moved")
        save.retarget(directory: directory, name: "moved")
        #expect(save.target.name == "moved")
        #expect(save.target.directory === directory)

        let report = try #require(try fixture.commit(save))
        #expect(report.path?.description == "/d/moved")
        #expect(try fixture.scratch.read("d/moved") == Array("new".utf8))
        #expect(try fixture.scratch.names() == ["d"])
        #expect(try fixture.scratch.names(in: "d") == ["moved"], "a named temp moved with its target")
    }

    /// The owner removed the save's name (unlink, or another file renamed over it) while
    /// another hard link keeps the file: the commit writes into the file itself, which the
    /// remaining link shows, and neither brings the name back nor replaces what is there now.
    @Test(arguments: [true, false])
    func saveWithoutItsNameCommitsIntoTheFile(unnamed: Bool) throws {
        let fixture = try SaveFixture(unnamed: unnamed)
        #expect(fixture.scratch.shell("printf 'first version' > a && ln a b"))
        let (node, save) = try fixture.save(of: "a")
        let identity = node.identity
        try fixture.write(save, Array("final".utf8))
        _ = try fixture.lookUp("b") // the mount learns the other name
        #expect(fixture.scratch.shell("rm a"))
        fixture.removedThroughMount("a", of: save)
        #expect(!fixture.table.isUnlinked(node))

        let report = try #require(try fixture.commit(save))
        #expect(!report.created)
        #expect(report.replaced == nil)
        #expect(report.path?.description == "/b")
        #expect(report.size == Int64("final version".utf8.count))
        #expect(try fixture.scratch.read("b") == Array("final version".utf8))
        #expect(FileIdentity(try fixture.scratch.status("b")) == identity, "the file itself, not a replacement")
        #expect(node.identity == identity)
        #expect(try fixture.scratch.names() == ["b"])
        #expect(try ScratchDirectory.readAll(save.current.raw) == Array("final version".utf8))

        // Another file renamed over the save's name: it stays, the save's file gets the commit.
        #expect(fixture.scratch.shell("printf other > c && mv c a && ln b a2"))
        let (linked, again) = try fixture.save(of: "a2")
        try fixture.write(again, Array("third".utf8))
        #expect(fixture.scratch.shell("printf someone-else > d && mv d a2"))
        fixture.removedThroughMount("a2", of: again)
        _ = try #require(try fixture.commit(again))
        #expect(linked === node)
        #expect(try fixture.scratch.read("b") == Array("third version".utf8))
        #expect(try fixture.scratch.read("a2") == Array("someone-else".utf8))
        #expect(try fixture.scratch.read("a") == Array("other".utf8))
    }

    /// A file whose owner removed its last name through the mount has nowhere to go: the
    /// commit drops its changes.
    @Test func saveOfAFileWithNoNameLeftCommitsNothing() throws {
        let fixture = try SaveFixture(unnamed: true)
        try fixture.scratch.write("solo", Array("v1".utf8))
        let (_, save) = try fixture.save(of: "solo")
        try fixture.write(save, Array("v2".utf8))
        #expect(fixture.scratch.shell("rm solo"))
        fixture.removedThroughMount("solo", of: save)
        #expect(try fixture.commit(save) == nil)
        #expect(try fixture.scratch.names() == [])
    }

    /// The last writer's release commits only if no writer joined meanwhile: that one
    /// commits at its own close.
    @Test func commitWithoutWritersWaitsForTheLastWriter() throws {
        let fixture = try SaveFixture(unnamed: true)
        try fixture.scratch.write("doc", Array("old".utf8))
        let (_, save) = try fixture.save(of: "doc")
        save.addWriter()
        save.addWriter()
        try fixture.write(save, Array("new".utf8))
        #expect(!save.removeWriter())
        #expect(try fixture.commit(save, onlyWithoutWriters: true) == nil)
        #expect(save.hasUncommittedChanges)
        #expect(try fixture.scratch.read("doc") == Array("old".utf8))
        #expect(save.removeWriter())
        #expect(save.hasNoWriters)
        let report = try #require(try fixture.commit(save, onlyWithoutWriters: true))
        #expect(report.size == 3)
        #expect(try fixture.scratch.read("doc") == Array("new".utf8))
    }

    // MARK: Changes made behind the mount

    /// Someone wrote the committed file in place, behind the mount, while an O_TRUNC save was
    /// open (the same size: only its change time tells): the commit goes ahead, and the version
    /// found is kept beside it, by a hard link under a conflict name that keeps the extension.
    @Test(arguments: [true, false])
    func outsideWriteInPlaceKeepsBothVersions(unnamed: Bool) throws {
        let fixture = try SaveFixture(unnamed: unnamed)
        try fixture.scratch.write("notes.txt", Array("version 1".utf8))
        let (node, save) = try fixture.save(of: "notes.txt")
        let committed = node.identity
        try save.truncate(to: 0)
        try fixture.write(save, Array("mine".utf8))
        waitForCoarseClock(toPass: try fixture.scratch.status("notes.txt").st_ctim) // a change time of its own, on any kernel
        let outside = try Syscall.openAt(fixture.scratch.raw, "notes.txt", O_WRONLY)
        try fixture.scratch.write(outside.raw, Array("VERSION 1".utf8))

        let report = try #require(try fixture.commit(save))
        let conflict = try #require(report.conflict)
        let kept = try #require(conflict.name.string)
        #expect(!report.created)
        #expect(report.path?.description == "/notes.txt")
        #expect(kept.hasPrefix("notes.conflict-") && kept.hasSuffix(".txt") && kept.utf8.count == "notes.conflict-20261124-221500.txt".utf8.count)
        #expect(conflict.directory === fixture.table.root)
        #expect(conflict.path == MountPath.root.appending(conflict.name))
        #expect(try fixture.scratch.read("notes.txt") == Array("mine".utf8))
        #expect(try fixture.scratch.read(kept) == Array("VERSION 1".utf8))
        #expect(FileIdentity(try fixture.scratch.status(kept)) == committed, "a link to the file found, not a copy")
        #expect(try fixture.scratch.names() == ["notes.txt", conflict.name], "nothing else appeared")
    }

    /// Someone renamed another file over the committed one behind the mount: that file is kept
    /// under the conflict name (no extension to keep here), the save's version takes the name.
    @Test(arguments: [true, false])
    func outsideReplaceByRenameKeepsBothVersions(unnamed: Bool) throws {
        let fixture = try SaveFixture(unnamed: unnamed)
        try fixture.scratch.write("doc", Array("old".utf8))
        let (_, save) = try fixture.save(of: "doc")
        try fixture.write(save, Array("mine".utf8))
        #expect(fixture.scratch.shell("printf theirs > new && mv new doc"))
        let theirs = FileIdentity(try fixture.scratch.status("doc"))

        let report = try #require(try fixture.commit(save))
        let conflict = try #require(report.conflict)
        let kept = try #require(conflict.name.string)
        #expect(!report.created)
        #expect(kept.hasPrefix("doc.conflict-") && kept.utf8.count == "doc.conflict-20261124-221500".utf8.count)
        #expect(try fixture.scratch.read("doc") == Array("mine".utf8))
        #expect(try fixture.scratch.read(kept) == Array("theirs".utf8))
        #expect(FileIdentity(try fixture.scratch.status(kept)) == theirs)
        #expect(try fixture.scratch.names() == ["doc", conflict.name])
    }

    /// A chmod behind the mount changes no byte, but it is a change all the same: kept.
    @Test func outsideChmodIsAChangeToo() throws {
        let fixture = try SaveFixture(unnamed: true)
        try fixture.scratch.write("doc", Array("old".utf8))
        let (_, save) = try fixture.save(of: "doc")
        try fixture.write(save, Array("new".utf8))
        waitForCoarseClock(toPass: try fixture.scratch.status("doc").st_ctim)
        #expect(fixture.scratch.shell("chmod 600 doc"))
        let report = try #require(try fixture.commit(save))
        let kept = try #require(report.conflict?.name)
        #expect(try fixture.scratch.status(kept).st_mode & 0o777 == 0o600)
        #expect(try fixture.scratch.status("doc").st_mode & 0o777 == 0o644, "the save's version, with the mode it staged with")
        #expect(try fixture.scratch.read("doc") == Array("new".utf8))
    }

    /// Deleted behind the mount: there is no other version to keep, and the commit makes the
    /// name again, as a new file (a `created` event, after the outside `deleted`).
    @Test(arguments: [true, false])
    func outsideDeletionIsCommittedAsANewFile(unnamed: Bool) throws {
        let fixture = try SaveFixture(unnamed: unnamed)
        try fixture.scratch.write("doc", Array("old".utf8))
        let (node, save) = try fixture.save(of: "doc")
        try fixture.write(save, Array("mine".utf8))
        #expect(fixture.scratch.shell("rm doc"))

        let report = try #require(try fixture.commit(save))
        #expect(report.created)
        #expect(report.conflict == nil)
        #expect(try fixture.scratch.read("doc") == Array("mine".utf8))
        #expect(node.identity == FileIdentity(try fixture.scratch.status("doc")))
        #expect(try fixture.scratch.names() == ["doc"])
    }

    /// Changes the mount itself made to the committed file while the save was open move its
    /// change time too (a hard link made and removed through the mount, the owner's rename):
    /// they are no conflict. Without the notices, each of them would be taken for one.
    @Test(arguments: [true, false])
    func changesThroughTheMountAreNoConflict(unnamed: Bool) throws {
        let fixture = try SaveFixture(unnamed: unnamed)
        try fixture.scratch.write("doc", Array("old".utf8))
        let (node, save) = try fixture.save(of: "doc")
        try fixture.write(save, Array("one".utf8))
        let first = try #require(try fixture.commit(save))
        #expect(first.conflict == nil)
        #expect(try fixture.scratch.names() == ["doc"])

        try fixture.write(save, Array("two".utf8))
        #expect(fixture.scratch.shell("ln doc other"))
        save.committedFileChangedThroughMount()
        _ = try fixture.lookUp("other") // the kernel looks a name up before it removes it
        #expect(fixture.scratch.shell("rm other"))
        fixture.removedThroughMount("other", of: save)
        #expect(fixture.scratch.shell("mv doc renamed"))
        fixture.table.moved(node, to: fixture.table.root, name: "renamed")
        save.retarget(directory: fixture.table.root, name: "renamed")
        let second = try #require(try fixture.commit(save))
        #expect(second.conflict == nil)
        #expect(try fixture.scratch.read("renamed") == Array("two".utf8))
        #expect(try fixture.scratch.names() == ["renamed"])

        // The same hard link made without the notice is taken for a change behind the mount.
        try fixture.write(save, Array("three".utf8))
        waitForCoarseClock(toPass: try fixture.scratch.status("renamed").st_ctim)
        #expect(fixture.scratch.shell("ln renamed other"))
        let third = try #require(try fixture.commit(save))
        #expect(third.conflict != nil)
    }

    @Test func conflictNamesKeepTheExtensionAndAreNeverReserved() throws {
        let time: time_t = 1_795_558_500 // 2026-11-24 22:15:00 UTC
        #expect(ConflictName.make(for: "notes.txt", at: time) == "notes.conflict-20261124-221500.txt")
        #expect(ConflictName.make(for: "notes.txt", at: time, attempt: 3) == "notes.conflict-20261124-221500-3.txt")
        #expect(ConflictName.make(for: "archive.tar.gz", at: time) == "archive.tar.conflict-20261124-221500.gz")
        #expect(ConflictName.make(for: "Makefile", at: time) == "Makefile.conflict-20261124-221500")
        #expect(ConflictName.make(for: ".bashrc", at: time) == ".bashrc.conflict-20261124-221500")
        #expect(ConflictName.make(for: "odd.", at: time) == "odd..conflict-20261124-221500")
        #expect(ConflictName.make(for: FileName([0xFF, 0x2E, 0x74])!, at: time).bytes
                == [0xFF] + Array(".conflict-20261124-221500.t".utf8), "bytes, not text")

        // Too long for NAME_MAX: the stem is cut, not inside a UTF-8 sequence, the extension stays.
        let long = name(String(repeating: "é", count: 127) + ".md") // 254 + 3 bytes
        let shortened = ConflictName.make(for: long, at: time, attempt: 12)
        #expect(shortened.count <= 255)
        let text = try #require(shortened.string, "still valid UTF-8")
        #expect(text.hasSuffix(".conflict-20261124-221500-12.md") && text.hasPrefix("éé"))

        for made in [ConflictName.make(for: ".coordfs-tmp-0123456789abcdef", at: time),
                     ConflictName.make(for: ".coordfs-recovery", at: time), shortened] {
            #expect(!StagingName.isReserved(name: made, inRoot: true))
        }
    }

    /// A conflict name already taken gets the next counter: nothing in the backing is replaced.
    @Test func keepingDrawsTheNextFreeName() throws {
        let fixture = try SaveFixture(unnamed: true)
        let time: time_t = 1_795_558_500
        try fixture.scratch.write("doc", Array("theirs".utf8))
        try fixture.scratch.write(ConflictName.make(for: "doc", at: time), Array("earlier".utf8))
        let kept = try ConflictName.keep("doc", in: fixture.scratch.raw, at: time)
        #expect(kept == "doc.conflict-20261124-221500-2")
        #expect(try fixture.scratch.read("doc.conflict-20261124-221500") == Array("earlier".utf8))
        #expect(try fixture.scratch.read("doc.conflict-20261124-221500-2") == Array("theirs".utf8))
        #expect(throws: Errno.noSuchFileOrDirectory) { try ConflictName.keep("gone", in: fixture.scratch.raw, at: time) }
    }
}

/// A node table over a scratch directory, and saves of its files as the FUSE layer makes them.
final class SaveFixture {
    let scratch: ScratchDirectory
    let table: NodeTable
    let staging: TempStaging
    let owner = ClaimOwner.process(4242)

    init(unnamed: Bool) throws {
        scratch = try ScratchDirectory("saves")
        table = try NodeTable(root: try Syscall.openAt(scratch.raw, ".", Linux.O_PATH | O_DIRECTORY))
        staging = TempStaging(unnamed: unnamed)
    }

    /// Opens the object behind a descriptor afresh, as the mount does through /proc/self/fd.
    static func reopen(_ descriptor: Int32, _ flags: Int32) throws(Errno) -> OwnedDescriptor {
        try StagingTests.reopen(descriptor, flags)
    }

    /// What the FUSE layer does on lookup: open O_PATH, stat, register.
    func lookUp(_ name: FileName, in parent: Node? = nil) throws -> Node {
        let parent = parent ?? table.root
        let descriptor = try Syscall.openAt(parent.directory, name, Linux.O_PATH | O_NOFOLLOW)
        let status = try Syscall.statOfPathDescriptor(descriptor.raw)
        return table.lookUp(status, descriptor: descriptor, parent: parent, name: name)
    }

    /// A save of an existing file in the top directory, reading the committed file until its first change.
    func save(of name: FileName) throws -> (Node, Save) {
        let node = try lookUp(name)
        let committed = try node.withDescriptor { (descriptor) throws(Errno) in try Self.reopen(descriptor, O_RDONLY) }
        return (node, Save(node: node, owner: owner, committed: committed, directory: table.root, name: name, staging: staging))
    }

    /// A save of a file being created in the top directory: its node stands for the temp.
    func creatingSave(named name: FileName) throws -> (Node, Save) {
        let staged = try staging.stage(in: table.root, replacing: nil, copyContents: false, owner: nil, mode: 0o644)
        let temp = staged.descriptor.raw
        let pathDescriptor = try Self.reopen(temp, Linux.O_PATH)
        let node = table.lookUp(try Syscall.statOfPathDescriptor(pathDescriptor.raw), descriptor: pathDescriptor,
                                parent: table.root, name: name)
        let current = try Syscall.duplicate(temp)
        return (node, Save(node: node, owner: owner, creating: staged, current: current, directory: table.root, name: name,
                           staging: staging))
    }

    /// Writes `bytes` at `offset` of the owner's version (staging the temp first).
    func write(_ save: Save, _ bytes: [UInt8], at offset: off_t = 0) throws {
        try save.change() { (descriptor) throws(Errno) in
            let written = bytes.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, offset) }
            if written != bytes.count { throw Errno.ioError }
        }
    }

    func commit(_ save: Save, durability: Durability = .none, onlyWithoutWriters: Bool = false) throws -> CommitReport? {
        try save.commit(durability: durability, nodes: table, onlyWithoutWriters: onlyWithoutWriters)
    }

    /// What the FUSE layer does after an unlink or a rename over `name` through the mount
    /// (`noteRemoved`): the node table forgets the name, and the save of its file learns it.
    func removedThroughMount(_ name: FileName, of save: Save) {
        _ = table.removedName(name, in: table.root)
        save.nameRemovedThroughMount(name, in: table.root)
    }
}
