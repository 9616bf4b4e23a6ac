import CoordFSClient
import CoordFSTestSupport
import Foundation
import Glibc
import Testing

/// Several coordfs daemons mount one backing directory with one `--cluster`, standing in for
/// hosts that share a folder over NFS: claims hold across them, through a private PostgreSQL
/// per test (Docs/LOCKING.md, "Across hosts").
@Suite(.serialized) struct ClusterTests {
    /// A private server and `count` mounts of one backing, all joined to one cluster: the
    /// first through `--cluster-file`, the others through `--cluster`. Everything is
    /// unmounted (and the server stopped) after `body`, whatever it threw.
    static func withCluster(_ count: Int, _ options: [String] = [], sourceLocation: SourceLocation = #_sourceLocation,
                            _ body: (PostgresServer, [Scratch]) throws -> Void) throws {
        let server: PostgresServer
        do {
            server = try PostgresServer()
        } catch {
            Issue.record("the private PostgreSQL did not start: \(error)", sourceLocation: sourceLocation)
            throw error
        }
        let first = try Scratch()
        var mounts = [first]
        for _ in 1..<count { mounts.append(try Scratch(sharingBackingOf: first)) }
        defer {
            for mount in mounts.reversed() { mount.unmount(sourceLocation: sourceLocation) }
            try? server.stop()
        }
        let conninfoFile = first.root + "/cluster.conf"
        try (server.conninfo() + "\n").write(toFile: conninfoFile, atomically: true, encoding: .utf8)
        chmod(conninfoFile, 0o600)
        for (index, mount) in mounts.enumerated() {
            let cluster = index == 0 ? ["--cluster-file", conninfoFile] : ["--cluster", server.conninfo()]
            try mount.mount(cluster + options)
        }
        try body(server, mounts)
    }

    /// A Python script of this suite (`Scripts/ClusterTests/<name>.py`) running in `directory`.
    final class Script {
        let process = Process()
        private let output = Pipe()
        private let errors = ErrorCollector()

        init(_ name: String, _ arguments: [String], in directory: String) throws {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            process.arguments = [pythonScript("ClusterTests/" + name)] + arguments
            process.environment = ProcessInfo.processInfo.environment.merging(scriptEnvironment) { _, script in script }
            process.currentDirectoryURL = URL(fileURLWithPath: directory)
            process.standardOutput = output
            let errorPipe = Pipe()
            process.standardError = errorPipe
            process.standardInput = FileHandle.nullDevice
            try withChildSignalUnblocked { try process.run() }
            errors.collect(from: errorPipe)
        }

        /// Waits for the end; the status and everything printed.
        func finish() -> (status: Int32, output: String, errors: String) {
            let printed = output.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return (process.terminationStatus, String(decoding: printed, as: UTF8.self), errors.finished())
        }

        /// The one JSON line the script printed last, decoded.
        static func json(_ output: String) -> [String: Any]? {
            guard let line = output.split(separator: "\n").last else { return nil }
            return (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        }
    }

    /// Runs the increments script in each mount, `perMount` processes each, `total` increments
    /// in all; returns what each printed (failing the test for a script that failed).
    static func increment(_ file: String, total: Int, across mounts: [Scratch], perMount: Int, log: String? = nil,
                          sourceLocation: SourceLocation = #_sourceLocation,
                          whileRunning: () throws -> Void = {}) throws -> [[String: Any]] {
        let processes = mounts.count * perMount
        var scripts: [Script] = []
        for index in 0..<processes {
            let share = total / processes + (index < total % processes ? 1 : 0)
            let logFile = log.map { ["\($0)/mount\(index % mounts.count)-process\(index)"] } ?? []
            scripts.append(try Script("increments", [file, String(share)] + logFile, in: mounts[index % mounts.count].mountpoint))
        }
        try whileRunning()
        return scripts.map { script in
            let result = script.finish()
            #expect(result.status == 0, "an increments script failed: \(result)", sourceLocation: sourceLocation)
            return Script.json(result.output) ?? [:]
        }
    }

