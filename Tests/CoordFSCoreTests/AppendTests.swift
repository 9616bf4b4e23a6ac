import CoordFSTestSupport
import Glibc
import SystemPackage
import Testing
@testable import CoordFSCore

/// Appends without a mount: the save's append path (the file itself grows behind the
/// committed size, a change inside it falls back to a staged copy), the journal's records, and
/// what recovery does with the records a crash left.
@Suite struct AppendTests {
    /// A save whose journal lives in the fixture's scratch directory.
    static func appendingSave(_ fixture: SaveFixture, of name: FileName) throws -> (Node, Save, AppendJournal) {
        let node = try fixture.lookUp(name)
        let committed = try node.withDescriptor { (descriptor) throws(Errno) in try SaveFixture.reopen(descriptor, O_RDONLY) }
        let journal = AppendJournal(root: fixture.table.root.directory, nodes: fixture.table, synchronizes: false)
        let save = Save(node: node, owner: fixture.owner, committed: committed, directory: fixture.table.root, name: name,
                        staging: fixture.staging, journal: journal)
        return (node, save, journal)
    }

    /// Appends `bytes` to the owner's version, as an O_APPEND write does.
    static func append(_ save: Save, _ bytes: [UInt8], range: ChangeRange = .atEnd) throws {
        try save.change(at: range) { (descriptor) throws(Errno) in
            let end: off_t
            if case .from(let offset) = range { end = offset } else { end = try Syscall.stat(descriptor).st_size }
            let written = bytes.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, end) }
            if written != bytes.count { throw Errno.ioError }
        }
    }

    static func journalNames(_ fixture: SaveFixture) throws -> [FileName] {
        try fixture.scratch.names().filter { $0.withCString { AppendJournal.isJournalName($0) } }
    }

    @Test func anAppendGrowsTheFileItselfAndCommitsInPlace() throws {
        let fixture = try SaveFixture(unnamed: true)
        try fixture.scratch.write("log", Array("one\n".utf8))
        let before = FileIdentity(try fixture.scratch.status("log"))
        let (node, save, _) = try Self.appendingSave(fixture, of: "log")

        try Self.append(save, Array("two\n".utf8))
        #expect(save.isAppending)
        #expect(save.appendBoundary == AppendBoundary(file: before, committedSize: 4), "others see the committed size")
        #expect(try fixture.scratch.read("log") == Array("one\ntwo\n".utf8), "the bytes went to the file itself")
        #expect(try Self.journalNames(fixture).count == 1, "the append is recorded while in flight")
        try Self.append(save, Array("three\n".utf8), range: .from(8))
        #expect(save.isAppending, "a write at the end is an append too")

        let report = try #require(try fixture.commit(save, durability: .full))
        #expect(report.appendedFrom == 4)
        #expect(report.size == 14)
        #expect(report.replaced == nil)
        #expect(save.appendBoundary == nil)
        #expect(!save.isAppending)
        #expect(FileIdentity(try fixture.scratch.status("log")) == before, "no rename: the same file")
        #expect(node.identity == before)
        #expect(try fixture.scratch.read("log") == Array("one\ntwo\nthree\n".utf8))
        #expect(try Self.journalNames(fixture).isEmpty, "no journal once no append is in flight")
        #expect(try fixture.scratch.names() == ["log"])
    }

    /// A write inside the committed range after an append: the temp takes the committed
    /// prefix and the appended bytes, the file goes back to its committed version until the
    /// commit replaces it, and nothing appended is lost.
    @Test(arguments: [true, false])
    func aWriteInsideFallsBackWithoutLosingTheAppend(unnamed: Bool) throws {
        let fixture = try SaveFixture(unnamed: unnamed)
        try fixture.scratch.write("doc", Array("abcdef".utf8))
        let before = FileIdentity(try fixture.scratch.status("doc"))
        let (_, save, _) = try Self.appendingSave(fixture, of: "doc")
        try Self.append(save, Array("GHI".utf8))
        try Self.append(save, Array("X".utf8), range: .from(1))
        #expect(!save.isAppending)
        #expect(save.appendBoundary == nil)
        #expect(try fixture.scratch.read("doc") == Array("abcdef".utf8), "the committed version is intact")
        #expect(try ScratchDirectory.readAll(save.current.raw) == Array("aXcdefGHI".utf8), "the owner's version has both")
        #expect(try Self.journalNames(fixture).isEmpty)
        try Self.append(save, Array("J".utf8))
        let report = try #require(try fixture.commit(save))
        #expect(report.appendedFrom == nil)
        #expect(report.conflict == nil, "putting the file back is no change behind the mount")
        #expect(try fixture.scratch.read("doc") == Array("aXcdefGHIJ".utf8))
        #expect(FileIdentity(try fixture.scratch.status("doc")) != before, "a staged save replaces the file")
    }

    @Test func aTruncateFallsBackToo() throws {
        let fixture = try SaveFixture(unnamed: true)
        try fixture.scratch.write("doc", Array("abcdef".utf8))
        let (_, save, _) = try Self.appendingSave(fixture, of: "doc")
        try Self.append(save, Array("gh".utf8))
        try save.truncate(to: 7)
        #expect(try fixture.scratch.read("doc") == Array("abcdef".utf8))
        _ = try #require(try fixture.commit(save))
        #expect(try fixture.scratch.read("doc") == Array("abcdefg".utf8))
    }

    /// A failed save and an unlinked file: the append does not commit, and the file that
    /// still has its name goes back to its committed size.
    @Test func aFailedAppendIsCutBack() throws {
        let fixture = try SaveFixture(unnamed: true)
        try fixture.scratch.write("doc", Array("abc".utf8))
        let (_, save, _) = try Self.appendingSave(fixture, of: "doc")
        save.addWriter()
        try Self.append(save, Array("def".utf8))
        #expect(throws: Errno.noSpace) {
            try save.change(at: .atEnd) { (_) throws(Errno) in throw Errno.noSpace }
        }
        #expect(save.removeWriter())
        save.discardIfFailed()
        #expect(try fixture.scratch.read("doc") == Array("abc".utf8))
        #expect(save.appendBoundary == nil)
        #expect(try Self.journalNames(fixture).isEmpty)
    }

    /// The owner renames the file while appending: the commit follows it, and so does the record.
    @Test func theRecordFollowsARename() throws {
        let fixture = try SaveFixture(unnamed: true)
        try fixture.scratch.write("a", Array("1\n".utf8))
        let (_, save, journal) = try Self.appendingSave(fixture, of: "a")
        try Self.append(save, Array("2\n".utf8))
        try Syscall.rename(fixture.scratch.raw, "a", to: fixture.scratch.raw, "b", flags: 0)
        save.retarget(directory: fixture.table.root, name: "b")
        let journalName = try #require(try Self.journalNames(fixture).first)
        let opened = try Syscall.openAt(fixture.scratch.raw, journalName, O_RDONLY)
        let records = try AppendJournal.records(in: opened.raw)
        #expect(records.map(\.path.description) == ["/b"])
        let report = try #require(try fixture.commit(save))
        #expect(report.appendedFrom == 2)
        #expect(try fixture.scratch.read("b") == Array("1\n2\n".utf8))
        _ = journal
    }

    /// The file replaced behind the mount during the append: the append commits as a save
    /// would, keeping the version it found beside the file.
    @Test func aFileReplacedBehindTheMountKeepsBothVersions() throws {
        let fixture = try SaveFixture(unnamed: true)
        try fixture.scratch.write("doc", Array("mine\n".utf8))
        let (_, save, _) = try Self.appendingSave(fixture, of: "doc")
        try Self.append(save, Array("more\n".utf8))
        try fixture.scratch.write("other", Array("theirs\n".utf8))
        try Syscall.rename(fixture.scratch.raw, "other", to: fixture.scratch.raw, "doc", flags: 0)
        let report = try #require(try fixture.commit(save))
        #expect(report.conflict != nil)
        #expect(try fixture.scratch.read("doc") == Array("mine\nmore\n".utf8))
        let kept = try #require(report.conflict?.name)
        #expect(try fixture.scratch.read(String(decoding: kept.bytes, as: UTF8.self)) == Array("theirs\n".utf8))
        #expect(try Self.journalNames(fixture).isEmpty)
    }

    // MARK: The journal

    @Test func recordsRoundTripAndTornSlotsDoNot() throws {
        let record = AppendRecord(file: FileIdentity(device: 7, inode: 1 << 40), committedSize: 123_456_789,
                                  path: MountPath(components: ["dir", FileName([0xFF, 0x41])!, "f"]))
        let bytes = try AppendJournal.encode(record)
        #expect(AppendJournal.decode(bytes[...]) == record)
        var torn = bytes
        torn[20] ^= 1
        #expect(AppendJournal.decode(torn[...]) == nil, "a changed byte fails the checksum")
        #expect(AppendJournal.decode(bytes.prefix(30)) == nil)
        #expect(AppendJournal.decode([UInt8](repeating: 0, count: 64)[...]) == nil)
    }

    @Test func theJournalExistsOnlyWhileAppendsAreInFlight() throws {
        let scratch = try ScratchDirectory("journal")
        let journal = AppendJournal(root: scratch.raw, nodes: nil, synchronizes: true)
        let rootTime = try scratch.status(".").st_mtim
        let first = try journal.begin(AppendRecord(file: FileIdentity(device: 1, inode: 2), committedSize: 3, path: MountPath("/a")!))
        let second = try journal.begin(AppendRecord(file: FileIdentity(device: 1, inode: 4), committedSize: 5, path: MountPath("/b")!))
        #expect(first != second)
        #expect(try scratch.names().count == 1)
        try journal.end(first)
        let name = try #require(try scratch.names().first)
        let opened = try Syscall.openAt(scratch.raw, name, O_RDONLY)
        let remaining = try AppendJournal.records(in: opened.raw)
        #expect(remaining.map(\.path.description) == ["/b"])
        try journal.end(second)
        #expect(try scratch.names().isEmpty, "removed with the last append")
        #expect(!journal.exists)
        let after = try scratch.status(".").st_mtim
        #expect(after.tv_sec == rootTime.tv_sec && after.tv_nsec == rootTime.tv_nsec, "the root keeps its time")
    }

    /// Recovery cuts back the file a record names when it is that file and at least that
    /// long; anything else is left alone; a journal a live mount holds is not touched.
    @Test func recoveryCutsBackWhatTheRecordsName() throws {
        let scratch = try ScratchDirectory("recovery")
        try scratch.write("grown", Array("committed+appended".utf8))
        try scratch.write("other", Array("someone else's file".utf8))
        try scratch.write("short", Array("ab".utf8))
        let grown = FileIdentity(try scratch.status("grown"))
        let journal = AppendJournal(root: scratch.raw, nodes: nil, synchronizes: false)
        _ = try journal.begin(AppendRecord(file: grown, committedSize: 9, path: MountPath("/grown")!))
        _ = try journal.begin(AppendRecord(file: FileIdentity(device: 1, inode: 1), committedSize: 4, path: MountPath("/other")!))
        _ = try journal.begin(AppendRecord(file: FileIdentity(try scratch.status("short")), committedSize: 5, path: MountPath("/short")!))
        _ = try journal.begin(AppendRecord(file: grown, committedSize: 1, path: MountPath("/missing/file")!))

        #expect(try AppendJournal.rollBack(backingRoot: scratch.raw).isEmpty, "the live journal is locked")
        #expect(try scratch.read("grown") == Array("committed+appended".utf8))

        // A crash: the journal's descriptor (and its lock) goes, the file stays: here a copy of
        // it that no descriptor holds.
        let live = try #require(try scratch.names().first { $0.withCString { AppendJournal.isJournalName($0) } })
        try scratch.write(".coordfs-appends-0000000000000000", try scratch.read(String(decoding: live.bytes, as: UTF8.self)))
        try Syscall.unlink(at: scratch.raw, live, flags: 0)
        let results = try AppendJournal.rollBack(backingRoot: scratch.raw)
        #expect(results.map(\.outcome) == [.rolledBack(dropped: 9), .leftAlone, .leftAlone, .leftAlone])
        #expect(try scratch.read("grown") == Array("committed".utf8))
        #expect(try scratch.read("other") == Array("someone else's file".utf8))
        #expect(try scratch.read("short") == Array("ab".utf8))
        #expect(try scratch.names() == ["grown", "other", "short"], "the crashed run's journal is gone")
    }
}
