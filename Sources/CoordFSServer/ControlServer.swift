import CoordFSCore
import CoordFSProtocol

/// The control socket of one mount (built in issue 4).
public enum ControlServerInfo {
    public static let protocolVersion = ProtocolVersion.current
}
