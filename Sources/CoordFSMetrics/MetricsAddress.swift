/// Where the metrics endpoint listens: a loopback address and a port, as `--metrics` gives
/// them (`127.0.0.1:9464`, `[::1]:9464`, `localhost:9464`). Only loopback: the endpoint has no
/// authentication, and the series name nothing private, but a mount's activity is still
/// nobody else's business; a scraper elsewhere reaches it through a local agent or a tunnel.
public struct MetricsAddress: Sendable, Hashable, CustomStringConvertible {
    /// The host as bind(2) gets it: `127.0.0.1`, `::1`, or `localhost`.
    public let host: String
    public let port: Int

    /// Parses `HOST:PORT`; the error says in one line what is wrong.
    public init(_ text: String) throws(MetricsAddressError) {
        guard let colon = text.lastIndex(of: ":") else {
            throw MetricsAddressError("--metrics takes HOST:PORT on loopback, such as 127.0.0.1:9464 (got '\(text)')")
        }
        var host = String(text[..<colon])
        let portText = text[text.index(after: colon)...]
        guard let port = Int(portText), (1...65_535).contains(port) else {
            throw MetricsAddressError("--metrics: '\(portText)' is not a port number from 1 to 65535")
        }
        if host.hasPrefix("[") && host.hasSuffix("]") {
            host = String(host.dropFirst().dropLast())
        } else if host.contains(":") {
            throw MetricsAddressError("--metrics: write an IPv6 address in brackets, such as [::1]:\(port)")
        }
        guard Self.isLoopback(host) else {
            throw MetricsAddressError("--metrics: '\(host)' is not a loopback address (use 127.0.0.1, [::1] or localhost)")
        }
        self.host = host
        self.port = port
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// `localhost`, `::1` (or its long form), or an IPv4 address in 127.0.0.0/8.
    static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host == "::1" || host == "0:0:0:0:0:0:0:1" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts.allSatisfy({ !$0.isEmpty && $0.count <= 3 && UInt8($0) != nil }) else { return false }
        return parts[0] == "127"
    }
}

public struct MetricsAddressError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
