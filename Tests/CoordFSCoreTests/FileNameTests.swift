import Testing
@testable import CoordFSCore

/// Names are bytes: every way into a `FileName` and out of it gives back the same bytes,
/// valid UTF-8 or not, short (kept in place) or long (on the heap).
@Suite struct FileNameTests {
    /// Byte strings worth trying: every single byte a name may hold, the two storage sizes on
    /// either side of their boundary, invalid UTF-8 of every kind, and valid non-ASCII text.
    static let samples: [[UInt8]] = {
        var samples = (1...255).filter { $0 != 0x2F }.map { [UInt8($0)] }
        samples += [
            Array("bad".utf8) + [0xFF, 0xFE] + Array("name".utf8),
            Array("bad".utf8) + Array("\u{FFFD}\u{FFFD}".utf8) + Array("name".utf8), // the repair of the one above
            [0xC3],                                 // a lead byte alone
            [0xC3, 0x28],                           // a lead byte and no continuation
            [0x80, 0xBF],                           // continuations alone
            [0xE2, 0x82],                           // a sequence cut short
            [0xED, 0xA0, 0x80],                     // a UTF-16 surrogate, encoded
            [0xF4, 0x90, 0x80, 0x80],               // beyond U+10FFFF
            [0xC0, 0xAF],                           // an overlong "/"
            Array("é 日本 🎉".utf8),
            Array("\r\n\t\u{7F}".utf8),
        ]
        for length in [22, 23, 24, 25, 100, 255, 256, 4000] {
            samples.append((0..<length).map { UInt8(0x80 + $0 % 0x7F) })   // all invalid
            samples.append((0..<length).map { UInt8(0x61 + $0 % 26) })     // all ASCII
        }
        return samples
    }()

    @Test(arguments: samples)
    func everyRouteGivesBackTheSameBytes(_ bytes: [UInt8]) throws {
        let name = try #require(FileName(bytes))
        #expect(name.bytes == bytes)
        #expect(name.count == bytes.count)
        let cString = bytes.map { CChar(bitPattern: $0) } + [0]
        let fromKernel = cString.withUnsafeBufferPointer { FileName(cString: $0.baseAddress!) }
        #expect(fromKernel == name)
        #expect(fromKernel.hashValue == name.hashValue)
        let passedOn = name.withCString { pointer in
            Array(UnsafeBufferPointer(start: pointer, count: bytes.count + 1))
        }
        #expect(passedOn == cString, "a NUL-terminated copy of exactly the bytes")
        #expect(name.withUnsafeBytes { Array($0) } == bytes)
        #expect(name.isValidUTF8 == (String(validating: bytes, as: UTF8.self) != nil))
        #expect(name.string.map { Array($0.utf8) } == (name.isValidUTF8 ? bytes : nil), "text only when it is exact")
    }

    @Test func aNameAndItsRepairAreTwoNames() throws {
        let raw = try #require(FileName(Array("bad".utf8) + [0xFF, 0xFE] + Array("name".utf8)))
        let repaired = try #require(FileName("bad\u{FFFD}\u{FFFD}name".utf8))
        #expect(raw != repaired)
        #expect(Set([raw, repaired, raw]).count == 2)
        #expect(raw.string == nil)
        #expect(repaired.string == "bad\u{FFFD}\u{FFFD}name")
        #expect(raw.description == #"bad\xFF\xFEname"#, "logs show the bytes")
        #expect(repaired.description == "bad\u{FFFD}\u{FFFD}name")
    }

    @Test func noNameHoldsSlashOrNul() {
        #expect(FileName([UInt8]()) == nil)
        #expect(FileName(Array("a/b".utf8)) == nil)
        #expect(FileName([0x61, 0, 0x62]) == nil)
        #expect(FileName.empty.isEmpty)
    }

    @Test func scalarsLeaveGapsForBadBytes() throws {
        let name = try #require(FileName([0x61, 0xFF] + Array("é".utf8) + [0xC3]))
        #expect(name.scalars == ["a", nil, "é", nil])
        #expect(try #require(FileName(Array("plain".utf8))).scalars == ["p", "l", "a", "i", "n"])
    }

    @Test func controlCharactersAreEscapedForLogs() throws {
        #expect(try #require(FileName(Array("a\nb\u{7F}".utf8))).description == #"a\x0Ab\x7F"#)
    }

    @Test func orderIsByteOrder() throws {
        let names = try [[0x62], [0x61, 0xFF], [0x61], [0xFF], [0x61, 0x62]].map { try #require(FileName($0)) }
        #expect(names.sorted().map(\.bytes) == [[0x61], [0x61, 0x62], [0x61, 0xFF], [0x62], [0xFF]])
    }

    @Test func suffixesAreBytes() throws {
        let name = try #require(FileName([0xFF] + Array("x.db-journal".utf8)))
        #expect(name.hasSuffix("-journal"))
        #expect(!name.hasSuffix("-wal"))
        #expect(name.appending(".1").bytes == name.bytes + Array(".1".utf8))
    }
}

@Suite struct MountPathBytesTests {
    @Test func pathsOfAnyBytesRoundTrip() throws {
        for bytes: [UInt8] in [[0x2F], [0x2F, 0xFF], [0x2F, 0x61, 0x2F, 0xC3, 0x28, 0x2F, 0x80], Array("/日本/x".utf8)] {
            let path = try #require(MountPath(bytes: bytes))
            #expect(path.bytes == bytes)
        }
        #expect(MountPath(bytes: [0x2F, 0x61, 0x00]) == nil, "no name holds NUL")
        #expect(MountPath(bytes: Array("/a/../b".utf8)) == nil)
    }

    @Test func badBytesAreNotTheirRepair() throws {
        let raw = try #require(MountPath(bytes: [0x2F, 0x64, 0x2F, 0xFF]))
        let repaired = try #require(MountPath("/d/\u{FFFD}"))
        #expect(raw != repaired)
        #expect(!raw.isWithin(repaired) && !repaired.isWithin(raw))
        #expect(raw.isWithin(try #require(MountPath("/d"))))
        #expect(raw.description == #"/d/\xFF"#)
    }

    @Test func pathsSortByTheirBytes() throws {
        let paths = try ["/a b", "/a/b", "/a", "/\u{FFFD}"].map { try #require(MountPath($0)) }
            + [try #require(MountPath(bytes: [0x2F, 0xFF]))]
        #expect(paths.sorted().map(\.bytes) == paths.map(\.bytes).sorted { $0.lexicographicallyPrecedes($1) })
    }
}
