import CoordFSClient
import CoordFSProtocol
import CoordFSTestSupport
import Foundation
import Glibc
import SystemPackage
import Testing

/// Events across hosts: two coordfs daemons mount the same backing with `--cluster` on one
/// private PostgreSQL (standing in for two hosts sharing NFS). What one commits reaches the
/// other's subscribers, marked with the origin host, exactly once (the watch of the shared
/// backing sees the peer's writes too and leaves them to the cluster's event), and the other's
/// readers see the new content at once.
@Suite(.serialized) struct ClusterEventTests {
    /// One daemon of the cluster over the shared backing.
    final class ClusterMount {
        let mountpoint: String
        private let process: Process
        private let errors = Pipe()
        /// Reads the daemon's standard error all along: a pipe nobody reads fills up, and a
        /// daemon whose log write blocks stalls (its events with it).
        private let log = ErrorCollector()

        init(backing: String, mountpoint: String, conninfo: String) throws {
            self.mountpoint = mountpoint
            try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: false)
            process = Process()
            process.executableURL = URL(fileURLWithPath: coordfsBinary)
            process.arguments = ["mount", backing, mountpoint, "--foreground", "--cluster", conninfo, "--cluster-name", "events"]
            process.standardError = errors
            process.standardOutput = FileHandle.nullDevice
            process.standardInput = FileHandle.nullDevice
            try withChildSignalUnblocked { try process.run() }
            log.collect(from: errors)
            let deadline = Date().addingTimeInterval(15)
            while !isMounted(mountpoint) {
                guard process.isRunning else {
                    throw MountError(message: "coordfs exited before mounting: \(log.finished())")
                }
                guard Date() < deadline else { throw MountError(message: "the mount did not appear within 15 s") }
                usleep(10_000)
            }
        }

        var pid: Int32 { process.processIdentifier }

        /// The last lines the daemon logged, for a failing test's message.
        var logTail: String { log.soFar().split(separator: "\n").suffix(40).joined(separator: "\n") }
        private var killed = false

        /// kill -9, then the dead mount's leftover taken away.
        func kill() {
            killed = true
            Glibc.kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            _ = try? run(["fusermount3", "-u", mountpoint])
            if isMounted(mountpoint) { _ = try? run(["umount", "-l", mountpoint]) }
        }

        /// A hello'd connection to the daemon's control socket.
        func connect() throws -> LineClient {
            let client = try LineClient(socketPath: try ControlLocation.locate(FilePath(mountpoint)).socket)
            guard try client.request(#"{"id":0,"op":"hello","version":1,"client":"ClusterEventTests"}"#).ok != nil else {
                throw LineClientError("hello failed")
            }
            return client
        }

