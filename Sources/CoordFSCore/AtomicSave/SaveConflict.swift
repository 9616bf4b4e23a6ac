import Glibc
import SystemPackage

// A save that meets a change made behind the mount. Claims stop only what goes through the
// mount: a program writing the backing directly is not asked. The policy (Docs/LOCKING.md,
// "Saves and writers behind the mount"): the save still commits, and the version found in the
// backing is first kept beside the file under a conflict name, so neither version is lost.

/// The committed file as a save found it when it staged its temp: which file it was, its
/// change time and its size, from the one fstat the staging makes anyway (to carry the file's
/// metadata over). Through the mount, nobody but the save's owner changes that file while the
/// owner holds its write claim, so at the commit a later change time, or another file under
/// the name, means a change made behind the mount.
public struct SaveBaseline: Sendable, Hashable {
    public let identity: FileIdentity
    let changeSeconds: Int
    let changeNanoseconds: Int
    /// Beside the change time for kernels with coarse timestamps (before Linux 6.13, or other
    /// filesystems): a change in the same clock tick as the file's previous one keeps its
    /// change time, but a new size still shows.
    let size: Int64

    public init(_ status: stat) {
        identity = FileIdentity(status)
        changeSeconds = status.st_ctim.tv_sec
        changeNanoseconds = status.st_ctim.tv_nsec
        size = Int64(status.st_size)
    }

    /// Whether `status` is this file, unchanged since.
    public func isUnchanged(_ status: stat) -> Bool {
        self == SaveBaseline(status)
    }
}

/// What a commit finds under the name it commits to, compared with what its save staged from.
enum FoundAtCommit: Equatable {
    /// The file the save staged from, unchanged (or a save with nothing to compare with).
    case asStaged
    /// Changed in place behind the mount (written, truncated, chmodded), or another file the
    /// mount did not put there (a rename over it, a delete and create): kept beside the file.
    case changedBehindTheMount
    /// Nothing: deleted behind the mount. The commit makes the name again.
    case goneBehindTheMount
    /// The save's owner took the name away through the mount (an unlink, or a rename over it).
    case removedThroughTheMount

    /// Compares `found` (the name's stat now, nil when it names nothing) with the file the
    /// save stands for and the baseline it staged from.
    static func classify(_ found: stat?, file: FileIdentity, baseline: SaveBaseline?, removedThroughTheMount: Bool) -> FoundAtCommit {
        let namesTheFile = found.map { FileIdentity($0) == file } ?? false
        if removedThroughTheMount { return namesTheFile ? .asStaged : .removedThroughTheMount }
        guard let found else { return .goneBehindTheMount }
        guard namesTheFile else { return .changedBehindTheMount }
        if let baseline, !baseline.isUnchanged(found) { return .changedBehindTheMount }
        return .asStaged
    }
}

/// Where a commit kept the version it found changed behind the mount: a hard link beside the
/// file, in the directory the file is committed to.
public struct ConflictCopy: Sendable {
    public let directory: Node
    public let name: FileName
    /// Its path in the mount, nil when the directory has none (it was removed meanwhile).
    public let path: MountPath?
}

/// The names versions found behind the mount are kept under.
///
/// `NAME.conflict-YYYYMMDD-HHMMSS`, the time of the commit in UTC (names sort by time and do
/// not depend on the daemon's zone), with the extension kept last when the name has one
/// (`notes.txt` → `notes.conflict-20261124-221500.txt`), so the copy still opens with the
/// same program. A name taken already gets `-2`, `-3`… after the time. A name starting with
/// its only dot (`.bashrc`) has no extension. A name too long for NAME_MAX is shortened
/// before the suffix, never inside a UTF-8 sequence. The result holds `.conflict-`, so it is
/// never a reserved name (`StagingName`): the mount shows it as any other file.
public enum ConflictName {
    /// The longest name Linux filesystems take.
    static let maximumLength = 255
    /// Attempts before giving up: a hundred copies from one second of one file do not happen.
    static let attempts = 100

