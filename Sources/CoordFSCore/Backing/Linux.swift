import CSystemCalls

/// Linux constants that Swift's Glibc module hides behind _GNU_SOURCE, under their C names.
public enum Linux {
    public static let O_PATH = Int32(CSYS_O_PATH)
    public static let O_DIRECT = Int32(CSYS_O_DIRECT)
    public static let O_NOATIME = Int32(CSYS_O_NOATIME)
    public static let O_TMPFILE = Int32(CSYS_O_TMPFILE)
    public static let AT_EMPTY_PATH = Int32(CSYS_AT_EMPTY_PATH)
    public static let RENAME_NOREPLACE = UInt32(CSYS_RENAME_NOREPLACE)
    public static let RENAME_EXCHANGE = UInt32(CSYS_RENAME_EXCHANGE)
    public static let FALLOC_FL_KEEP_SIZE = Int32(CSYS_FALLOC_FL_KEEP_SIZE)
    public static let FALLOC_FL_PUNCH_HOLE = Int32(CSYS_FALLOC_FL_PUNCH_HOLE)
    public static let FALLOC_FL_ZERO_RANGE = Int32(CSYS_FALLOC_FL_ZERO_RANGE)
    public static let SEEK_DATA = Int32(CSYS_SEEK_DATA)
    public static let SEEK_HOLE = Int32(CSYS_SEEK_HOLE)
    public static let UTIME_NOW = Int(CSYS_UTIME_NOW)
    public static let UTIME_OMIT = Int(CSYS_UTIME_OMIT)
}
