import Testing
import CoordFSProtocol

@Suite struct ProtocolVersionTests {
    @Test func versionIsPositive() {
        #expect(ProtocolVersion.current >= 1)
    }
}
