/// The version of the control-socket protocol that this build speaks; the handshake compares it.
public enum ProtocolVersion {
    public static let current = 1
}
