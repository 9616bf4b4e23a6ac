import CoordFSClient
import CoordFSTestSupport
import Foundation
import Glibc
import Testing

/// Names are bytes: names, symlink targets and extended attributes that are not UTF-8 behave
/// through the mount as on a plain directory, the backing holds exactly the names the programs
/// gave, and events, `coordfs watch`, `coordfs exec`, `coordfs status` and the client library
/// give the bytes back. Scripts print bytes as hex, so both transcripts are plain text.
@Suite(.serialized) struct NameBytesTests {
    /// `SyscallParityTests.expectPythonParity` for the script `name` (its helpers beyond
    /// coordtest's are in `Scripts/NameBytesTests/hexnames.py`), then the backing's bytes.
    static func expectParity(_ name: String, in scratch: Scratch, expected: [String],
                             sourceLocation: SourceLocation = #_sourceLocation) throws {
        try SyscallParityTests.expectPythonParity(name, in: scratch, expected: expected, sourceLocation: sourceLocation)
        expectBackingHoldsWhatTheMountShows(scratch, sourceLocation: sourceLocation)
    }

    /// The backing, listed with raw bytes, holds what the mount shows: the same names, byte for
    /// byte (the mount's hidden spares aside), and the same contents, targets and attributes.
    static func expectBackingHoldsWhatTheMountShows(_ scratch: Scratch, sourceLocation: SourceLocation = #_sourceLocation) {
        do {
            let mounted = try TreeSnapshot(of: scratch.mountpoint)
            let backing = try TreeSnapshot(of: scratch.backing)
            let atRest = TreeSnapshot(entries: backing.entries.filter { !$0.path.split(separator: "/").contains { $0.hasPrefix(".coordfs-tmp-") } })
            #expect(atRest == mounted, "backing and mount differ:\n\(atRest.difference(from: mounted))", sourceLocation: sourceLocation)
        } catch {
            Issue.record("cannot list: \(error)", sourceLocation: sourceLocation)
        }
    }

    @Test func everyByteMayBeInAName() throws {
        try withMount { scratch in
            try Self.expectParity("NameBytesTests/everyByteMayBeInAName", in: scratch, expected: ["names 509", "stat gone ENOENT", "stat renamed 1"])
        }
    }

    @Test func longNamesWithBadBytes() throws {
        try withMount { scratch in
            try Self.expectParity("NameBytesTests/longNamesWithBadBytes", in: scratch, expected: [
                    "create 255 ok", "stat 255 4", "rename 255 to 255 ok", "stat old ENOENT", "read renamed b'long'",
                    "unlink 255 ok", "rmdir 255 ok",
                    "create 256 ENAMETOOLONG", "stat 256 ENAMETOOLONG", "mkdir 256 ENAMETOOLONG",
                    "rename to 256 ENAMETOOLONG", "symlink at 256 ENAMETOOLONG",
                ])
        }
    }

    /// A name that is not UTF-8 and its U+FFFD repair are two names, two files.
    @Test func aNameAndItsRepairAreTwoFiles() throws {
        try withMount { scratch in
            try Self.expectParity("NameBytesTests/aNameAndItsRepairAreTwoFiles", in: scratch, expected: [
                    "repaired before ENOENT", "both 626164efbfbdefbfbd6e616d65 626164fffe6e616d65",
                    "raw b'raw'", "repaired b'repaired'", "repaired dir ENOENT", "raw after b'raw'",
                ])
        }
    }

    @Test func symlinkTargetsAreBytes() throws {
        try withMount { scratch in
            try Self.expectParity("NameBytesTests/symlinkTargetsAreBytes", in: scratch, expected: (0..<5).map { "readlink \($0) True" } + ["hex 746172ff676574"])
        }
    }

    @Test func extendedAttributeNamesAndValuesAreBytes() throws {
        try withMount { scratch in
            try Self.expectParity("NameBytesTests/extendedAttributeNamesAndValuesAreBytes", in: scratch, expected: [
                    "set ok", "get 757365722e6eff616d65 True", "get removed ENODATA", "remove repaired twin ENODATA",
                    "control not listed False",
                ])
        }
    }

    // MARK: The control socket and the command line

    /// `d\xFF`, the directory the control-socket tests work in.
    static let directoryName: [UInt8] = [0x64, 0xFF]

