import CoordFSProtocol

/// The Swift client library of the control socket (built in issue 4).
public enum CoordFSClientInfo {
    public static let protocolVersion = ProtocolVersion.current
}
