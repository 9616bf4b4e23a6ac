import Glibc

/// A moment in UTC as zero-padded fields, for names that sort by time (recovery folders,
/// conflict copies): each caller joins them in its own format.
struct UTCStamp {
    let year, month, day, hour, minute, second: String

    init(_ time: time_t) {
        var time = time
        var parts = tm()
        gmtime_r(&time, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        year = pad(parts.tm_year + 1900, 4)
        month = pad(parts.tm_mon + 1, 2)
        day = pad(parts.tm_mday, 2)
        hour = pad(parts.tm_hour, 2)
        minute = pad(parts.tm_min, 2)
        second = pad(parts.tm_sec, 2)
    }
}