    @Test func eventsWatchAndTheClientLibraryGiveTheBytesBack() async throws {
        let scratch = try Scratch()
        try scratch.mount()
        defer { scratch.unmount() }
        let directory = Array(scratch.mountpoint.utf8) + [UInt8(ascii: "/")] + Self.directoryName
        #expect(try shell(#"mkdir "$(printf 'd\377')""#, in: scratch.mountpoint).status == 0)

        // The library, found from the directory's own bytes.
        let connection = try await CoordFSConnection.connect(toMountOf: WirePath.path(directory)!)
        defer { connection.close() }
        #expect(WirePath.bytes(of: try #require(connection.location).path) == [UInt8(ascii: "/")] + Self.directoryName)
        let events = try await connection.subscribe(try #require(connection.location).path, recursive: true)

        // Two watchers: lines of bytes like inotifywait, and JSON lines, given the directory's bytes.
        let watchText = scratch.root + "/watch.txt", watchJSON = scratch.root + "/watch.json"
        let watchers = [(watchText, ""), (watchJSON, "--json")].map { output, format in
            try? ChildProcess(["/bin/sh", "-c", #"exec '\#(coordfsBinary)' watch -r \#(format) -n 3 --timeout 60 "$(printf 'd\377')""#],
                              in: scratch.mountpoint, output: output)
        }
        defer { for watcher in watchers { watcher?.stop() } }
        // Once both have subscribed (status lists them), change things.
        let subscribed = await eventually { (try? await connection.status().subscribers.count) ?? 0 >= 3 }
        try #require(subscribed, "\(watchers.map { $0?.output ?? "not started" })")
        let changes = try shell(#"""
            d="$(printf 'd\377')"
            printf hello > "$d/$(printf 'f\376')"
            mv "$d/$(printf 'f\376')" "$d/$(printf 'g\303\050')"
            """#, in: scratch.mountpoint)
        try #require(changes.status == 0, "\(changes)")

        let file: [UInt8] = [0x2F] + Self.directoryName + [0x2F, 0x66, 0xFE]
        let moved: [UInt8] = [0x2F] + Self.directoryName + [0x2F, 0x67, 0xC3, 0x28]
        var seen: [(String, [UInt8], [UInt8]?)] = []
        for try await message in events {
            guard case .event(let event) = message else { continue }
            seen.append((event.kind.rawValue, WirePath.bytes(of: event.path), event.destination.map(WirePath.bytes(of:))))
            if seen.count == 3 { break }
        }
        #expect(seen.map(\.0) == ["created", "changed", "moved"])
        #expect(seen.map(\.1) == [file, file, file])
        #expect(seen.last?.2 == moved)

        #expect(await eventually { (try? Data(contentsOf: URL(fileURLWithPath: watchJSON)))?.split(separator: UInt8(ascii: "\n")).count == 3 })
        #expect(await eventually { (try? Data(contentsOf: URL(fileURLWithPath: watchText)))?.split(separator: UInt8(ascii: "\n")).count == 3 })
        let text = try Data(contentsOf: URL(fileURLWithPath: watchText)).split(separator: UInt8(ascii: "\n")).map(Array.init)
        let given = Self.directoryName
        #expect(text == [
            given + [0x2F, 0x66, 0xFE] + Array(" created".utf8),
            given + [0x2F, 0x66, 0xFE] + Array(" changed".utf8),
            given + [0x2F, 0x66, 0xFE] + Array(" moved ".utf8) + given + [0x2F, 0x67, 0xC3, 0x28],
        ], "watch prints the names' bytes as given")
        let json = try Data(contentsOf: URL(fileURLWithPath: watchJSON)).split(separator: UInt8(ascii: "\n"))
        let decoded = try json.map { try JSONDecoder().decode(EventRecord.self, from: Data($0)) }
        #expect(decoded.map { WirePath.bytes(of: $0.path) } == [file, file, file])
        #expect(decoded.last?.destination.map(WirePath.bytes(of:)) == moved)
        let lastLine = String(decoding: try #require(json.last), as: UTF8.self)
        #expect(lastLine.contains(#""pathBytes":"\#(Data(file).base64EncodedString())""#))
        #expect(lastLine.contains(#""destinationBytes":"\#(Data(moved).base64EncodedString())""#))
    }

    @Test func execAndStatusClaimTheExactPath() throws {
        try withMount { scratch in
            let setUp = try shell(#"d="$(printf 'd\377')"; mkdir "$d" && echo 1 > "$d/$(printf 'f\376')" && echo 2 > "$d/$(printf 'f\357\277\275')""#,
                                  in: scratch.mountpoint)
            #expect(setUp.status == 0, "\(setUp)")
            // While exec holds the file, a non-blocking writer of it is refused, a writer of its
            // repair is not, and status shows the exact path.
            let result = try shell(#"""
                '\#(coordfsBinary)' exec --write "$(printf 'd\377/f\376')" -- sh -c 'echo > held.flag; while [ ! -e release.flag ]; do sleep 0.05; done' &
                while [ ! -e held.flag ]; do sleep 0.05; done
                /usr/bin/python3 -c '
                import os
                def attempt(path):
                    try:
                        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
                        return "ok"
                    except OSError as e:
                        return os.strerror(e.errno)
                print("exact", attempt(b"d\xff/f\xfe"))
                print("repaired", attempt(b"d\xff/f" + "\ufffd".encode()))
                '
                '\#(coordfsBinary)' status --json . > status.json
                '\#(coordfsBinary)' status "$(printf 'd\377')" | grep -q '^events:' && echo located
                echo > release.flag
                wait
                """#, in: scratch.mountpoint)
            #expect(result.status == 0, "\(result)")
            #expect(result.output == "exact Resource temporarily unavailable\nrepaired ok\nlocated\n", "\(result)")
            let status = try JSONDecoder().decode(StatusReport.self, from: Data(contentsOf: URL(fileURLWithPath: scratch.mountpoint + "/status.json")))
            #expect(status.claims.held.map { WirePath.bytes(of: $0.path) }.contains([0x2F, 0x64, 0xFF, 0x2F, 0x66, 0xFE]), "\(status.claims.held)")

            // The command gets its arguments' bytes.
            let arguments = try shell(#"""
                '\#(coordfsBinary)' exec --read "$(printf 'd\377')" -- /usr/bin/python3 -c 'import os, sys; print(os.fsencode(sys.argv[1]).hex())' "$(printf 'arg\376')"
                """#, in: scratch.mountpoint)
            #expect(arguments.output == "617267fe\n", "\(arguments)")
        }
    }

    func eventually(within limit: Duration = .seconds(20), _ condition: () async -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if await condition() { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return await condition()
    }
}