    /// The conflict name for `name` at `time`; `attempt` 1 has no counter, later ones `-attempt`.
    public static func make(for name: FileName, at time: time_t, attempt: Int = 1) -> FileName {
        let bytes = name.bytes
        var suffix = Array(".conflict-\(timestamp(time))".utf8)
        if attempt > 1 { suffix += Array("-\(attempt)".utf8) }
        // The extension: from the last dot on, unless that dot starts or ends the name.
        var stem = bytes[...]
        var ext = bytes[bytes.endIndex...]
        if let dot = bytes.lastIndex(of: UInt8(ascii: ".")), dot > 0, dot < bytes.count - 1 {
            stem = bytes[..<dot]
            ext = bytes[dot...]
        }
        if stem.count + suffix.count + ext.count > maximumLength {
            if ext.count + suffix.count >= maximumLength - 1 {
                // An extension that long is no extension: the whole name is the stem.
                stem = bytes[...]
                ext = bytes[bytes.endIndex...]
            }
            var keep = maximumLength - suffix.count - ext.count
            // Not inside a UTF-8 sequence: back up over continuation bytes to a lead byte.
            while keep > 0, keep < stem.count, stem[stem.startIndex + keep] & 0xC0 == 0x80 { keep -= 1 }
            stem = stem.prefix(keep)
        }
        return FileName(Array(stem) + suffix + Array(ext))!
    }

    /// Whether `name` is one `make` makes: `.conflict-` and a timestamp in it.
    public static func isConflictCopy(_ name: FileName) -> Bool {
        let bytes = name.bytes
        let marker = Array(".conflict-".utf8)
        guard bytes.count >= marker.count + 15 else { return false }
        for start in 0...(bytes.count - marker.count - 15) where bytes[start..<(start + marker.count)].elementsEqual(marker) {
            let stamp = bytes[(start + marker.count)..<(start + marker.count + 15)]
            if stamp.enumerated().allSatisfy({ $0.offset == 8 ? $0.element == UInt8(ascii: "-") : (0x30...0x39).contains($0.element) }) { return true }
        }
        return false
    }

    /// `YYYYMMDD-HHMMSS` in UTC.
    static func timestamp(_ time: time_t) -> String {
        let stamp = UTCStamp(time)
        return "\(stamp.year)\(stamp.month)\(stamp.day)-\(stamp.hour)\(stamp.minute)\(stamp.second)"
    }

    /// Keeps what `name` in `directory` names now by a hard link under a free conflict name
    /// (no copy: the kept version is the very file found), and returns that name.
    /// - Throws: ENOENT when the name is gone meanwhile; what linkat refused (EPERM for a
    ///   directory, or a file the daemon may not link under `fs.protected_hardlinks`); EEXIST
    ///   when every attempt's name was taken.
    /// `willLink` hears each name just before it is tried (a watch of the backing that names
    /// no process learns that the link is the mount's own).
    static func keep(_ name: FileName, in directory: Int32, at time: time_t = Glibc.time(nil),
                     willLink: (FileName) -> Void = { _ in }) throws(Errno) -> FileName {
        try name.withCString { (source) throws(Errno) -> FileName in
            try linkUnderFreeName(for: name, at: time, willLink: willLink) { (candidate) throws(Errno) in
                try Syscall.link(directory, source, to: directory, candidate, flags: 0)
            }
        }
    }

    /// Undoes `keep` after the commit it was made for failed: the version found is still under
    /// `name`, and its copy would only be a second name of it, left by a save that did not
    /// happen. Only while both names name one file: should the name have changed again behind
    /// the mount meanwhile, the copy may be all that is left of that version, and it stays.
    static func takeBack(_ copy: FileName, of name: FileName, in directory: Int32) {
        guard let kept = try? Syscall.stat(at: directory, copy), let named = try? Syscall.stat(at: directory, name),
              FileIdentity(kept) == FileIdentity(named) else { return }
        _ = try? Syscall.unlink(at: directory, copy, flags: 0)
    }

    /// Keeps the file open as `descriptor` (a save's staged temp) beside `name` in `directory`,
    /// under a free conflict name of `name`, and returns that name: where a save that may no
    /// longer replace the file puts its version (fencing, Docs/LOCKING.md "Across hosts").
    /// - Throws: as `keep`.
    static func keep(file descriptor: Int32, besides name: FileName, in directory: Int32, at time: time_t = Glibc.time(nil),
                     willLink: (FileName) -> Void = { _ in }) throws(Errno) -> FileName {
        try linkUnderFreeName(for: name, at: time, willLink: willLink) { (candidate) throws(Errno) in
            try Syscall.link(descriptor: descriptor, to: directory, candidate)
        }
    }

    /// Tries `link` with each conflict name of `name` in turn until one is free.
    private static func linkUnderFreeName(for name: FileName, at time: time_t, willLink: (FileName) -> Void,
                                          _ link: (FileName) throws(Errno) -> Void) throws(Errno) -> FileName {
        for attempt in 1...attempts {
            let candidate = make(for: name, at: time, attempt: attempt)
            willLink(candidate)
            do throws(Errno) {
                try link(candidate)
                return candidate
            } catch where error.rawValue == EEXIST {
                continue
            }
        }
        throw Errno(rawValue: EEXIST)
    }
}
