import CoordFSCore
import Foundation
import Glibc
import Testing

/// Docs/PROTOCOL.md's shell and Python examples, run as written against a server and a
/// directory that carries the control attribute (as a mount's items do).
@Suite(.serialized) struct ServerProtocolDocTests {
    static let document: String = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return (try? String(contentsOf: root.appendingPathComponent("Docs/PROTOCOL.md"), encoding: .utf8)) ?? ""
    }()

    /// The code blocks of the document in one language, in order.
    static func blocks(_ language: String) -> [String] {
        var blocks: [String] = []
        var current: [Substring]?
        for line in document.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil, line == "```\(language)" {
                current = []
            } else if current != nil, line == "```" {
                blocks.append(current!.joined(separator: "\n"))
                current = nil
            } else {
                current?.append(line)
            }
        }
        return blocks
    }

    func fakeMount(_ fixture: ServerFixture) throws -> String {
        let mount = fixture.directory + "/shared"
        mkdir(mount, 0o755)
        let value = #"{"version":1,"socket":"\#(fixture.socketPath)","path":"/"}"#
        try #require(shell("setfattr -n user.coordfs.control -v '\(value)' \(mount)") == 0)
        return mount
    }

    @Test func theShellExampleWorks() throws {
        let sh = try #require(Self.blocks("sh").first)
        try withServer { fixture in
            let mount = try fakeMount(fixture)
            let result = capture(sh.replacingOccurrences(of: "/mnt/shared", with: mount))
            #expect(result.status == 0)
            let replies = result.output.split(separator: "\n")
            #expect(replies.count == 2)
            #expect(replies.first?.hasPrefix(#"{"id":1,"ok":{"version":1"#) == true)
            #expect(replies.last?.hasPrefix(#"{"id":2,"ok":{"server":"#) == true)
        }
    }

    @Test func thePythonExampleWorks() throws {
        let python = try #require(Self.blocks("python").first)
        try withServer { fixture in
            let mount = try fakeMount(fixture)
            let script = fixture.directory + "/coordfs_demo.py"
            try python.write(toFile: script, atomically: true, encoding: .utf8)
            let output = fixture.directory + "/demo.out"
            let pid = try #require(Int32(capture("python3 \(script) \(mount) 3 > \(output) 2>&1 & echo $!")
                .output.trimmingCharacters(in: .whitespacesAndNewlines)))
            defer { kill(pid, SIGKILL) }
            #expect(fixture.eventually(within: .seconds(10)) {
                (try? String(contentsOfFile: output, encoding: .utf8))?.contains("held claim") == true
            })
            #expect(fixture.eventually { fixture.claims.snapshot().holders.isEmpty })
            fixture.publish(.created, "/notes.txt")
            fixture.publish(.moved, "/notes.txt", to: "/old/notes.txt")
            // A name that is not UTF-8 comes out as its bytes.
            fixture.hub.publish(.created, path: MountPath(bytes: Array("/caf".utf8) + [0xE9])!, isDirectory: false,
                                origin: EventOrigin(pid: 1, uid: 0, processName: "writer"), size: 0)
            #expect(fixture.eventually(within: .seconds(10)) { kill(pid, 0) != 0 || (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8))?.contains(") Z") == true })
            let lines = try Data(contentsOf: URL(fileURLWithPath: output)).split(separator: UInt8(ascii: "\n")).map(Array.init)
            #expect(lines == [
                Array("watching / after event 0".utf8),
                Array("held claim 1 on /".utf8),
                Array("1 created /notes.txt  by writer".utf8),
                Array("2 moved /notes.txt /old/notes.txt by writer".utf8),
                Array("3 created /caf".utf8) + [0xE9] + Array("  by writer".utf8),
            ])
        }
    }
}
