import Foundation
import Glibc
import Testing
@testable import CoordFSCore

@Suite struct MountPathTests {
    @Test func normalisesSlashesAndDots() {
        #expect(MountPath("/a//b/./c/")?.components == ["a", "b", "c"])
        #expect(MountPath("")?.isRoot == true)
        #expect(MountPath("/")?.description == "/")
        #expect(MountPath("a/b")?.description == "/a/b")
    }

    @Test func rejectsParentSteps() {
        #expect(MountPath("a/../b") == nil)
        #expect(MountPath("..") == nil)
    }

    @Test func ancestry() throws {
        let a = try #require(MountPath("a"))
        let ab = try #require(MountPath("a/b"))
        let abc = try #require(MountPath("a/bc"))
        #expect(ab.isWithin(a))
        #expect(a.isWithin(a))
        #expect(!a.isWithin(ab))
        #expect(!abc.isWithin(ab), "a component is not a string prefix")
        #expect(ab.isWithin(.root))
        #expect(ab.parent == a)
        #expect(ab.lineage.map(\.description) == ["/", "/a", "/a/b"])
        #expect(a.appending("b") == ab)
    }

    @Test func mountLayoutProblems() {
        #expect(MountLayout.problem(backing: "/srv/data", mountpoint: "/mnt/data") == nil)
        #expect(MountLayout.problem(backing: "/srv/data", mountpoint: "/srv/data-mount") == nil)
        #expect(MountLayout.problem(backing: "/srv/data", mountpoint: "/srv/data") == .same("/srv/data"))
        #expect(MountLayout.problem(backing: "/srv", mountpoint: "/srv/data/m")
                == .mountpointInsideBacking(mountpoint: "/srv/data/m", backing: "/srv"))
        #expect(MountLayout.problem(backing: "/mnt/x/backing", mountpoint: "/mnt/x")
                == .backingInsideMountpoint(backing: "/mnt/x/backing", mountpoint: "/mnt/x"))
    }
}

@Suite struct MountTableTests {
    @Test func parsesMountpointsAndTypes() {
        let text = """
        22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
        98 22 0:50 / /tmp/with\\040space rw,nosuid,nodev,relatime shared:40 - fuse.coordfs /srv/b rw,user_id=0,group_id=0
        99 22 0:51 / /tmp/x rw - tmpfs tmpfs rw
        """
        let table = MountTable(parsing: text)
        #expect(table.entries.count == 3)
        #expect(table.mount(at: "/tmp/with space")?.filesystemType == "fuse.coordfs")
        #expect(table.mount(at: "/tmp/x")?.filesystemType == "tmpfs")
        #expect(table.mount(at: "/tmp/y") == nil)
    }

    @Test func readsTheLiveTable() {
        #expect(MountTable.current().mount(at: "/") != nil)
    }

    @Test func findsTheFilesystemOfADevice() throws {
        let text = """
        22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,noauto_da_alloc
        99 22 0:51 / /tmp/x rw - tmpfs tmpfs rw,size=2048k
        """
        let table = MountTable(parsing: text)
        let root = try #require(table.mount(ofDevice: UInt64(254) << 8))
        #expect(root.mountpoint == "/" && root.hasOption("noauto_da_alloc") && !root.hasOption("noauto"))
        #expect(table.mount(ofDevice: 51)?.superOptions == "rw,size=2048k")
        #expect(table.mount(ofDevice: 52) == nil)
        // The live table knows the filesystem this test runs from.
        var status = stat()
        #expect(stat(".", &status) == 0)
        #expect(MountTable.current().mount(ofDevice: UInt64(status.st_dev)) != nil)
    }

    /// sysfs tells whether an ext4 filesystem has a journal; this machine's answer must agree
    /// with what jbd2 runs for it.
    @Test func ext4JournalIsReadFromSysfs() throws {
        var status = stat()
        #expect(stat(".", &status) == 0)
        let entry = try #require(MountTable.current().mount(ofDevice: UInt64(status.st_dev)))
        guard entry.filesystemType == "ext4" else { return }
        let journals = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/fs/jbd2")) ?? []
        let sysfsName = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/sys/dev/block/\(entry.major):\(entry.minor)"))?
            .split(separator: "/").last.map(String.init) ?? ""
        let hasJBD2 = journals.contains { $0.hasPrefix(sysfsName + "-") }
        #expect(MountTable.ext4HasJournal(entry) == hasJBD2, "jbd2 threads: \(journals), device \(sysfsName)")
    }

    @Test func replacingSavesSyncOnlyWhereTheFilesystemDoesNotOrderThem() {
        func ext4(_ options: String) -> MountTable.Entry { MountTable.Entry(mountpoint: "/", filesystemType: "ext4", superOptions: options) }
        #expect(Durability.replacing.needed(on: ext4("rw,relatime")) == .none)
        #expect(Durability.replacing.needed(on: ext4("rw,data=journal")) == .none)
        #expect(Durability.replacing.needed(on: ext4("rw,data=writeback")) == .replacing)
        #expect(Durability.replacing.needed(on: ext4("rw,noauto_da_alloc")) == .replacing)
        #expect(Durability.replacing.needed(on: ext4("rw,relatime"), journaled: false) == .replacing)
        #expect(Durability.replacing.needed(on: MountTable.Entry(mountpoint: "/", filesystemType: "xfs")) == .replacing)
        #expect(Durability.replacing.needed(on: nil) == .replacing)
        #expect(Durability.file.needed(on: ext4("rw")) == .file)
        #expect(Durability.full.needed(on: ext4("rw")) == .full)
    }
}
