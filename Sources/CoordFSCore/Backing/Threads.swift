import Glibc
import SystemPackage

/// Threads of the daemon's own (the watch's reader, the service manager's announcer): plain
/// pthreads, so they run whatever the Swift concurrency runtime is doing.
public enum Threads {
    /// Runs `body` on a new thread; returns it, joinable (join it, or let the process end).
    public static func spawn(_ body: @escaping @Sendable () -> Void) throws(Errno) -> pthread_t {
        final class Box { let body: @Sendable () -> Void; init(_ body: @escaping @Sendable () -> Void) { self.body = body } }
        let context = Unmanaged.passRetained(Box(body)).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(&thread, nil, { context in
            Unmanaged<Box>.fromOpaque(context!).takeRetainedValue().body()
            return nil
        }, context)
        guard result == 0 else {
            Unmanaged<Box>.fromOpaque(context).release()
            throw Errno(rawValue: result)
        }
        return thread
    }
}
