import CoordFSClient
@testable import coordfs
import Testing

/// `coordfs watch --json` prints the protocol's event, and its overflow marker under
/// `"overflow"`, in the bytes scripts have read from it since the marker came in.
struct WatchJSONLineTests {
    @Test func overflowLines() {
        let lines = WatchOptions.jsonLine(.overflow(.init(dropped: 812, first: 131, last: 942)))
        #expect(String(decoding: lines.bytes, as: UTF8.self) == #"{"overflow":{"dropped":812,"first":131,"last":942}}"#)
        let backing = WatchOptions.jsonLine(.overflow(.init(dropped: 0, first: 943, last: 942, reason: .backing)))
        #expect(String(decoding: backing.bytes, as: UTF8.self) == #"{"overflow":{"dropped":0,"first":943,"last":942,"reason":"backing"}}"#)
    }

    @Test func anEventLineIsTheWireEvent() throws {
        let event = EventRecord(sequence: 3, kind: .changed, path: "/f", directory: false,
                               origin: .init(pid: 9, uid: 0, process: "sh"), size: 12, time: 1_700_000_000.5)
        #expect(WatchOptions.jsonLine(.event(event)).bytes == (try JSONLineEncoder().encode(event)))
        #expect(String(decoding: WatchOptions.jsonLine(.event(event)).bytes, as: UTF8.self)
                    == #"{"sequence":3,"kind":"changed","path":"/f","directory":false,"origin":{"pid":9,"uid":0,"process":"sh"},"size":12,"time":1700000000.5}"#)
    }
}
