import Glibc

/// Waits until the kernel's coarse clock has passed `time`. Kernels without fine-grained file
/// timestamps (before Linux 6.13) stamp every change with that clock, which moves once a tick
/// (1 to 10 ms): two changes within one tick get the same change time. A change made once this
/// returns gets a later change time than one stamped `time`, on every kernel. (Newer kernels
/// already make the change after a stat later; there this costs at most a tick.)
public func waitForCoarseClock(toPass time: timespec) {
    var now = timespec()
    while true {
        clock_gettime(CLOCK_REALTIME_COARSE, &now)
        if now.tv_sec > time.tv_sec || (now.tv_sec == time.tv_sec && now.tv_nsec > time.tv_nsec) { return }
        usleep(1_000)
    }
}
