import Foundation
import Glibc
import Testing

/// Edits of big files on a backing with reflinks, and the in-place size threshold where the
/// backing has none. The XFS backing is a sparse image on a loop device, made and mounted by
/// the test (root, xfsprogs: `Scripts/test` installs it), and torn down in reverse even when
/// the test fails: coordfs, then the XFS mount, then the loop device.
@Suite(.serialized) struct ReflinkTests {
    /// A 4 KiB rewrite in the middle of a 256 MiB file above the in-place threshold, on XFS with
    /// reflinks: staged as a clone (shared extents before and after the commit, free space all
    /// but unchanged), atomic for a reader that opened the file before (the old version whole,
    /// during the save and after the commit), and the same bytes as the edit on a plain directory.
    @Test func bigFileEditsCloneOnXFS() throws {
        let scratch = try Scratch()
        let xfs = try XFSImage(mountedAt: scratch.backing, image: scratch.root + "/xfs.img", size: "1G")
        defer { xfs.tearDown() }
        try scratch.mount(["--in-place-larger-than", "64"])
        defer { scratch.unmount() }
        let result = try run(["python3", pythonScript("ReflinkTests/bigFileEditsCloneOnXFS"), scratch.backing, scratch.plain],
                             in: scratch.mountpoint)
        #expect(result.status == 0, "\(result)")
        #expect(result.output.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) } == [
            "shared before the edit 0",
            "shared before the commit True",
            "reader during the save old version",
            "another process during the save old version",
            "replaced True",
            "free space dropped by less than 16 MiB True",
            "shared after the commit True",
            "reader after the commit old version",
            "reader exit 0",
            "same as the plain edit True",
            "backing holds ['big']",
        ], "\(result)")
    }

    /// Where the backing cannot clone (this machine's scratch filesystem, ext4), a file above the
    /// threshold is written in place and one below it is saved atomically (both atomically on a
    /// scratch that clones).
    @Test func sizeThresholdAppliesWhereCopiesAreReal() throws {
        try withMount(["--in-place-larger-than", "1"]) { scratch in
            let result = try run(["python3", pythonScript("ReflinkTests/sizeThresholdAppliesWhereCopiesAreReal"), scratch.backing],
                                 in: scratch.mountpoint)
            #expect(result.status == 0, "\(result)")
            #expect(result.output == "big as expected as expected\nsmall as expected as expected\n", "\(result)")
        }
    }
}

/// An XFS filesystem with reflinks on a loop device over a sparse image file, mounted at a
/// directory. Fails clearly, naming what is missing, where it cannot be made (no mkfs.xfs, no
/// loop devices): the machines the tests run on have both.
struct XFSImage {
    let mountpoint: String
    let device: String

    init(mountedAt mountpoint: String, image: String, size: String) throws {
        guard access("/dev/loop-control", F_OK) == 0 else {
            throw MountError(message: "no /dev/loop-control: loop devices cannot be set up here, so the XFS backing cannot be made")
        }
        let made = try run(["/bin/sh", "-c", "truncate -s \(size) \(shellQuoted(image)) && mkfs.xfs -q -m reflink=1 \(shellQuoted(image))"])
        guard made.status == 0 else { throw MountError(message: "making an XFS image (needs xfsprogs): \(made)") }
        let attached = try run(["losetup", "--find", "--show", image])
        guard attached.status == 0, attached.output.hasPrefix("/dev/") else {
            throw MountError(message: "losetup could not attach the image: \(attached)")
        }
        device = attached.output.trimmingCharacters(in: .whitespacesAndNewlines)
        let mounted = try run(["mount", "-t", "xfs", device, mountpoint])
        guard mounted.status == 0 else {
            _ = try? run(["losetup", "-d", device])
            throw MountError(message: "mounting \(device) at \(mountpoint): \(mounted)")
        }
        self.mountpoint = mountpoint
    }

    /// Unmounts (lazily if busy) and detaches the loop device.
    func tearDown(sourceLocation: SourceLocation = #_sourceLocation) {
        if (try? run(["umount", mountpoint]))?.status != 0 {
            Issue.record("the XFS mount at \(mountpoint) was busy: unmounted lazily", sourceLocation: sourceLocation)
            _ = try? run(["umount", "-l", mountpoint])
        }
        let detached = try? run(["losetup", "-d", device])
        #expect(detached?.status == 0, "losetup -d \(device): \(detached?.description ?? "did not run")", sourceLocation: sourceLocation)
    }
}
