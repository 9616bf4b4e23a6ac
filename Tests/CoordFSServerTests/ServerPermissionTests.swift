import CoordFSCore
import Foundation
import Glibc
import Testing

/// Runs a Python client as another user (nobody): sends each request, printing every line it
/// receives, says READY, then keeps printing what arrives until `linger` seconds pass quietly.
private let clientScript = """
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except OSError as error:
    print("CONNECT-FAILED", error.strerror, flush=True)
    sys.exit(3)
f = s.makefile("rw")
for line in open(sys.argv[2]):
    f.write(line); f.flush()
    while True:
        reply = f.readline()
        print(reply, end="", flush=True)
        if '"push"' not in reply:
            break
print("READY", flush=True)
s.settimeout(float(sys.argv[3]))
try:
    while True:
        reply = f.readline()
        if not reply:
            break
        print(reply, end="", flush=True)
except (socket.timeout, TimeoutError):
    pass
"""

private struct OtherUserRun {
    let output: String
    let pid: Int32
}

private func startAsNobody(_ fixture: ServerFixture, requests: [String], linger: Double) throws -> OtherUserRun {
    let script = fixture.directory + "/client.py"
    let requestFile = fixture.directory + "/requests.jsonl"
    let output = fixture.directory + "/client.out"
    try clientScript.write(toFile: script, atomically: true, encoding: .utf8)
    try (requests.joined(separator: "\n") + "\n").write(toFile: requestFile, atomically: true, encoding: .utf8)
    chmod(script, 0o644)
    chmod(requestFile, 0o644)
    let command = "setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 \(script) \(fixture.socketPath) \(requestFile) \(linger) > \(output) 2>&1 & echo $!"
    let pid = try #require(Int32(capture(command).output.trimmingCharacters(in: .whitespacesAndNewlines)))
    return OtherUserRun(output: output, pid: pid)
}

private func lines(_ path: String) -> [String] {
    ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
}

private func waitForExit(_ pid: Int32, _ fixture: ServerFixture) -> Bool {
    fixture.eventually(within: .seconds(20)) { kill(pid, 0) != 0 || (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8))?.contains(") Z") == true }
}

