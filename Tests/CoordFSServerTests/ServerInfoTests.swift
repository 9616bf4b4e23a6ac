import Testing
import CoordFSServer
import CoordFSClient

@Suite struct ServerInfoTests {
    @Test func serverAndClientSpeakOneVersion() {
        #expect(ControlServerInfo.protocolVersion == CoordFSClientInfo.protocolVersion)
    }
}
