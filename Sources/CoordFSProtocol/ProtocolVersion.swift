/// The version of the control-socket protocol that this build speaks; the handshake compares it.
public enum ProtocolVersion {
    public static let current = 1
    /// Every version this build can speak (the server answers `hello` with the highest one both know).
    public static let supported: ClosedRange<Int> = 1...1
}

/// Limits both sides keep to.
public enum ProtocolLimits {
    /// The longest line (one message, without its newline) a server accepts by default.
    public static let defaultMaxLineBytes = 1 << 20
    /// The longest control socket path, in bytes: server and client take the socket's address
    /// from SwiftNIO's `SocketAddress`, which stops at 103 (the limit shared with macOS; Linux
    /// alone would take 107).
    public static let maxSocketPathBytes = 103
}