    /// For a failing increments test: the values written twice (value, mount and process,
    /// when the open and the close returned, the inode the open found), the backing's names
    /// (a conflict copy means a save met a change it should not have), and the daemons' last
    /// log lines.
    static func lostIncrements(log: String, mounts: [Scratch]) -> String {
        var writes: [Int: [String]] = [:]
        for name in (try? FileManager.default.contentsOfDirectory(atPath: log)) ?? [] {
            for line in (text(log + "/" + name) ?? "").split(separator: "\n") {
                guard let value = line.split(separator: " ").first.flatMap({ Int($0) }) else { continue }
                writes[value, default: []].append("\(name): \(line)")
            }
        }
        let twice = writes.filter { $0.value.count > 1 }.sorted { $0.key < $1.key }.prefix(5)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: mounts[0].backing))?.sorted() ?? []
        let logs = mounts.enumerated().map { index, mount in
            "mount\(index): " + mount.daemonLogSoFar.split(separator: "\n").suffix(15).joined(separator: "\n  ")
        }
        return """
            written twice: \(twice.map { "\($0.key): \($0.value.joined(separator: " | "))" }.joined(separator: "\n  "))
            backing: \(names)
            \(logs.joined(separator: "\n"))
            """
    }

    /// The increments' refusals summed by errno name (for the message, and the restart test).
    static func refusals(_ reports: [[String: Any]]) -> [String: Int] {
        var sum: [String: Int] = [:]
        for report in reports {
            for (name, count) in report["refusals"] as? [String: Int] ?? [:] { sum[name, default: 0] += count }
        }
        return sum
    }

    static func text(_ path: String) -> String? {
        try? String(contentsOfFile: path, encoding: .utf8)
    }

    // MARK: Joining

    /// The connection string stays out of `ps`, a database that cannot be reached fails the
    /// mount with one line (no password in it), and the hosts leave when they unmount.
    @Test func mountsJoinWithTheConnectionStringOutOfSight() throws {
        try Self.withCluster(2) { server, mounts in
            let commandLine = try Data(contentsOf: URL(fileURLWithPath: "/proc/\(mounts[0].daemonID!)/cmdline"))
            #expect(!String(decoding: commandLine, as: UTF8.self).contains(server.socketDirectory), "the conninfo shows in ps")
            let hosts = try server.query("SELECT count(*) FROM coordfs_hosts WHERE cluster = 'default'")
            #expect(hosts.trimmingCharacters(in: .whitespacesAndNewlines) == "2")
            #expect(mounts[0].daemonLogSoFar.contains("joined the cluster"), "\(mounts[0].daemonLogSoFar)")

            let other = try Scratch()
            let failed = try run([coordfsBinary, "mount", other.backing, other.mountpoint,
                                  "--cluster", "postgresql:///postgres?host=\(other.root)&user=postgres&password=sesame"])
            #expect(failed.status != 0)
            #expect(failed.errors.hasPrefix("coordfs: cannot join the cluster \"default\": "), "\(failed)")
            #expect(failed.errors.split(separator: "\n").count == 1, "\(failed)")
            #expect(!failed.errors.contains("sesame"), "\(failed)")
            #expect(!isMounted(other.mountpoint))

            for mount in mounts { mount.unmount() }
            let left = try server.query("SELECT count(*) FROM coordfs_hosts WHERE cluster = 'default'")
            #expect(left.trimmingCharacters(in: .whitespacesAndNewlines) == "0", "the hosts did not leave")
        }
    }

    // MARK: Claims across mounts

    /// Runs `body` with both cores kept busy by two spinning shells (stopped after it, whatever
    /// it threw): slow daemons widen the windows between another host's commit, its report and
    /// the kernel's entries, where lost updates used to hide (an open through a kernel entry
    /// that outlived its name wrote the replaced file, unclaimed; a report of another host's
    /// commit, applied late, set the node back to a version this host had replaced since, and
    /// the next save started from it).
    static func underLoad<R>(_ body: () throws -> R) throws -> R {
        let spinners = try (0..<2).map { _ in try ChildProcess(["/bin/sh", "-c", "while :; do :; done"]) }
        defer { for spinner in spinners { spinner.stop() } }
        return try body()
    }

    @Test(arguments: [2, 3])
    func incrementsAcrossMountsLoseNone(mounts count: Int) throws {
        try Self.withCluster(count) { _, mounts in
            try "0".write(toFile: mounts[0].mountpoint + "/counter", atomically: false, encoding: .utf8)
            let log = mounts[0].root + "/increments"
            try FileManager.default.createDirectory(atPath: log, withIntermediateDirectories: false)
            let started = ContinuousClock.now
            let reports = try Self.underLoad { try Self.increment("counter", total: 10_000, across: mounts, perMount: 2, log: log) }
            let took = ContinuousClock.now - started
            for mount in mounts {
                #expect(Self.text(mount.mountpoint + "/counter") == "10000", """
                    refusals: \(Self.refusals(reports))
                    \(Self.lostIncrements(log: log, mounts: mounts))
                    """)
            }
            // No save met a change its claims should have kept out (a conflict copy says one did).
            let conflicts = try FileManager.default.contentsOfDirectory(atPath: mounts[0].backing).filter { $0.contains(".conflict-") }
            #expect(conflicts.isEmpty, "\(conflicts)")
            print("ClusterTests: 10,000 increments across \(count) mounts (2 processes each) took \(took); refusals \(Self.refusals(reports))")
        }
    }

    /// A reader on one mount of a file rewritten whole on another sees only whole versions.
    @Test func readersNeverSeeATornVersionFromAnotherMount() throws {
        try Self.withCluster(2) { _, mounts in
            try String(repeating: "z", count: 262_144).write(toFile: mounts[0].mountpoint + "/f", atomically: false, encoding: .utf8)
            let stop = mounts[1].root + "/stop"
            let readers = try (0..<2).map { _ in try Script("readWhole", ["f", stop], in: mounts[1].mountpoint) }
            let writer = try Script("rewriteWhole", ["f", "200"], in: mounts[0].mountpoint)
            let written = writer.finish()
            #expect(written.status == 0, "\(written)")
            FileManager.default.createFile(atPath: stop, contents: nil)
            for reader in readers {
                let result = reader.finish()
                let report = Script.json(result.output)
                #expect(result.status == 0 && report?["tornCount"] as? Int == 0, "\(result)")
                #expect((report?["reads"] as? Int ?? 0) > 0)
            }
        }
    }

    /// `coordfs exec --write` on one mount holds writers on another: they wait, an
    /// O_NONBLOCK open fails at once with EWOULDBLOCK, and a signal ends a wait (EINTR: the
    /// program's handler runs) and takes its request back, so nothing is left queued.
    @Test func anExplicitClaimOnOneMountHoldsWritersOnAnother() throws {
        try Self.withCluster(2) { server, mounts in
            try "0".write(toFile: mounts[0].mountpoint + "/f", atomically: false, encoding: .utf8)
            let holder = try Script("holdExplicitClaim", ["f", mounts[0].root + "/go"], in: mounts[0].mountpoint)
            try mounts[0].waitForStatus("the explicit claim on /f") { $0.claims.held.contains { $0.path == "/f" } }
            // Status on B shows both hosts, A's grant and B's request waiting for it.
            let blocked = try Script("writeOnce", ["f", "2"], in: mounts[1].mountpoint)
            let report = try mounts[1].waitForStatus("B's request waiting behind A") { report in
                report.cluster?.waiting.contains { $0.path == "/f" && $0.mode == .write } == true
            }
            let cluster = try #require(report.cluster)
            let hostA = try #require(cluster.hosts.first { $0.pid == mounts[0].daemonID })
            #expect(cluster.hosts.count == 2 && cluster.hosts.allSatisfy(\.alive) && cluster.host != hostA.id, "\(cluster)")
            // An explicit write claim is exclusive (Docs/LOCKING.md); A holds it, or a grant above it.
            #expect(cluster.held.contains { $0.host == hostA.id && $0.mode == .exclusive && ["/", "/f"].contains($0.path.string) }, "\(cluster)")
            #expect(cluster.waiting.allSatisfy { $0.host == cluster.host }, "\(cluster)")
            let human = try run([coordfsBinary, "status", mounts[1].mountpoint])
            #expect(human.output.contains("cluster \"default\": this is host \(cluster.host), connected"), "\(human)")
            #expect(human.output.contains("hosts waiting for grants"), "\(human)")
            let output = try Self.pythonOutput("""
                import os, errno, signal, time
                try:
                    os.close(os.open('f', os.O_WRONLY | os.O_NONBLOCK))
                    print('nonblock opened')
                except OSError as e:
                    print('nonblock', errno.errorcode[e.errno])
                class Interrupted(Exception): pass
                def interrupt(*_): raise Interrupted()
                signal.signal(signal.SIGALRM, interrupt)
                signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGALRM])  # the test runner's mask is inherited
                signal.setitimer(signal.ITIMER_REAL, 0.5)
                started = time.monotonic()
                try:
                    with open('f', 'r+') as f: f.write('x')
                    print('opened while held')
                except Interrupted:
                    print('interrupted', time.monotonic() - started < 1.5)
                started = time.monotonic()
                open('\(mounts[0].root)/go', 'w').close()
                with open('f', 'r+') as f: f.write('1')
                print('waited', time.monotonic() - started >= 1.5)
                """, in: mounts[1].mountpoint)
            #expect(output == "nonblock EAGAIN\ninterrupted True\nwaited True\n", "\(output)\nB's log:\n\(mounts[1].daemonLogSoFar)")
            let held = holder.finish()
            #expect(held.status == 0, "\(held)")
            #expect(Self.text(mounts[0].mountpoint + "/f") == "1")
            let waited = blocked.finish()
            #expect(waited.status == 0 && waited.output == "wrote\n", "the writer that waited on B: \(waited)")
            // No request of B's is left in the database to hold A back.
            let queued = try server.query("SELECT count(*) FROM coordfs_requests")
            #expect(queued.trimmingCharacters(in: .whitespacesAndNewlines) == "0", "requests left: \(queued)")
        }
    }

    static func pythonOutput(_ program: String, in directory: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let result = try run(["python3", "-c", program], in: directory)
        #expect(result.status == 0, "\(result)", sourceLocation: sourceLocation)
        return result.output
    }

    /// A daemon killed while a program writes through it: its claims go within the bound
    /// (Docs/LOCKING.md: its session ends at once, the grants go at the next heartbeat of any
    /// host, 1 s), and the file stays whole at the last committed version.
    @Test func aKilledDaemonsClaimsGoWithinTheBound() throws {
        try Self.withCluster(2) { _, mounts in
            let original = String(repeating: "o", count: 65_536)
            try original.write(toFile: mounts[0].mountpoint + "/f", atomically: false, encoding: .utf8)
            let writer = try Script("writeAndHold", ["f", mounts[0].root + "/wrote"], in: mounts[0].mountpoint)
            #expect(eventually { FileManager.default.fileExists(atPath: mounts[0].root + "/wrote") })
            let killed = ContinuousClock.now
            mounts[0].killDaemon()
            let output = try Self.pythonOutput("""
                import time
                with open('f', 'r+') as f: data = f.read(); f.seek(0); f.write('n' * len(data))
                print(len(data), set(data))
                """, in: mounts[1].mountpoint)
            let took = ContinuousClock.now - killed
            #expect(output == "65536 {'o'}\n", "\(output)")
            // The bound (Docs/LOCKING.md): the lease of its last proof (3 s, a heartbeat each
            // second) with the server's margin, and the waiter's next ask.
            #expect(took < .seconds(6), "the killed daemon's claims took \(took) to go")
            print("ClusterTests: a killed daemon's write claim went after \(took)")
            _ = writer.finish()
            #expect(Self.text(mounts[1].mountpoint + "/f") == String(repeating: "n", count: 65_536))
        }
    }

    /// A restart of the database in the middle of an increment run costs a pause, never an update.
    @Test func aDatabaseRestartDuringIncrementsLosesNone() throws {
        try Self.withCluster(2) { server, mounts in
            try "0".write(toFile: mounts[0].mountpoint + "/counter", atomically: false, encoding: .utf8)
            let counter = mounts[0].mountpoint + "/counter"
            let reports = try Self.increment("counter", total: 2_000, across: mounts, perMount: 2) {
                #expect(eventually { (Int(Self.text(counter) ?? "") ?? 0) >= 300 })
                try server.restart()
            }
            #expect(Self.text(counter) == "2000", "refusals: \(Self.refusals(reports))")
            print("ClusterTests: a restart during 2,000 increments; refusals \(Self.refusals(reports))")
        }
    }

    /// Issue 32: the cluster's database fails over. Two mounts reach a primary and its
    /// synchronous standby through one multi-host connection string (libpq tries the hosts in
    /// order and keeps the one that takes writes: `target_session_attrs=read-write`). In the
    /// middle of 1,000 increments the primary crashes and the standby is promoted: the mounts
    /// reconnect to it, every increment lands once, and a subscriber of the first mount gets
    /// one `changed` event for each, its own mount's and the other's, with no resync (and one
    /// `conflict` for each commit fenced off because its grant died with the old primary). Writers
    /// wait meanwhile at most the claim timeout (then ENOLCK, and the script tries again).
    @Test func aFailoverToAStandbyLosesNoIncrementAndNoEvent() throws {
        let primary = try PostgresServer()
        let standby = try PostgresServer(standbyOf: primary)
        defer {
            try? standby.stop()
            try? primary.stop()
        }
        try primary.requireSynchronousStandby()
        let conninfo = "postgresql:///postgres?host=\(primary.socketDirectory),\(standby.socketDirectory)&port=\(primary.port),\(standby.port)"
            + "&user=postgres&target_session_attrs=read-write"
        let first = try Scratch()
        let mounts = [first, try Scratch(sharingBackingOf: first)]
        defer { for mount in mounts.reversed() { mount.unmount() } }
        for mount in mounts { try mount.mount(["--cluster", conninfo, "--claim-timeout", "10"]) }
        try "0".write(toFile: first.mountpoint + "/counter", atomically: false, encoding: .utf8)

        let subscriber = try LineClient(socketPath: try ControlLocation.locate(FilePath(first.mountpoint)).socket)
        #expect(try subscriber.request(#"{"id":0,"op":"hello","version":1}"#).ok != nil)
        #expect(try subscriber.request(#"{"id":1,"op":"subscribe","path":"/counter"}"#).ok != nil)

        let counter = first.mountpoint + "/counter"
        let log = first.root + "/increments"
        try FileManager.default.createDirectory(atPath: log, withIntermediateDirectories: false)
        var failedOverAt = ContinuousClock.now
        let reports = try Self.increment("counter", total: 1_000, across: mounts, perMount: 2, log: log) {
            #expect(eventually { (Int(Self.text(counter) ?? "") ?? 0) >= 200 })
            try primary.crash()
            failedOverAt = ContinuousClock.now
            try standby.promote()
        }
        let took = ContinuousClock.now - failedOverAt
        for mount in mounts {
            #expect(Self.text(mount.mountpoint + "/counter") == "1000", "refusals: \(Self.refusals(reports))")
        }
        // A save whose grant went with the old primary's session is refused at its close (EIO,
        // and the script tries again) and kept aside: its `conflict` event is the one other
        // event there may be, one per such refusal.
        let fenced = Self.refusals(reports)["EIO"] ?? 0
        var changed = 0
        var conflicts = 0
        var others: [String] = []
        while changed < 1_000 || conflicts < fenced {
            guard let push = try? subscriber.nextPush(timeout: .seconds(30)) else { break }
            let kind = (push["event"] as? [String: Any])?["kind"] as? String
            if kind == "changed" {
                changed += 1
            } else if kind == "conflict" {
                conflicts += 1
            } else {
                others.append("\(push)")
            }
        }
        #expect(changed == 1_000 && conflicts == fenced && others.isEmpty,
                "\(changed) changed events, \(conflicts) conflicts for \(fenced) fenced commits; also \(others.prefix(5))")
        // The bound on writers: the longest pause between two increments, which spans the
        // failover, stays under the claim timeout (a writer waits no longer, then gets ENOLCK).
        let closes = ((try? FileManager.default.contentsOfDirectory(atPath: log)) ?? []).flatMap { name in
            (Self.text(log + "/" + name) ?? "").split(separator: "\n").compactMap { line in
                line.split(separator: " ").dropFirst(2).first.flatMap { Double($0) }
            }
        }.sorted()
        let longestPause = zip(closes.dropFirst(), closes).map { $0 - $1 }.max() ?? 0
        #expect(closes.count == 1_000 && longestPause < 10, "\(closes.count) increments logged; longest pause \(longestPause) s")
        print("ClusterTests: a failover during 1,000 increments: done \(took) after the crash; longest pause between increments "
              + "\(longestPause) s; refusals \(Self.refusals(reports))")
    }

    /// Cut off from the database, a mount refuses writes with ENOLCK after the claim timeout
    /// while plain reads go on, and writes again once the database is back.
    @Test func aMountCutOffRefusesWritesAndRecovers() throws {
        try Self.withCluster(2, ["--claim-timeout", "2"]) { server, mounts in
            try "one".write(toFile: mounts[0].mountpoint + "/f", atomically: false, encoding: .utf8)
            try server.stop()
            let output = try Self.pythonOutput("""
                import os, errno
                print(open('f').read())
                try:
                    with open('f', 'r+') as f: f.write('two')
                    print('wrote')
                except OSError as e:
                    print('write', errno.errorcode[e.errno])
                """, in: mounts[0].mountpoint)
            #expect(output == "one\nwrite ENOLCK\n", "\(output)")
            try server.start()
            #expect(eventually(within: .seconds(30)) {
                (try? "three".write(toFile: mounts[0].mountpoint + "/f", atomically: false, encoding: .utf8)) != nil
            })
            #expect(Self.text(mounts[1].mountpoint + "/f") == "three")
        }
    }

    /// A host whose session the server ended while the host could not notice (stopped, as a
    /// host stalls or is cut off) may still trust its grants until its lease runs out: the
    /// other host is granted its claims only after that, and the stalled host's commit is
    /// refused once it runs again.
    @Test func aSessionEndedUnderAStalledHostIsGrantedOnlyAfterItsLease() throws {
        try Self.withCluster(2, ["--claim-timeout", "10"]) { server, mounts in
            try "base".write(toFile: mounts[0].mountpoint + "/f", atomically: false, encoding: .utf8)
            let go = mounts[0].root + "/go"
            let writer = try Script("writeThenCloseOnSignal", ["f", "from A", mounts[0].root + "/wrote", go], in: mounts[0].mountpoint)
            #expect(eventually { FileManager.default.fileExists(atPath: mounts[0].root + "/wrote") })
            let hostPID = mounts[0].daemonID!
            kill(hostPID, SIGSTOP)
            let stopped = ContinuousClock.now
            try server.query("SELECT pg_terminate_backend(server_pid) FROM coordfs_hosts WHERE pid = \(hostPID)")
            try "from B".write(toFile: mounts[1].mountpoint + "/f", atomically: false, encoding: .utf8)
            let waited = ContinuousClock.now - stopped
            kill(hostPID, SIGCONT)
            // A's last heartbeat was at most a second before it stopped.
            #expect(waited >= .seconds(2), "B was granted A's claim \(waited) after A stopped, within A's lease")
            FileManager.default.createFile(atPath: go, contents: nil)
            let result = writer.finish()
            #expect(result.output == "close EIO\n", "\(result)")
            #expect(Self.text(mounts[1].mountpoint + "/f") == "from B")
            print("ClusterTests: a stalled host's claim went to the other host after \(waited)")
        }
    }

    /// A save whose host lost its grant meanwhile is not committed: the other mount's version
    /// stays, the close fails with EIO, and the save's own version is kept beside the file;
    /// with versions, also as an unresolved conflict version that every host lists (and, with
    /// `--no-conflict-copies`, only so).
    @Test(arguments: [[], ["--versions"], ["--versions", "--no-conflict-copies"]])
    func aCommitUnderALostGrantIsRefusedAndKeptAside(options: [String]) throws {
        try Self.withCluster(2, ["--claim-timeout", "5"] + options) { server, mounts in
            try "base".write(toFile: mounts[0].mountpoint + "/f", atomically: false, encoding: .utf8)
            let go = mounts[0].root + "/go"
            let writer = try Script("writeThenCloseOnSignal", ["f", "from A", mounts[0].root + "/wrote", go], in: mounts[0].mountpoint)
            #expect(eventually { FileManager.default.fileExists(atPath: mounts[0].root + "/wrote") })
            // Cut A off: end its sessions (the host row names the one that holds its grants).
            let hostPID = mounts[0].daemonID!
            try server.query("""
                SELECT pg_terminate_backend(server_pid) FROM coordfs_hosts WHERE pid = \(hostPID)
                """)
            try "from B".write(toFile: mounts[1].mountpoint + "/f", atomically: false, encoding: .utf8)
            FileManager.default.createFile(atPath: go, contents: nil)
            let result = writer.finish()
            #expect(result.output == "close EIO\n", "\(result)")
            #expect(Self.text(mounts[1].mountpoint + "/f") == "from B")
            let names = try FileManager.default.contentsOfDirectory(atPath: mounts[1].backing)
            let kept = names.filter { $0.hasPrefix("f.conflict-") }
            #expect(kept.count == (options.contains("--no-conflict-copies") ? 0 : 1), "\(names)")
            if let copy = kept.first { #expect(Self.text(mounts[1].backing + "/" + copy) == "from A") }
            guard options.contains("--versions") else { return }
            for mount in mounts {
                let conflicts = try run([coordfsBinary, "versions", "conflicts", "--json", "."], in: mount.mountpoint)
                let reply = (try? JSONSerialization.jsonObject(with: Data(conflicts.output.utf8))) as? [String: Any]
                let listed = reply?["files"] as? [[String: Any]] ?? []
                let versions = listed.first?["versions"] as? [[String: Any]] ?? []
                #expect(listed.count == 1 && listed.first?["path"] as? String == "/f" && versions.count == 1, "\(conflicts)")
                let id = versions.first?["id"] as? Int ?? 0
                let cat = try run([coordfsBinary, "versions", "cat", "f", "\(id)"], in: mount.mountpoint)
                #expect(cat.output == "from A", "\(cat)")
            }
        }
    }
}