        func unmount(sourceLocation: SourceLocation = #_sourceLocation) {
            guard !killed else { return }
            let result = try? run([coordfsBinary, "unmount", mountpoint])
            #expect(result?.status == 0, "coordfs unmount: \(result?.description ?? "did not run")", sourceLocation: sourceLocation)
            let deadline = Date().addingTimeInterval(15)
            while process.isRunning && Date() < deadline { usleep(10_000) }
            if process.isRunning { process.terminate() }
            if isMounted(mountpoint) {
                Issue.record("the mount was left behind", sourceLocation: sourceLocation)
                _ = try? run(["fusermount3", "-u", mountpoint])
                if isMounted(mountpoint) { _ = try? run(["umount", "-l", mountpoint]) }
            }
            process.waitUntilExit()
            #expect(process.terminationStatus == 0, "the daemon exited with \(process.terminationStatus)", sourceLocation: sourceLocation)
        }
    }

    /// An event push as the test compares it.
    struct Seen: Hashable, CustomStringConvertible {
        var kind: String
        var path: String
        var destination: String?
        var pid: Int?
        var host: String?
        var outside: Bool

        init?(_ push: [String: Any]) {
            guard push["push"] as? String == "event", let event = push["event"] as? [String: Any],
                  let origin = event["origin"] as? [String: Any] else { return nil }
            kind = event["kind"] as? String ?? "?"
            path = event["path"] as? String ?? "?"
            destination = event["destination"] as? String
            pid = origin["pid"] as? Int
            host = (origin["host"] as? [String: Any])?["name"] as? String
            outside = origin["outside"] as? Bool == true
        }

        /// The change itself, whoever saw it.
        var change: String { "\(kind) \(path)\(destination.map { " -> " + $0 } ?? "")" }
        var description: String { "\(change) pid \(pid ?? 0) host \(host ?? "-")\(outside ? " outside" : "")" }
    }

    /// Two mounts of one backing in one cluster on a private server, unmounted after `body`.
    static func withTwoMounts(_ body: (PostgresServer, Scratch, ClusterMount, ClusterMount) throws -> Void) throws {
        let server = try PostgresServer()
        let scratch = try Scratch()
        let a = try ClusterMount(backing: scratch.backing, mountpoint: scratch.root + "/a", conninfo: server.conninfo())
        defer { a.unmount() }
        let b = try ClusterMount(backing: scratch.backing, mountpoint: scratch.root + "/b", conninfo: server.conninfo())
        defer { b.unmount() }
        try body(server, scratch, a, b)
    }

    /// Subscribes `client` to everything beneath `path`; returns the mount's last event number then.
    @discardableResult
    static func subscribe(_ client: LineClient, _ path: String = "/") throws -> Int {
        let reply = try client.request(#"{"id":1,"op":"subscribe","path":"\#(path)","recursive":true}"#)
        guard let ok = reply.ok else { throw LineClientError("subscribe failed: \(reply)") }
        return ok["sequence"] as? Int ?? 0
    }

    /// Event pushes until none comes for `quiet`.
    static func drain(_ client: LineClient, quiet: Duration = .milliseconds(1500)) -> [[String: Any]] {
        var pushes: [[String: Any]] = []
        while let push = try? client.nextPush(timeout: quiet) { pushes.append(push) }
        return pushes
    }

    static func write(_ path: String, _ text: String) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno)!) }
        let written = text.withCString { Glibc.write(descriptor, $0, strlen($0)) }
        // The close commits (and fails when the commit does).
        guard close(descriptor) == 0, written == text.utf8.count else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    }

    static func read(_ path: String) -> String? {
        FileManager.default.contents(atPath: path).map { String(decoding: $0, as: UTF8.self) }
    }

    static var hostname: String {
        var buffer = [CChar](repeating: 0, count: 256)
        gethostname(&buffer, buffer.count)
        return String(cString: buffer)
    }

    /// A's creates, changes, renames and deletes reach B's subscriber as A's own subscriber sees
    /// them, in the same order, once each, from this process on A's host.
    @Test func aSubscriberOnBSeesTheOtherHostsChangesOnceInOrder() throws {
        try Self.withTwoMounts { _, _, a, b in
            let onA = try a.connect(), onB = try b.connect()
            try Self.subscribe(onA)
            let before = try Self.subscribe(onB)
            // `coordfs watch` on B, in text and in JSON, for the first two events: from B's
            // history (`--since`), so that a watcher still starting when they happen misses none.
            let watchers = try [[], ["--json"]].map { (options: [String]) -> (Process, Pipe) in
                let watcher = Process(), output = Pipe()
                watcher.executableURL = URL(fileURLWithPath: coordfsBinary)
                watcher.arguments = ["watch", "-r", "--count", "2", "--timeout", "30", "--since", "\(before)"] + options + [b.mountpoint]
                watcher.standardOutput = output
                try watcher.run()
                return (watcher, output)
            }
            let root = a.mountpoint
            try FileManager.default.createDirectory(atPath: root + "/d", withIntermediateDirectories: false)
            try Self.write(root + "/d/f", "one")
            try Self.write(root + "/d/f", "two")
            #expect(rename(root + "/d/f", root + "/d/g") == 0)
            #expect(chmod(root + "/d/g", 0o600) == 0)
            try Self.write(root + "/d/h.log", "log line\n") // written in place
            #expect(unlink(root + "/d/g") == 0)
            #expect(rename(root + "/d", root + "/e") == 0)

            let local = Self.drain(onA).compactMap(Seen.init)
            let remote = Self.drain(onB).compactMap(Seen.init)
            #expect(local.count >= 8, "\(local)")
            #expect(remote.map(\.change) == local.map(\.change), "A saw \(local)\nB saw \(remote)")
            #expect(remote.allSatisfy { $0.host == Self.hostname && $0.pid == Int(getpid()) && !$0.outside }, "\(remote)")
            #expect(local.allSatisfy { $0.host == nil }, "\(local)")
            let printed = watchers.map { watcher, output in
                watcher.waitUntilExit()
                return String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            }
            let process = try #require(String(contentsOfFile: "/proc/self/comm", encoding: .utf8).split(separator: "\n").first)
            #expect(printed[0] == "\(b.mountpoint)/d/ created (host \(Self.hostname): \(process) \(getpid()))\n"
                        + "\(b.mountpoint)/d/f created (host \(Self.hostname): \(process) \(getpid()))\n", "\(printed[0])")
            #expect(printed[1].split(separator: "\n").allSatisfy { $0.contains(#""host":{"id":"#) && $0.contains(#""name":"\#(Self.hostname)"}"#) },
                    "\(printed[1])")
        }
    }

    /// B's readers, their caches warm, read what A committed as soon as B's subscriber hears of
    /// it: a save by rename and a write in place.
    @Test func readersOnBSeeTheNewContentRightAfterTheEvent() throws {
        try Self.withTwoMounts { _, _, a, b in
            for name in ["saved.txt", "written.log"] {
                try Self.write(a.mountpoint + "/" + name, "version 0")
            }
            let onB = try b.connect()
            try Self.subscribe(onB)
            _ = Self.drain(onB, quiet: .milliseconds(500))
            for round in 1...20 {
                for name in ["saved.txt", "written.log"] {
                    // Warm B's caches: attributes, entry and pages.
                    #expect(Self.read(b.mountpoint + "/" + name) == "version \(round - 1)", "\(name) before round \(round)")
                    let text = "version \(round)" + String(repeating: "+", count: round)
                    try Self.write(a.mountpoint + "/" + name, text)
                    var heard = false
                    while !heard, let push = try? onB.nextPush(timeout: .seconds(10)) {
                        if let seen = Seen(push), seen.kind == "changed", seen.path == "/" + name { heard = true }
                    }
                    #expect(heard, "no event for \(name) in round \(round)")
                    #expect(Self.read(b.mountpoint + "/" + name) == text, "\(name) right after the event of round \(round)")
                    try Self.write(a.mountpoint + "/" + name, "version \(round)")
                    heard = false
                    while !heard, let push = try? onB.nextPush(timeout: .seconds(10)) {
                        if let seen = Seen(push), seen.kind == "changed", seen.path == "/" + name { heard = true }
                    }
                }
            }
        }
    }

    /// A PostgreSQL restart in the middle of A's commits: B's subscriber still hears of every
    /// one of them from A (possibly after a resync marker, and possibly twice: see
    /// Docs/PROTOCOL.md), none missing.
    @Test func aDatabaseRestartLeavesNoGap() throws {
        try Self.withTwoMounts { server, _, a, b in
            let onB = try b.connect()
            try Self.subscribe(onB)
            try FileManager.default.createDirectory(atPath: a.mountpoint + "/s", withIntermediateDirectories: false)
            let restarted = DispatchSemaphore(value: 0)
            nonisolated(unsafe) let restarting = server // used by that one thread until `restarted`
            nonisolated(unsafe) var restartError: (any Error)?
            var committed: Set<String> = []
            for number in 0..<200 {
                // A save cut off from the database fails (Docs/LOCKING.md, "Across hosts"):
                // then there is nothing to tell.
                if (try? Self.write(a.mountpoint + "/s/\(number)", "\(number)")) != nil { committed.insert("/s/\(number)") }
                if number == 80 {
                    DispatchQueue.global().async {
                        do { try restarting.restart() } catch { restartError = error }
                        restarted.signal()
                    }
                }
                usleep(10_000)
            }
            restarted.wait()
            #expect(restartError == nil, "\(String(describing: restartError))")
            let expected = committed
            #expect(committed.count >= 150, "\(committed.count) of 200 saves committed")
            var fromA: Set<String> = []
            var heard: [String] = []
            let deadline = ContinuousClock.now + .seconds(30)
            while !expected.isSubset(of: fromA), ContinuousClock.now < deadline {
                guard let push = try? onB.nextPush(timeout: .seconds(5)) else { continue }
                if let seen = Seen(push) {
                    heard.append(seen.description)
                    if seen.kind == "created", seen.host == Self.hostname { fromA.insert(seen.path) }
                } else {
                    heard.append("\(push)")
                }
            }
            let missing = expected.subtracting(fromA)
            #expect(missing.isEmpty, """
                missing at B: \(missing.sorted())
                B heard of them: \(heard.filter { line in missing.contains { line.contains($0 + " ") || line.hasSuffix($0) } })
                B heard besides events: \(heard.filter { !$0.contains("/s/") }.prefix(20))
                A's log: \(a.logTail)
                B's log: \(b.logTail)
                """)
        }
    }

    /// A host killed with -9 may have committed changes it never published: B's subscriber
    /// is told to rescan, once.
    @Test func aKilledHostCostsOneResync() throws {
        try Self.withTwoMounts { _, _, a, b in
            let onB = try b.connect()
            try Self.subscribe(onB)
            try Self.write(a.mountpoint + "/before", "x")
            var heard = false
            while !heard, let push = try? onB.nextPush(timeout: .seconds(10)) {
                heard = Seen(push)?.path == "/before"
            }
            #expect(heard)
            a.kill()
            var markers: [[String: Any]] = []
            let deadline = ContinuousClock.now + .seconds(15)
            while markers.isEmpty, ContinuousClock.now < deadline {
                if let push = try? onB.nextPush(timeout: .seconds(1)), push["push"] as? String == "overflow" { markers.append(push) }
            }
            markers += Self.drain(onB, quiet: .seconds(3)).filter { $0["push"] as? String == "overflow" }
            #expect(markers.count == 1, "\(markers)")
            #expect(markers.first?["reason"] as? String == "backing", "\(markers)")
        }
    }

    /// From a commit on A (its close returned) to B's subscriber reading the event, over 500
    /// commits one after another. Printed, not asserted.
    @Test func latencyFromACommitToTheOtherHostsSubscriber() throws {
        try Self.withTwoMounts { _, _, a, b in
            let onB = try b.connect()
            try Self.subscribe(onB, "/lat")
            try FileManager.default.createDirectory(atPath: a.mountpoint + "/lat", withIntermediateDirectories: false)
            _ = Self.drain(onB, quiet: .milliseconds(500))
            var latencies: [Double] = []
            let clock = ContinuousClock()
            for number in 0..<500 {
                try Self.write(a.mountpoint + "/lat/\(number % 10)", "commit \(number)")
                let committed = clock.now
                var heard = false
                while !heard, let push = try? onB.nextPush(timeout: .seconds(10)) {
                    if let seen = Seen(push), seen.path == "/lat/\(number % 10)", seen.host != nil { heard = true }
                }
                #expect(heard, "commit \(number) never reached B")
                latencies.append(Double((clock.now - committed).components.attoseconds) / 1e15
                                 + Double((clock.now - committed).components.seconds) * 1000)
            }
            latencies.sort()
            let p50 = latencies[latencies.count / 2], p99 = latencies[latencies.count * 99 / 100]
            print("cluster event latency, commit on A to B's subscriber, \(latencies.count) commits: p50 \(String(format: "%.2f", p50)) ms, p99 \(String(format: "%.2f", p99)) ms, max \(String(format: "%.2f", latencies.last!)) ms")
        }
    }
}
