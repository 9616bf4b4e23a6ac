import CoordFSClient
import CoordFSTestSupport
import Foundation
import Glibc
import Testing

/// The control socket of a real mount: explicit claims that hold across whole commands, the
/// exact event stream of a shell script, presenters asked before accesses, subscribers that
/// never slow writers, claims that go with a killed client, garbage that the server survives,
/// what another user may see, and the `user.coordfs.control` attribute that leads to it all.
@Suite(.serialized) struct ControlSocketTests {
    static let nobody: (uid: UInt32, gid: UInt32) = (65534, 65534)

    // MARK: Explicit claims

    /// 8 shell loops × 250 read-increment-write cycles, each cycle one `coordfs exec --write`:
    /// `cat` and the redirection are separate opens, so only the explicit claim (held by the
    /// exec's process tree, waited for by everyone else) keeps two cycles from interleaving.
    @Test func explicitClaimsMakeShellIncrementsExact() throws {
        try withMount { scratch in
            try "0\n".write(toFile: scratch.mountpoint + "/counter", atomically: false, encoding: .utf8)
            let result = try shell("""
                for loop in 1 2 3 4 5 6 7 8; do
                    (
                        i=0
                        while [ $i -lt 250 ]; do
                            '\(coordfsBinary)' exec --write counter -- sh -c 'n=$(cat counter); echo $((n+1)) > counter' \
                                || echo "exec failed with $?"
                            i=$((i+1))
                        done
                    ) &
                done
                wait
                cat counter
                """, in: scratch.mountpoint)
            #expect(result.output == "2000\n", "\(result)")
            #expect(result.errors.isEmpty, "\(result)")
        }
    }

    // MARK: Events

    /// One `sh` process makes changes with builtins (redirections, which dash opens in its own
    /// process) and with tools it starts in the background, printing each tool's pid (`$!`, the
    /// forked child that execs the tool): every event must name exactly the process that made
    /// the change, in order, with consecutive sequence numbers and the sizes the design gives.
    @Test func eventsOfAShellScriptComeExactlyInOrderWithTheirOrigins() throws {
        try withMount { scratch in
            let watcher = try Self.connect(to: scratch)
            let subscribed = try #require(try watcher.request(#"{"id":1,"op":"subscribe","path":"/","recursive":true}"#).ok)
            let start = try #require(subscribed["sequence"] as? Int)
            let result = try shell("""
                set -e
                echo "sh $$"
                echo one > a
                echo more >> a
                mv a b & echo "mv $!"; wait $!
                mkdir d & echo "mkdir $!"; wait $!
                echo x > d/f
                mv d e & echo "mv-dir $!"; wait $!
                chmod 600 b & echo "chmod $!"; wait $!
                : > b
                rm b & echo "rm $!"; wait $!
                rm e/f & echo "rm-inner $!"; wait $!
                rmdir e & echo "rmdir $!"; wait $!
                mkdir end & echo "mkdir-end $!"; wait $!
                """, in: scratch.mountpoint)
            #expect(result.status == 0 && result.errors.isEmpty, "\(result)")
            let pids = Self.pids(in: result.output)
            let sh = try #require(pids["sh"])
            func by(_ step: String) -> Int { pids[step] ?? -1 }
            // Why each event, by the design:
            let expected = [
                // `echo one > a`: dash opens fd 3 (create: a staged temp only it sees), dup2s
                // it to 1 and closes 3. That close is the owner's close: it commits the empty
                // file, which appears (created, size 0); the write then stages again and the
                // close of fd 1 after the echo commits it (changed).
                "created /a file by sh \(sh) size 0",
                "changed /a file by sh \(sh) size 4",
                // `>>`: an append open stages nothing until the first write, so the close of
                // fd 3 commits nothing; the close after the echo commits "one\nmore\n".
                "changed /a file by sh \(sh) size 9",
                // A moved file keeps its size, and the event says it ("the new size where it has one").
                "moved /a to /b file by mv \(by("mv")) size 9",
                "created /d dir by mkdir \(by("mkdir"))",
                "created /d/f file by sh \(sh) size 0",
                "changed /d/f file by sh \(sh) size 2",
                "moved /d to /e dir by mv \(by("mv-dir"))",
                "attributes /b file by chmod \(by("chmod")) size 9",
                // `: > b` truncates an existing file: the close of fd 3 commits the empty
                // version; nothing is written after it, so the last close has nothing to commit.
                "changed /b file by sh \(sh) size 0",
                "deleted /b file by rm \(by("rm"))",
                "deleted /e/f file by rm \(by("rm-inner"))",
                "deleted /e dir by rmdir \(by("rmdir"))",
                "created /end dir by mkdir \(by("mkdir-end"))",
            ]
            var seen: [String] = []
            var sequences: [Int] = []
            while seen.last?.hasPrefix("created /end ") != true {
                guard let event = try watcher.nextPush(timeout: .seconds(10))["event"] as? [String: Any] else { continue }
                seen.append(Self.describe(event))
                sequences.append(event["sequence"] as? Int ?? -1)
            }
            #expect(seen == expected)
            #expect(sequences == Array(start + 1...start + expected.count), "sequence numbers: \(sequences) after \(start)")
        }
    }

    // MARK: Presenters