@Suite(.serialized) struct ServerPermissionTests {
    @Test func anotherUserCannotConnectToAPrivateSocket() throws {
        try withServer { fixture in
            let run = try startAsNobody(fixture, requests: [#"{"id":1,"op":"hello","version":1}"#], linger: 0.1)
            #expect(waitForExit(run.pid, fixture))
            let output = lines(run.output)
            #expect(output.first?.hasPrefix("CONNECT-FAILED") == true, "\(output)")
            #expect(output.first?.contains("Permission denied") == true)
            #expect(fixture.server.connectionCount() == 0)
        }
    }

    @Test func onASharedSocketAnotherUserSeesOnlyWhatItCouldRead() throws {
        try withServer(mode: 0o666) { fixture in
            mkdir(fixture.backing + "/private", 0o700)
            mkdir(fixture.backing + "/private/projects", 0o755)
            mkdir(fixture.backing + "/public", 0o755)
            chmod(fixture.backing + "/public", 0o755)
            for (name, mode) in [("rootfile", mode_t(0o644)), ("shared", 0o666)] {
                let file = open(fixture.backing + "/public/" + name, O_CREAT | O_WRONLY, mode)
                fchmod(file, mode)
                close(file)
            }
            chmod(fixture.backing + "/private", 0o700)
            // Root watches inside the private directory (status must not show that to nobody).
            let root = try fixture.connect(client: "root-watcher")
            _ = try root.request(#"{"id":1,"op":"subscribe","path":"/private/projects","recursive":true}"#)

            let run = try startAsNobody(fixture, requests: [
                #"{"id":1,"op":"hello","version":1,"client":"nobody"}"#,
                #"{"id":2,"op":"subscribe","path":"/private"}"#,
                #"{"id":3,"op":"present","path":"/private/doc"}"#,
                #"{"id":4,"op":"claim","write":["/private/doc"],"nonblock":true}"#,
                #"{"id":5,"op":"subscribe","path":"/","recursive":true}"#,
                #"{"id":6,"op":"status"}"#,
                #"{"id":7,"op":"claim","write":["/public/rootfile"],"nonblock":true}"#,
                #"{"id":8,"op":"claim","read":["/public/rootfile"],"nonblock":true}"#,
                #"{"id":9,"op":"claim","write":["/public/shared"],"nonblock":true}"#,
            ], linger: 1.5)
            #expect(fixture.eventually(within: .seconds(10)) { lines(run.output).contains("READY") })
            fixture.publish(.created, "/private/secret.txt")
            fixture.publish(.created, "/public/notes.txt")
            fixture.publish(.moved, "/private/secret.txt", to: "/public/leaked.txt")
            fixture.publish(.moved, "/public/notes.txt", to: "/private/hidden.txt")
            fixture.publish(.attributes, "/private", directory: true)
            #expect(waitForExit(run.pid, fixture))

            let messages = lines(run.output).filter { $0 != "READY" }.compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
            let replies = Dictionary(messages.filter { $0["push"] == nil }.compactMap { message in (message["id"] as? Int).map { ($0, message) } },
                                     uniquingKeysWith: { first, _ in first })
            #expect(replies[1]?.ok?["uid"] as? Int == 65534)
            #expect(replies[2]?.errorCode == "not-permitted")
            #expect(replies[3]?.errorCode == "not-permitted")
            #expect(replies[4]?.errorCode == "not-permitted")
            #expect(replies[5]?.ok != nil)
            // A user may hold back only what it may change: root's 0644 file can be claimed for
            // reading by nobody, not for writing; a file nobody may write can be claimed so.
            #expect(replies[7]?.errorCode == "not-permitted")
            #expect(replies[8]?.ok != nil)
            #expect(replies[9]?.ok != nil)
            let status = try #require(replies[6]?.ok)
            let watched = (status["subscribers"] as? [[String: Any]])?.compactMap { $0["path"] as? String }
            #expect(watched == ["/"])

            let events = messages.compactMap { $0["event"] as? [String: Any] }
            let seen = events.map { "\($0["kind"] as? String ?? "?") \($0["path"] as? String ?? "?")" }
            // Only what nobody could list: the public file appearing, the private file arriving
            // as a creation, the public one leaving as a deletion, and the attributes of /private
            // itself (its name is in the readable root).
            #expect(seen == ["created /public/notes.txt", "created /public/leaked.txt", "deleted /public/notes.txt", "attributes /private"])
            #expect(!lines(run.output).contains { $0.contains("secret") || $0.contains("hidden") })
        }
    }
}

@Suite struct ServerPathAccessTests {
    func withTree(_ body: (String, BackingPathAccess) throws -> Void) throws {
        var template = Array("/tmp/coordfs-access-XXXXXX".utf8CString)
        let root = String(cString: try #require(template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }))
        defer { shell("rm -rf '\(root)'") }
        chmod(root, 0o755)
        #expect(shell("""
        cd '\(root)' && mkdir -p public/sub private group-only && echo x > public/file && echo y > public/secret \
        && chmod 600 public/secret && chmod 700 private && echo z > private/inner \
        && chown root:1234 group-only && chmod 750 group-only && chmod 711 public/sub && ln -s /etc public/link
        """) == 0)
        let descriptor = open(root, Linux.O_PATH | O_DIRECTORY | O_CLOEXEC)
        defer { close(descriptor) }
        try body(root, BackingPathAccess(rootDescriptor: descriptor))
    }

    func check(_ access: BackingPathAccess, _ path: String, uid: UInt32 = 65534, gid: UInt32 = 65534, pid: Int32 = 0) -> ReadAccess {
        access.readAccess(MountPath(path)!, uid: uid, gid: gid, pid: pid)
    }

    @Test func modeBitsDecideForOrdinaryUsers() throws {
        try withTree { _, access in
            #expect(check(access, "/") == .readable)
            #expect(check(access, "/public") == .readable)
            #expect(check(access, "/public/file") == .readable)
            #expect(check(access, "/public/secret") == .notPermitted)
            #expect(check(access, "/private") == .notPermitted)
            #expect(check(access, "/private/inner") == .notPermitted)
            #expect(check(access, "/private/missing") == .notPermitted)
            // Searchable but not listable: the name inside can be reached, not the listing.
            #expect(check(access, "/public/sub") == .notPermitted)
            #expect(check(access, "/public/sub/absent") == .notPermitted)
            #expect(check(access, "/public/absent") == .missing(missingComponents: 1))
            #expect(check(access, "/absent/deeper/still") == .missing(missingComponents: 3))
            #expect(!access.canRead(MountPath("/private")!, uid: 65534, gid: 65534, pid: 0))
        }
    }

    /// A claim that holds back others' changes needs the permission to make the change: to
    /// write the item, or to make it in the directory that would hold it.
    @Test func writingNeedsTheWriteBitOrTheDirectorysForAMissingName() throws {
        try withTree { root, access in
            #expect(shell("cd '\(root)' && echo w > public/shared && chmod 666 public/shared && mkdir open && chmod 777 open") == 0)
            func mayWrite(_ path: String, uid: UInt32 = 65534) -> Bool { access.canWrite(MountPath(path)!, uid: uid, gid: uid, pid: 0) }
            #expect(!mayWrite("/public/file"), "0644 of root's: readable, not writable")
            #expect(mayWrite("/public/shared"))
            #expect(!mayWrite("/public/absent"), "root's 0755 directory: nobody cannot make a name there")
            #expect(mayWrite("/open/absent"))
            #expect(mayWrite("/open/absent/deeper"), "the first missing component would be made in /open")
            #expect(!mayWrite("/private/inner"))
            #expect(!mayWrite("/public/file/beneath"), "nothing can be made beneath a file")
            #expect(mayWrite("/public/file", uid: 0) && mayWrite("/private/inner", uid: 0))
        }
    }

    /// Removing a name needs write (and search) on its directory, and in a sticky directory
    /// owning the item or the directory, whatever the item's own mode says.
    @Test func removingNeedsTheDirectoryAndTheStickyRule() throws {
        try withTree { root, access in
            #expect(shell("""
                cd '\(root)' && echo w > public/shared && chmod 666 public/shared
                mkdir open sticky && chmod 777 open && chmod 1777 sticky
                echo r > open/roots && echo r > sticky/roots && chmod 666 sticky/roots
                echo n > sticky/nobodys && chown 65534 sticky/nobodys
                mkdir sticky/owned && chown 65534 sticky/owned && chmod 1777 sticky/owned && echo r > sticky/owned/roots
                """) == 0)
            func mayRemove(_ path: String, uid: UInt32 = 65534) -> Bool { access.canRemove(MountPath(path)!, uid: uid, gid: uid, pid: 0) }
            #expect(!mayRemove("/public/shared"), "writable, but in root's 0755 directory")
            #expect(mayRemove("/open/roots"), "root's 0644 file in a directory anyone may write")
            #expect(!mayRemove("/sticky/roots"), "root's file under a sticky directory, though it is 0666")
            #expect(mayRemove("/sticky/nobodys"), "its own file under a sticky directory")
            #expect(mayRemove("/sticky/owned/roots"), "a sticky directory it owns")
            #expect(mayRemove("/open/absent") && !mayRemove("/public/absent"), "a missing name: whether it could be made")
            #expect(!mayRemove("/private/inner"), "beneath a directory it may not search")
            #expect(!mayRemove("/", uid: 0), "the root has no name")
            #expect(mayRemove("/sticky/roots", uid: 0) && mayRemove("/public/shared", uid: 0))
            #expect(access.canMake(.write, MountPath("/public/shared")!, uid: 65534, gid: 65534, pid: 0))
            #expect(!access.canMake(.removal, MountPath("/public/shared")!, uid: 65534, gid: 65534, pid: 0))
        }
    }

    @Test func groupsCountPrimaryAndSupplementary() throws {
        try withTree { _, access in
            #expect(check(access, "/group-only") == .notPermitted)
            #expect(check(access, "/group-only", gid: 1234) == .readable)
            // A process whose supplementary groups include 1234 (as /proc/PID/status says).
            let member = try #require(Int32(capture("setpriv --reuid=65534 --regid=65534 --groups=1234 sleep 30 > /dev/null 2>&1 & echo $!")
                .output.trimmingCharacters(in: .whitespacesAndNewlines)))
            defer { kill(member, SIGKILL) }
            var groups: [UInt32] = []
            for _ in 0..<200 where !groups.contains(1234) {
                groups = ProcessFacts.supplementaryGroups(of: member) ?? []
                usleep(10_000)
            }
            #expect(groups == [1234])
            #expect(check(access, "/group-only", pid: member) == .readable)
            #expect(check(access, "/group-only", pid: getpid()) == .notPermitted)
        }
    }

    @Test func rootReadsEverythingButMissingIsStillMissing() throws {
        try withTree { _, access in
            #expect(check(access, "/private/inner", uid: 0, gid: 0) == .readable)
            #expect(check(access, "/private/none", uid: 0, gid: 0) == .missing(missingComponents: 1))
        }
    }

    @Test func symbolicLinksAreNotFollowedOutOfTheBacking() throws {
        try withTree { _, access in
            #expect(check(access, "/public/link/passwd", uid: 0, gid: 0) == .missing(missingComponents: 1))
            #expect(check(access, "/public/file/below", uid: 0, gid: 0) == .missing(missingComponents: 1))
        }
    }
}
