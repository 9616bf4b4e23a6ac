import Foundation
import Glibc
import Testing

/// Mounts the way the system makes them: mount(8) with type `fuse.coordfs` (through libfuse's
/// mount.fuse3) and `coordfs` (through a mount.coordfs link), a temporary fstab, and a service
/// manager listening on `$NOTIFY_SOCKET` as systemd does for `Type=notify`. The scripts put
/// links to the binary under test where mount(8) looks for helpers (it runs them with a PATH of
/// its own) and take them away at the end; each mounts for itself and unmounts in teardown.
@Suite(.serialized) struct SystemTests {
    /// Runs `Scripts/SystemTests/<name>.py`; expects it to succeed and returns what it printed.
    @discardableResult
    static func python(_ name: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let result = try run(["/usr/bin/python3", pythonScript("SystemTests/" + name)], in: "/")
        #expect(result.status == 0 && result.errors.isEmpty, "\(name): \(result)", sourceLocation: sourceLocation)
        return result.output
    }

    /// `mount -t fuse.coordfs` and an fstab line (with nofail, _netdev, noauto and
    /// x-systemd.* among the options) mount for real with their options mapped to
    /// `coordfs mount`'s; umount(8) unmounts and ends the daemon; an unknown option or a bad
    /// value fails with one line and mounts nothing; `-o ro` mounts read-only (EROFS, claims
    /// for reading served), and `-o remount,rw` and `-o remount,ro` switch it (refused while a
    /// writer is open); `mount -t coordfs` does the same through mount.coordfs, and `-s` skips
    /// the options it does not know.
    @Test func mountCommandAndFstab() throws {
        let output = try Self.python("mountCommandAndFstab")
        #expect(output.components(separatedBy: "unmounted by umount(8)").count - 1 == 5, "\(output)")
        #expect(output.components(separatedBy: "refused:").count - 1 == 3, "\(output)")
        #expect(output.contains("read-only: Read-only file system ro"), "\(output)")
        #expect(output.contains("remounted read-write: written"), "\(output)")
        #expect(output.contains("remount,ro with a writer open fails True True"), "\(output)")
        #expect(output.contains("remounted read-only: Read-only file system 1"), "\(output)")
    }

    /// READY=1 (with MAINPID) comes only once the mount answers, STATUS= follows the claims
    /// held, STOPPING=1 comes at the unmount, and the daemon exits 0.
    @Test func serviceManagerNotifications() throws {
        let output = try Self.python("serviceManagerNotifications")
        #expect(output.contains("ready: serving"), "\(output)")
        #expect(output.contains("while a claim is held:"), "\(output)")
        #expect(output.contains("daemon exited 0"), "\(output)")
    }

    /// `Scripts/install` into a temporary prefix puts every piece in place, each usable (the
    /// program, the mount helper, the units, manual pages, completions for three shells), and
    /// `--uninstall` leaves the prefix empty.
    @Test func installAndUninstall() throws {
        let output = try Self.python("installAndUninstall")
        #expect(output.contains("each usable") && output.contains("uninstalled: nothing left"), "\(output)")
    }

    /// `coordfs status --watch` refreshes every interval until interrupted, following a claim
    /// that comes and goes; with `--json`, one object per refresh.
    @Test func statusWatchRefreshes() throws {
        let output = try Self.python("statusWatchRefreshes")
        #expect(output.contains("and then goes") && output.contains("JSON lines"), "\(output)")
    }

    /// `coordfs exec` with flock(1)'s spellings (`-s`, `-x`, `-n`/`--nb`, `-w`/`--timeout`,
    /// `-E`, `FILE COMMAND…`, `FILE -c LINE`) gives the same status and output as flock on the
    /// same cases, with and without a holder of its own kind.
    @Test func flockSpellingsBehaveAsFlock() throws {
        let output = try Self.python("flockSpellingsBehaveAsFlock")
        #expect(output.contains("15 cases as flock"), "\(output)")
    }

    /// `coordfs watch` with inotifywait's spellings (`-m`, `-q`, `-e` with inotify's names,
    /// `--format` with %w %f %e %T, `--timefmt`, `--exclude`/`--include` and their `i` forms)
    /// prints what inotifywait prints for the same changes, on 11 cases; inotify's names for
    /// reads, and a bad regular expression, are refused.
    @Test func inotifywaitSpellingsBehaveAsInotifywait() throws {
        let output = try Self.python("inotifywaitSpellingsBehaveAsInotifywait")
        #expect(output.contains("11 cases as inotifywait") && output.contains("refused"), "\(output)")
    }

    /// The shipped unit files pass `systemd-analyze verify` without a word, with the binary
    /// where the units say it is.
    @Test func unitFilesVerify() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze") else {
            Issue.record("systemd-analyze is not installed: the units cannot be verified here (Scripts/test installs systemd)")
            return
        }
        let output = try Self.python("unitFilesVerify")
        #expect(output.contains("verified 2 units"), "\(output)")
    }
}
