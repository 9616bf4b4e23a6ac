import Foundation
import SystemPackage
import Testing
import CoordFSProtocol

/// What the server writes, pinned byte for byte.
@Suite struct ProtocolServerLineTests {
    /// Docs/PROTOCOL.md's two markers, exactly.
    @Test func overflowMarkersWithAndWithoutAReason() throws {
        let full = Push.overflow(OverflowPush(subscription: 1, marker: .init(dropped: 812, first: 131, last: 942)))
        let backing = Push.overflow(OverflowPush(subscription: 1, marker: .init(dropped: 0, first: 943, last: 942, reason: .backing)))
        let lines = [(full, #"{"push":"overflow","subscription":1,"dropped":812,"first":131,"last":942}"#),
                     (backing, #"{"push":"overflow","subscription":1,"dropped":0,"first":943,"last":942,"reason":"backing"}"#)]
        for (push, documented) in lines {
            #expect(String(decoding: try WireFormat.line(push), as: UTF8.self) == documented + "\n")
            guard case .push(let decoded) = try ServerLine.classify(Array(documented.utf8)) else {
                Issue.record("not read as a push: \(documented)")
                continue
            }
            #expect(decoded == push)
        }
        #expect(OverflowReason.allCases.map(\.rawValue) == ["backing"])
    }
}
