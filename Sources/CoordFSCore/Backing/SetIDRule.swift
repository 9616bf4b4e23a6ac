import Glibc

/// What a change of a regular file's data (a write, a truncation, an allocation, a copy into
/// it) does to its set-id bits when the writer lacks CAP_FSETID, as Linux does on a local
/// filesystem: set-user-id falls, and so does set-group-id when the file is group-executable
/// or the writer is not in the file's group. The mount's daemon writes as root, so the
/// backing keeps the bits on its own writes: the daemon applies this rule for the caller
/// (another user's write to a set-id program must never leave it set-id).
public enum SetIDRule {
    /// Linux's number for CAP_FSETID.
    public static let fsetidCapability = 4

    /// The permission bits `mode` keeps after a data change by a writer without CAP_FSETID.
    /// `writerInGroup`: whether the writer's fsgid or a supplementary group is the file's
    /// group, asked only when it decides something.
    public static func bitsAfterDataChange(_ mode: mode_t, writerInGroup: () -> Bool) -> mode_t {
        var kept = mode & 0o7777
        kept &= ~S_ISUID
        if kept & S_ISGID != 0, kept & S_IXGRP != 0 || !writerInGroup() { kept &= ~S_ISGID }
        return kept
    }

    /// Whether a change by anyone but a holder of CAP_FSETID would change `mode`'s bits at all.
    @inline(__always)
    public static func mayDrop(_ mode: mode_t) -> Bool {
        mode & S_IFMT == S_IFREG && mode & (S_ISUID | S_ISGID) != 0
    }
}

extension ProcessFacts {
    /// Whether thread `id` holds `capability` in its effective set (the `CapEff:` line of
    /// /proc/ID/status); false when it is gone.
    public static func hasEffectiveCapability(_ id: Int32, _ capability: Int) -> Bool {
        guard id > 0 else { return false }
        return readProcFile(id, "status", capacity: 4096) { bytes -> Bool in
            for line in bytes.split(separator: UInt8(ascii: "\n")) where line.starts(with: "CapEff:".utf8) {
                let digits = line.dropFirst(7).filter { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\t") }
                guard let mask = UInt64(String(decoding: digits, as: UTF8.self), radix: 16) else { return false }
                return mask & (1 << UInt64(capability)) != 0
            }
            return false
        } ?? false
    }
}