    /// A presenter asked to `save` before another process reads writes its unsaved content
    /// through the mount and answers: the reader (`cat`, a sibling of the presenter, not in its
    /// tree) gets exactly that content, released by the answer rather than by the timeout.
    @Test func aPresenterSavesBeforeAReaderReads() throws {
        try withMount { scratch in
            try "stale\n".write(toFile: scratch.mountpoint + "/doc", atomically: false, encoding: .utf8)
            let presenter = try Self.startPresenter(in: scratch, of: "doc", answering: "save", behaviour: "save", content: "saved by the presenter\n")
            defer { presenter.stop() }
            let started = ContinuousClock.now
            let reader = try shell("echo $$; exec cat doc", in: scratch.mountpoint)
            let elapsed = ContinuousClock.now - started
            let lines = reader.output.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false)
            #expect(reader.status == 0 && lines.count == 2, "\(reader)")
            #expect(lines.last == "saved by the presenter\n", "\(reader)")
            // Not a performance target: only the answer, not the 5 s presenter timeout, let cat on.
            #expect(elapsed < .milliseconds(2500), "cat took \(elapsed)")
            let catPID = String(lines.first ?? "")
            #expect(presenter.eventuallyPrints("answered accepted"), "\(presenter.output)")
            #expect(presenter.output == "ready\nask save /doc \(catPID)\nanswered accepted\n")
        }
    }

    /// A presenter that never answers `relinquish` is skipped after the presenter timeout: the
    /// writer goes on after about that long, and its write lands.
    @Test func aSilentPresenterDelaysAWriterByTheTimeoutOnly() throws {
        try withMount(["--presenter-timeout", "1"]) { scratch in
            try "old\n".write(toFile: scratch.mountpoint + "/f", atomically: false, encoding: .utf8)
            let presenter = try Self.startPresenter(in: scratch, of: "f", answering: "relinquish", behaviour: "silent")
            defer { presenter.stop() }
            let started = ContinuousClock.now
            let writer = try shell("echo $$; echo x > f", in: scratch.mountpoint)
            let elapsed = ContinuousClock.now - started
            #expect(writer.status == 0, "\(writer)")
            // A behaviour bound, not a performance target: the writer waited for the 1 s timeout
            // (once: the O_TRUNC open asks, its truncate and close do not ask again), not longer.
            #expect(elapsed >= .milliseconds(900) && elapsed <= .milliseconds(2500), "the writer took \(elapsed)")
            #expect(try String(contentsOfFile: scratch.mountpoint + "/f", encoding: .utf8) == "x\n")
            let writerPID = writer.output.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(presenter.asks == ["ask relinquish /f \(writerPID)"], "\(presenter.output)")
            let status = try Self.status(of: scratch)
            let counters = (status["presenters"] as? [[String: Any]])?.first
            #expect(counters?["asked"] as? Int == 1 && counters?["timedOut"] as? Int == 1, "\(status)")
        }
    }

    /// Ctrl-C ends a wait for a silent presenter at once with EINTR, as it ends a wait for a
    /// claim, and the file is untouched.
    @Test func anInterruptEndsAWaitForASilentPresenter() throws {
        try withMount(["--presenter-timeout", "30"]) { scratch in
            try "old\n".write(toFile: scratch.mountpoint + "/f", atomically: false, encoding: .utf8)
            let presenter = try Self.startPresenter(in: scratch, of: "f", answering: "relinquish", behaviour: "silent")
            defer { presenter.stop() }
            let output = try CoordinationTests.python("ControlSocketTests/anInterruptEndsAWaitForASilentPresenter", in: scratch.mountpoint)
            #expect(output == "interrupted True True\ncontent old\n", "\(output)")
            #expect(presenter.asks.count == 1, "\(presenter.output)")
        }
    }

    /// A presenter that stepped aside for a writer that then could not have its claim (here
    /// O_NONBLOCK against another writer) is told to reacquire at once, not left aside.
    @Test func aPresenterIsGivenBackWhatAFailedWriterAskedFor() throws {
        try withMount { scratch in
            try "old\n".write(toFile: scratch.mountpoint + "/f", atomically: false, encoding: .utf8)
            let presenter = try Self.startPresenter(in: scratch, of: "f", answering: "relinquish", behaviour: "ok")
            defer { presenter.stop() }
            let output = try CoordinationTests.python("ControlSocketTests/aPresenterIsGivenBackWhatAFailedWriterAskedFor", in: scratch.mountpoint)
            #expect(output == "nonblock EAGAIN\n", "\(output)")
            // Two asks (the holder, the refused writer), and each ends with its reacquire.
            #expect(eventually { presenter.output.components(separatedBy: "notify reacquire /f").count == 3 },
                    "\(presenter.output)")
            #expect(presenter.asks.count == 2, "\(presenter.output)")
        }
    }

    /// A presenter that refuses `accommodate-deletion` stops `rm` with EBUSY and the file stays;
    /// once the presenter has gone, nothing stands in the way.
    @Test func aRefusingPresenterKeepsAFileUntilItGoes() throws {
        try withMount { scratch in
            try "keep me\n".write(toFile: scratch.mountpoint + "/f", atomically: false, encoding: .utf8)
            let presenter = try Self.startPresenter(in: scratch, of: "f", answering: "accommodate-deletion", behaviour: "refuse")
            let refused = try shell("echo $$; exec rm f", in: scratch.mountpoint)
            #expect(refused.status != 0, "\(refused)")
            #expect(refused.errors == "rm: cannot remove 'f': Device or resource busy\n", "\(refused)")
            #expect(try String(contentsOfFile: scratch.mountpoint + "/f", encoding: .utf8) == "keep me\n")
            let rmPID = refused.output.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(presenter.eventuallyPrints("answered accepted"), "\(presenter.output)")
            #expect(presenter.output == "ready\nask accommodate-deletion /f \(rmPID)\nanswered accepted\n")
            let counters = (try Self.status(of: scratch)["presenters"] as? [[String: Any]])?.first
            #expect(counters?["refused"] as? Int == 1, "\(String(describing: counters))")

            presenter.stop()
            try scratch.waitForStatus("the presenter gone with its process") { $0.presenters.isEmpty }
            let removed = try shell("rm f", in: scratch.mountpoint)
            #expect(removed.status == 0 && removed.errors.isEmpty, "\(removed)")
            #expect(!FileManager.default.fileExists(atPath: scratch.mountpoint + "/f"))
        }
    }

    /// A rename onto a presented file asks `accommodate-deletion` first, and a refusal stops it
    /// with EBUSY; RENAME_NOREPLACE and RENAME_EXCHANGE replace nothing, so they ask nothing.
    @Test func aRenameAsksBeforeItReplacesAPresentedFile() throws {
        try withMount { scratch in
            try "presented\n".write(toFile: scratch.mountpoint + "/f", atomically: false, encoding: .utf8)
            try "other\n".write(toFile: scratch.mountpoint + "/g", atomically: false, encoding: .utf8)
            let presenter = try Self.startPresenter(in: scratch, of: "f", answering: "accommodate-deletion", behaviour: "refuse")
            defer { presenter.stop() }
            let output = try CoordinationTests.python("ControlSocketTests/aRenameAsksBeforeItReplacesAPresentedFile", in: scratch.mountpoint)
            let lines = output.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
            #expect(lines.first.map { Array($0.dropFirst()) } == ["plain", "EBUSY", "noreplace", "EEXIST", "exchange", "ok"], "\(output)")
            #expect(lines.count == 2 && lines.last == ["other", "presented"], "\(output)")
            #expect(presenter.asks == ["ask accommodate-deletion /f \(lines.first?.first ?? "?")"], "\(presenter.output)")
        }
    }

    // MARK: Subscribers

    /// A subscriber that stops reading never slows writers: 10,000 saves it is subscribed to
    /// take about as long as 10,000 saves it is not (in alternate batches of 1,000, so both
    /// see the same load; a generous bound: the point is that nobody waits for it). When it
    /// reads again it gets what was queued, one overflow marker with the exact range lost,
    /// then live events again; status counts the drops.
    @Test func aSubscriberThatNeverReadsSlowsNoWriter() throws {
        try withMount { scratch in
            #expect(try shell("mkdir alone watched && echo 0 > alone/f && echo 0 > watched/f", in: scratch.mountpoint).status == 0)
            let sleeper = try Self.connect(to: scratch)
            let subscribed = try #require(try sleeper.request(#"{"id":1,"op":"subscribe","path":"/watched","recursive":true}"#).ok)
            let start = try #require(subscribed["sequence"] as? Int)
            // Each save (`open(…, 'w')`, one write, one close: one commit) is one event.
            // Writers that waited for the subscriber would wait for good: give up after 5 minutes.
            let timing = try run(["timeout", "-s", "KILL", "300", "python3", pythonScript("ControlSocketTests/aSubscriberThatNeverReadsSlowsNoWriter")], in: scratch.mountpoint)
            let seconds = timing.output.split(whereSeparator: \.isWhitespace).compactMap { Double($0) }
            #expect(timing.status == 0 && seconds.count == 2, "\(timing)")
            let (alone, watched) = (seconds.first ?? 0, seconds.last ?? .infinity)
            // Not a performance target: a writer that waited for the subscriber would stall for good.
            #expect(watched <= 2 * alone + 2, "10,000 saves took \(watched) s under a stalled subscriber, \(alone) s beside it")

            // The numbers of the watched saves' events: every other batch of 1,000.
            let watchedSequences: [Int] = (0..<10).flatMap { (batch: Int) -> ClosedRange<Int> in
                let before: Int = start + batch * 2000 + 1000
                return (before + 1)...(before + 1000)
            }
            var delivered: [Int] = []
            var overflow: [String: Any]?
            while overflow == nil {
                let push = try sleeper.nextPush()
                if push["push"] as? String == "overflow" {
                    overflow = push
                } else if let event = push["event"] as? [String: Any] {
                    #expect(event["kind"] as? String == "changed" && event["path"] as? String == "/watched/f")
                    delivered.append(event["sequence"] as? Int ?? -1)
                }
            }
            let marker = try #require(overflow)
            #expect(!delivered.isEmpty && delivered.count < 10_000, "\(delivered.count) delivered")
            #expect(delivered == Array(watchedSequences.prefix(delivered.count)), "the delivered events are not the first ones in order")
            let lost = watchedSequences.dropFirst(delivered.count)
            #expect(marker["first"] as? Int == lost.first && marker["last"] as? Int == lost.last && marker["dropped"] as? Int == lost.count,
                    "\(marker), expected \(lost.count) lost from \(lost.first ?? -1) to \(lost.last ?? -1)")
            #expect(marker["subscription"] as? Int == subscribed["subscription"] as? Int)

            // Live again after the marker.
            #expect(try run(["python3", "-c", "open('watched/f', 'w').write('after')"], in: scratch.mountpoint).status == 0)
            let next = try #require(try sleeper.nextPush()["event"] as? [String: Any])
            #expect(next["sequence"] as? Int == start + 20_001 && next["size"] as? Int == 5, "\(next)")

            let status = try Self.status(of: scratch)
            let events = status["events"] as? [String: Any]
            #expect(events?["dropped"] as? Int == lost.count && events?["overflows"] as? Int == 1, "\(String(describing: events))")
            let subscriber = (status["subscribers"] as? [[String: Any]])?.first
            #expect(subscriber?["dropped"] as? Int == lost.count && subscriber?["overflows"] as? Int == 1, "\(String(describing: subscriber))")
        }
    }

    // MARK: Clients that go away

    /// A write claim held by `coordfs exec` keeps a plain writer out (O_NONBLOCK: EAGAIN) and
    /// another exec too; SIGKILL the exec and the kernel closes its socket: the claim goes at
    /// once, though the command it ran (`sleep`) lives on.
    @Test func aKilledExecReleasesItsClaimAtOnce() throws {
        try withMount { scratch in
            let file = scratch.mountpoint + "/f"
            try "0\n".write(toFile: file, atomically: false, encoding: .utf8)
            let pidFile = scratch.root + "/sleeper.pid"
            let holder = try ChildProcess([coordfsBinary, "exec", "--write", file, "--", "sh", "-c", "echo $$ > '\(pidFile)'; exec sleep 60"],
                                        in: scratch.root, output: scratch.root + "/holder.out")
            // The command's pid, once it has written it (it outlives the exec: kill it too).
            var sleeper: Int32? {
                (try? String(contentsOfFile: pidFile, encoding: .utf8)).flatMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            }
            defer {
                if let sleeper { kill(sleeper, SIGKILL) }
                holder.stop()
            }
            #expect(eventually { sleeper != nil })

            let nonblocking = [coordfsBinary, "exec", "--nonblock", "--write", file, "--", "true"]
            let blocked = try run(nonblocking)
            #expect(blocked.status == 1 && blocked.errors.contains("/f is held (exclusive)"), "\(blocked)")
            let writer = try run(["python3", "-c", "import os\ntry: os.open('f', os.O_WRONLY | os.O_NONBLOCK)\nexcept OSError as e: print(e.strerror)"],
                                 in: scratch.mountpoint)
            #expect(writer.output == "Resource temporarily unavailable\n", "\(writer)")

            kill(holder.pid, SIGKILL)
            let killed = ContinuousClock.now
            var free = try run(nonblocking)
            while free.status != 0 && ContinuousClock.now - killed < .seconds(2) {
                usleep(50_000)
                free = try run(nonblocking)
            }
            #expect(free.status == 0, "still held \(ContinuousClock.now - killed) after SIGKILL: \(free)")
            #expect(try shell("echo 1 > f && cat f", in: scratch.mountpoint).output == "1\n")
            if let sleeper { #expect(kill(sleeper, 0) == 0, "the command of the killed exec lives on") }
        }
    }

    // MARK: Garbage

    /// The 100,000 seeded garbage lines of the server fuzz test, on a mount's socket: each gets
    /// exactly one error, the same connection still answers, and the mount still works.
    @Test func aHundredThousandBadLinesLeaveTheMountServing() throws {
        try withMount { scratch in
            let client = try Self.connect(to: scratch)
            let outcome = try client.sendGarbage(count: 100_000, oversized: 3, seed: 0xC0FFEE)
            #expect(outcome.problems(count: 100_000, oversized: 3).isEmpty, "\(outcome.problems(count: 100_000, oversized: 3))")
            #expect(try client.request(#"{"id":"after","op":"status"}"#).ok != nil)
            #expect(try Self.connect(to: scratch).request(#"{"id":1,"op":"status"}"#).ok != nil)
            let result = try shell("echo still here > f && cat f", in: scratch.mountpoint)
            #expect(result.output == "still here\n", "\(result)")
            if let daemon = scratch.daemonID { #expect(kill(daemon, 0) == 0) }
        }
    }

    // MARK: Other users

    /// Without --socket-mode the socket is 0600: another user, though the mount lets it in
    /// (--allow-other) and the socket's directory lets it pass, cannot connect, and
    /// `coordfs watch` says so and fails.
    @Test func anotherUserCannotUseAPrivateSocket() throws {
        try Self.withSocketInScratch(["--allow-other"]) { scratch, socket in
            var status = stat()
            #expect(lstat(socket, &status) == 0 && status.st_mode & S_IFMT == S_IFSOCK && status.st_mode & 0o777 == 0o600)
            let connect = try shell("exec /usr/bin/python3 -c \"import socket; socket.socket(socket.AF_UNIX).connect('\(socket)')\"",
                                    in: scratch.root, user: Self.nobody)
            #expect(connect.status != 0 && connect.errors.contains("PermissionError"), "\(connect)")
            let watch = try shell("exec '\(coordfsBinary)' watch --timeout 2 '\(scratch.mountpoint)'", in: scratch.root, user: Self.nobody)
            #expect(watch.status == 1, "\(watch)")
            #expect(watch.errors == "coordfs: cannot connect to the control socket \(socket): Permission denied\n", "\(watch)")
        }
    }

    /// Issue 32: a presenter of another user (nobody, who may write root's file but not
    /// delete it) that lets an ask time out is not asked again until it answers: root's next
    /// reads go on without asking it (and without its timeout), and status says why; root's
    /// delete does not ask it at all (nobody could not delete the file).
    @Test func anotherUsersSilentPresenterIsAskedOnce() throws {
        try withMount(["--allow-other", "--socket-mode", "666", "--presenter-timeout", "1"]) { scratch in
            try "shared\n".write(toFile: scratch.mountpoint + "/shared.txt", atomically: false, encoding: .utf8)
            #expect(chmod(scratch.mountpoint + "/shared.txt", 0o666) == 0)
            let presenter = try ChildProcess(["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3",
                                              pythonScript("ControlSocketTests/presenter"), scratch.mountpoint + "/shared.txt",
                                              "save,accommodate-deletion", "silent", ""],
                                             in: scratch.root, output: scratch.root + "/presenter.out")
            defer { presenter.stop() }
            #expect(presenter.eventuallyPrints("ready"), "\(presenter.output)")
            let reads = try shell("cat shared.txt && cat shared.txt && cat shared.txt", in: scratch.mountpoint)
            #expect(reads.status == 0 && reads.output == "shared\nshared\nshared\n", "\(reads)")
            let status = try Self.status(of: scratch)
            let counters = (status["presenters"] as? [[String: Any]])?.first
            #expect(counters?["asked"] as? Int == 1 && counters?["timedOut"] as? Int == 1, "\(status)")
            #expect(counters?["unresponsive"] as? Bool == true, "\(status)")
            let removed = try shell("rm shared.txt", in: scratch.mountpoint)
            #expect(removed.status == 0, "\(removed)")
            #expect(presenter.asks.count == 1, "asked once, for the first read only: \(presenter.output)")
        }
    }

    /// Issue 32: a user may hold back only what it could change. nobody presents three files
    /// and refuses every ask: root's read-only-to-nobody `/shared.txt` (asked nothing: root's
    /// read, write and delete go on, and nobody is told after), its own `/team/mine.txt` in a
    /// sticky world-writable directory (it could delete it: root's delete is refused), and
    /// root's world-writable `/team/roots.txt` there (it could write it, so it is asked to save
    /// before root reads, but not delete it: root's delete goes on).
    @Test func aPresenterHoldsBackOnlyWhatItsUserMayChange() throws {
        try withMount(["--allow-other", "--socket-mode", "666", "--presenter-timeout", "5"]) { scratch in
            let setUp = try shell("""
                set -e
                echo shared > shared.txt && chmod 644 shared.txt
                mkdir team && chmod 1777 team
                echo roots > team/roots.txt && chmod 666 team/roots.txt
                """, in: scratch.mountpoint)
            #expect(setUp.status == 0, "\(setUp)")
            let made = try shell("echo mine > team/mine.txt", in: scratch.mountpoint, user: Self.nobody)
            #expect(made.status == 0, "\(made)")
            var presenters: [String: ChildProcess] = [:]
            defer { presenters.values.forEach { $0.stop() } }
            for (name, file) in [("shared", "shared.txt"), ("mine", "team/mine.txt"), ("roots", "team/roots.txt")] {
                let presenter = try ChildProcess(["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3",
                                                  pythonScript("ControlSocketTests/presenter"), scratch.mountpoint + "/" + file,
                                                  "save,relinquish,accommodate-deletion", "refuse", ""],
                                                 in: scratch.root, output: scratch.root + "/\(name).out")
                presenters[name] = presenter
                #expect(presenter.eventuallyPrints("ready"), "\(presenter.output)")
            }

            let shared = try shell("cat shared.txt && echo new > shared.txt && cat shared.txt && rm shared.txt", in: scratch.mountpoint)
            #expect(shared.status == 0 && shared.output == "shared\nnew\n", "\(shared)")
            #expect(presenters["shared"]?.eventuallyPrints("notify did-delete /shared.txt") == true, "\(presenters["shared"]?.output ?? "")")
            #expect(presenters["shared"]?.asks == [], "nobody could change none of it: \(presenters["shared"]?.output ?? "")")

            let mine = try shell("rm team/mine.txt", in: scratch.mountpoint)
            #expect(mine.status != 0 && mine.errors.contains("Device or resource busy"), "\(mine)")
            #expect(try shell("cat team/mine.txt", in: scratch.mountpoint).output == "mine\n")

            let roots = try shell("cat team/roots.txt && rm team/roots.txt", in: scratch.mountpoint)
            #expect(roots.status == 0 && roots.output == "roots\n", "\(roots)")
            #expect(!FileManager.default.fileExists(atPath: scratch.backing + "/team/roots.txt"))
            #expect(presenters["roots"]?.asks.map { $0.split(separator: " ").prefix(3).joined(separator: " ") } == ["ask save /team/roots.txt"],
                    "asked to save before root's read, not about the delete: \(presenters["roots"]?.output ?? "")")
        }
    }

    /// Issue 32: a reader cannot freeze writers. nobody holds a read claim on the whole mount
    /// (`coordfs exec --read MOUNT -- sleep 30`); root's write waits the break time (2 s), not
    /// the claim timeout (10 s), and succeeds; nobody's exec says on standard error that its
    /// claim was broken, and by whom, and exits 1 though its command succeeded; status and the
    /// log name the break. Root's own claim on the same mount holds root back to the claim
    /// timeout, as before (a user's own claims are not broken).
    @Test func anotherUsersClaimIsBrokenAfterTheBreakTime() throws {
        try withMount(["--allow-other", "--socket-mode", "666", "--claim-timeout", "10", "--break-time", "2"]) { scratch in
            try "shared\n".write(toFile: scratch.mountpoint + "/shared.txt", atomically: false, encoding: .utf8)
            #expect(chmod(scratch.mountpoint + "/shared.txt", 0o644) == 0)
            let holder = try ChildProcess(["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                           coordfsBinary, "exec", "--read", scratch.mountpoint, "--", "sh", "-c", "sleep 6; echo done"],
                                          in: scratch.root, output: scratch.root + "/holder.out")
            defer { holder.stop() }
            try scratch.waitForStatus("nobody's read claim on /") { report in report.claims.held.contains { $0.path == "/" } }

            let started = ContinuousClock.now
            let write = try shell("echo new > shared.txt", in: scratch.mountpoint)
            let waited = ContinuousClock.now - started
            #expect(write.status == 0, "\(write)")
            #expect(waited >= .milliseconds(1_900) && waited < .seconds(6), "root waited \(waited)")
            #expect(try String(contentsOfFile: scratch.backing + "/shared.txt", encoding: .utf8) == "new\n")

            #expect(holder.waitForExit(within: .seconds(20)))
            #expect(holder.exitCode == 1, "\(holder.output)")
            #expect(holder.output.contains("done\n"), "the command ran on to its end: \(holder.output)")
            #expect(holder.output.contains("coordfs: the claim on \(scratch.mountpoint) was broken after ")
                    && holder.output.contains(": uid 0 (pid "), "\(holder.output)")

            let status = try Self.status(of: scratch)
            let broken = ((status["claims"] as? [String: Any])?["broken"] as? [[String: Any]]) ?? []
            #expect(broken.count == 1 && broken.first?["uid"] as? Int == 65534 && broken.first?["byUid"] as? Int == 0
                    && broken.first?["paths"] as? [String] == ["/"], "\(status)")
            let text = try run([coordfsBinary, "status", scratch.mountpoint])
            #expect(text.output.contains("claims broken"), "\(text)")
            #expect(scratch.daemonLogSoFar.contains("was broken") && scratch.daemonLogSoFar.contains("holder-uid=65534"), "\(scratch.daemonLogSoFar)")

            // Root's own claim is root's: it holds root back until the claim timeout, unbroken.
            let rootHolder = try ChildProcess([coordfsBinary, "exec", "--read", scratch.mountpoint + "/shared.txt", "--", "sleep", "30"],
                                              in: scratch.root, output: scratch.root + "/root-holder.out")
            defer { rootHolder.stop() }
            try scratch.waitForStatus("root's read claim") { report in report.claims.held.contains { $0.path == "/shared.txt" } }
            let blocked = try shell("echo newer > shared.txt", in: scratch.mountpoint)
            #expect(blocked.status != 0 && blocked.errors.contains("Device or resource busy"), "\(blocked)")
        }
    }

    /// A writer of another user that keeps a file open past the break time loses its claim,
    /// not its save: root's write goes on after the break time with a save of its own (root
    /// reads its version at once), and the other's save commits whole at its own close; it
    /// finds root's commit since it began, so root's version is kept beside it as a conflict
    /// copy: nothing is lost, and no file mixes the two (before, root joined the other's save
    /// and the file ended as "root\ny\n").
    @Test func aBrokenWritersSaveCommitsWholeOnItsOwn() throws {
        try withMount(["--allow-other", "--break-time", "1"]) { scratch in
            let file = scratch.mountpoint + "/f"
            try "orig\n".write(toFile: file, atomically: false, encoding: .utf8)
            #expect(chmod(file, 0o666) == 0)
            let writer = try ChildProcess(["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c",
                                           "import sys, time\nf = open(sys.argv[1], 'w')\nf.write('nobody\\n')\nf.flush()\nprint('open', flush=True)\n"
                                           + "time.sleep(3)\nf.close()\nprint('closed', flush=True)", file],
                                          in: scratch.root, output: scratch.root + "/writer.out")
            defer { writer.stop() }
            #expect(writer.eventuallyPrints("open"), "\(writer.output)")
            let started = ContinuousClock.now
            let root = try shell("echo root > f && cat f", in: scratch.mountpoint)
            #expect(root.status == 0 && root.output == "root\n", "\(root)")
            #expect(ContinuousClock.now - started >= .milliseconds(900), "root waited the break time")
            #expect(writer.waitForExit(within: .seconds(20)) && writer.output.contains("closed"), "\(writer.output)")
            #expect(eventually { (try? String(contentsOfFile: file, encoding: .utf8)) == "nobody\n" },
                    "\((try? String(contentsOfFile: file, encoding: .utf8)) ?? "?")")
            let backing = try FileManager.default.contentsOfDirectory(atPath: scratch.backing).sorted()
            #expect(backing.count == 2 && backing.first == "f" && backing.last?.hasPrefix("f.conflict-") == true, "\(backing)")
            if let copy = backing.last {
                #expect(try String(contentsOfFile: scratch.backing + "/" + copy, encoding: .utf8) == "root\n")
            }
        }
    }

    /// Issue 32: what one user may keep in the daemon is bounded over all its connections, with
    /// a clear `limit` error past it, and status shows the limits and the user's use; root,
    /// the mount's owner here, is not bound by them.
    @Test func oneUserCannotKeepMoreThanItsLimits() throws {
        try withMount(["--allow-other", "--socket-mode", "666", "--user-limit", "connections=2", "--user-limit", "subscriptions=2",
                       "--user-limit", "presenters=2", "--user-limit", "claims=2"]) { scratch in
            try "shared\n".write(toFile: scratch.mountpoint + "/shared.txt", atomically: false, encoding: .utf8)
            #expect(chmod(scratch.mountpoint + "/shared.txt", 0o644) == 0)
            let result = try run(["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3",
                                  pythonScript("ControlSocketTests/userLimits"), scratch.mountpoint], in: scratch.root)
            #expect(result.status == 0, "\(result)")
            let limit = "the most one user may keep"
            let lines = result.output.split(separator: "\n").map(String.init)
            #expect(lines.count == 14, "\(result.output)")
            #expect(lines.prefix(3) == ["connection 1 ok", "connection 2 ok",
                                        "connection 3 limit: uid 65534 has 2 connections, \(limit) (--user-limit connections=N)"], "\(result.output)")
            for (kind, what, flag) in [("subscription", "subscriptions", "subscriptions"), ("presenter", "presenters", "presenters"),
                                       ("claim", "claims held or waiting", "claims")] {
                #expect(lines.contains("\(kind) 1 ok") && lines.contains("\(kind) 2 ok")
                        && lines.contains("\(kind) 3 limit: uid 65534 has 2 \(what), \(limit) (--user-limit \(flag)=N)"), "\(result.output)")
            }
            #expect(lines.contains(#"limits {"asks": 256, "claims": 2, "connections": 2, "presenters": 2, "subscriptions": 2}"#), "\(result.output)")
            #expect(lines.contains(#"users [{"claims": 2, "connections": 2, "limited": true, "presenters": 2, "subscriptions": 2, "uid": 65534}]"#),
                    "another user sees only itself: \(result.output)")

            // Root is not limited: three connections and three subscriptions on them.
            let clients = try (0..<3).map { _ in try Self.connect(to: scratch) }
            for (number, client) in clients.enumerated() {
                #expect(try client.request(#"{"id":\#(number),"op":"subscribe","path":"/"}"#).ok != nil)
            }
            let status = try Self.status(of: scratch)
            let users = status["users"] as? [[String: Any]] ?? []
            #expect(users.contains { $0["uid"] as? Int == 0 && $0["limited"] as? Bool == false }, "\(status)")
        }
    }

    /// On a shared socket (0666) another user connects, but may not watch a directory it
    /// cannot read, and while it watches the whole mount it sees nothing of what happens in
    /// such a directory, only what happens where it could look. Root's own watcher is the
    /// control: the hidden changes did happen.
    @Test func anotherUserOnASharedSocketSeesOnlyWhatItCouldRead() throws {
        try withMount(["--allow-other", "--socket-mode", "666"]) { scratch in
            let setUp = try shell("mkdir private public && chmod 700 private && chmod 755 public", in: scratch.mountpoint)
            #expect(setUp.status == 0, "\(setUp)")
            // A shared socket's default place is the shared directory, which others may pass through.
            let socket = try ControlLocation.locate(FilePath(scratch.mountpoint)).socket
            #expect(socket.hasPrefix("/run/coordfs/") && socket.hasSuffix(".sock"), "\(socket)")

            let refused = try shell("exec '\(coordfsBinary)' watch --timeout 2 '\(scratch.mountpoint)/private'", in: scratch.root, user: Self.nobody)
            #expect(refused.status == 1, "\(refused)")
            #expect(refused.errors == "coordfs: /private: uid 65534 may not read it\n", "\(refused)")

            let rootWatcher = try Self.connect(to: scratch)
            #expect(try rootWatcher.request(#"{"id":1,"op":"subscribe","path":"/","recursive":true}"#).ok != nil)
            let output = scratch.root + "/nobody.out"
            let watcher = try ChildProcess(["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                          coordfsBinary, "watch", "--recursive", "--json", "--count", "3", "--timeout", "20", scratch.mountpoint],
                                         in: scratch.root, output: output)
            defer { watcher.stop() }
            try scratch.waitForStatus("a subscription by uid 65534 (nobody's watch)") { report in
                let sessions = Set(report.subscribers.map(\.session))
                return report.connections.contains { $0.uid == 65534 && sessions.contains($0.session) }
            }

            let changes = try shell("""
                set -e
                echo "sh $$"
                echo secret > private/a
                mkdir private/sub
                echo deeper > private/sub/b
                chmod 600 private/a
                rm private/a
                echo hello > public/notes
                mkdir end & echo "mkdir $!"; wait $!
                """, in: scratch.mountpoint)
            #expect(changes.status == 0, "\(changes)")
            let pids = Self.pids(in: changes.output)
            #expect(watcher.waitForExit(within: .seconds(25)), "nobody's watch did not end")
            let nobodySaw = watcher.output.split(separator: "\n").map { line in
                ((try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]).map(Self.describe) ?? String(line)
            }
            #expect(nobodySaw == [
                "created /public/notes file by sh \(pids["sh"] ?? -1) size 0",
                "changed /public/notes file by sh \(pids["sh"] ?? -1) size 6",
                "created /end dir by mkdir \(pids["mkdir"] ?? -1)",
            ], "\(watcher.output)")
            #expect(!watcher.output.contains("private"), "\(watcher.output)")

            var rootSaw: [String] = []
            while rootSaw.last?.hasPrefix("created /end ") != true {
                guard let event = try rootWatcher.nextPush()["event"] as? [String: Any] else { continue }
                rootSaw.append(Self.describe(event))
            }
            let hidden = rootSaw.filter { $0.contains(" /private/") }.map { $0.split(separator: " ").prefix(2).joined(separator: " ") }
            #expect(hidden == ["created /private/a", "changed /private/a", "created /private/sub", "created /private/sub/b",
                               "changed /private/sub/b", "attributes /private/a", "deleted /private/a"], "\(rootSaw)")
        }
    }

    // MARK: The control attribute

    /// Every item of the mount answers `user.coordfs.control` with the socket and its own path;
    /// the attribute is never listed and cannot be set or removed; outside the mount it is absent.
    @Test func everyItemNamesTheSocketAndItsPath() throws {
        try Self.withSocketInScratch([]) { scratch, socket in
            let result = try shell("""
                mkdir -p d/e && echo x > d/e/f && setfattr -n user.other -v 1 d/e/f
                for item in . d d/e/f; do getfattr --only-values -n user.coordfs.control "$item"; echo; done
                getfattr -d --absolute-names d/e/f
                getfattr -d -m - --absolute-names d/e/f
                python3 -c "import os; print(sorted(os.listxattr('d/e/f')), sorted(os.listxattr('.')))"
                setfattr -n user.coordfs.control -v x d/e/f; echo "set $?"
                setfattr -x user.coordfs.control d; echo "remove $?"
                getfattr --only-values -n user.coordfs.control d/e/f; echo
                echo x > '\(scratch.plain)/g'
                getfattr --absolute-names -n user.coordfs.control '\(scratch.plain)/g'; echo "plain $?"
                """, in: scratch.mountpoint)
            let location = { (path: String) in #"{"version":1,"socket":"\#(socket)","path":"\#(path)"}"# }
            #expect(result.output == """
                \(location("/"))
                \(location("/d"))
                \(location("/d/e/f"))
                # file: d/e/f
                user.other="1"

                # file: d/e/f
                user.other="1"

                ['user.other'] []
                set 1
                remove 1
                \(location("/d/e/f"))
                plain 1

                """, "\(result)")
            #expect(result.errors == """
                setfattr: d/e/f: Operation not permitted
                setfattr: d: Operation not permitted
                \(scratch.plain)/g: user.coordfs.control: No such attribute

                """, "\(result)")
        }
    }
}

// MARK: - Helpers

extension ControlSocketTests {
    /// Mounts with the control socket at a known place in the scratch folder (searchable by
    /// everyone, so only the socket's own mode decides who may connect).
    static func withSocketInScratch(_ options: [String], _ body: (Scratch, String) throws -> Void) throws {
        let scratch = try Scratch()
        let socket = scratch.root + "/control.sock"
        try scratch.mount(options + ["--socket", socket])
        defer { scratch.unmount() }
        try body(scratch, socket)
    }

    /// The pids a script printed as lines "STEP PID".
    static func pids(in output: String) -> [String: Int] {
        var pids: [String: Int] = [:]
        for line in output.split(separator: "\n") {
            let words = line.split(separator: " ")
            if words.count == 2, let pid = Int(words[1]) { pids[String(words[0])] = pid }
        }
        return pids
    }

    /// A hello'd raw connection to the mount's socket, found through the attribute as any client would.
    static func connect(to scratch: Scratch) throws -> LineClient {
        let client = try LineClient(socketPath: try ControlLocation.locate(FilePath(scratch.mountpoint)).socket)
        let hello = try client.request(#"{"id":0,"op":"hello","version":1,"client":"ControlSocketTests"}"#)
        guard hello.ok != nil else { throw LineClientError("hello failed: \(hello)") }
        return client
    }

    /// The mount's status, on a connection of its own.
    static func status(of scratch: Scratch) throws -> [String: Any] {
        let reply = try connect(to: scratch).request(#"{"id":1,"op":"status"}"#)
        guard let ok = reply.ok else { throw LineClientError("status failed: \(reply)") }
        return ok
    }

    /// An event as one comparable line: kind, path(s), file or dir, origin, size when present.
    static func describe(_ event: [String: Any]) -> String {
        let origin = event["origin"] as? [String: Any] ?? [:]
        var text = "\(event["kind"] as? String ?? "?") \(event["path"] as? String ?? "?")"
        if let destination = event["destination"] as? String { text += " to \(destination)" }
        text += (event["directory"] as? Bool == true) ? " dir" : " file"
        text += " by \(origin["process"] as? String ?? "?") \(origin["pid"] as? Int ?? -1)"
        if origin["uid"] as? Int != 0 { text += " uid \(origin["uid"] ?? "?")" }
        if let size = event["size"] as? Int { text += " size \(size)" }
        return text
    }

    /// A presenter in a python3 process of its own (not an ancestor of the processes whose
    /// accesses it is asked about) for `name` in the mount. It prints `ready` once registered,
    /// `ask KIND PATH REQUESTER` per ask and `answered accepted` per reply to an answer.
    /// `behaviour`: `save` writes `content` to the file through the mount, then answers ok;
    /// `refuse` refuses; `silent` never answers.
    static func startPresenter(in scratch: Scratch, of name: String, answering answers: String, behaviour: String,
                               content: String = "") throws -> ChildProcess {
        let presenter = try ChildProcess(["/usr/bin/python3", pythonScript("ControlSocketTests/presenter"), scratch.mountpoint + "/" + name, answers, behaviour, content],
                                       in: scratch.root, output: scratch.root + "/presenter.out")
        guard presenter.eventuallyPrints("ready") else {
            presenter.stop()
            throw LineClientError("the presenter did not register: \(presenter.output)")
        }
        return presenter
    }
}

extension ChildProcess {
    /// The lines that report asks (for presenters).
    var asks: [String] { output.split(separator: "\n").map(String.init).filter { $0.hasPrefix("ask ") } }

    func eventuallyPrints(_ text: String, within limit: Duration = .seconds(20)) -> Bool {
        eventually(within: limit) { output.contains(text) }
    }
}
