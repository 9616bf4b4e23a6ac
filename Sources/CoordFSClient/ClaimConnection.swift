import Glibc

/// Explicit claims over a plain blocking socket: for a short-lived command that takes its
/// claims, runs, and ends (`coordfs exec`).
///
/// `CoordFSConnection` reads on SwiftNIO's event loop so that pushes and replies can come at
/// any time; a command that only asks for claims and then waits for its child needs none of
/// that, and starting NIO's and the concurrency pool's threads costs it more than the whole
/// exchange with the server. This one writes a request and reads until its reply, on the
/// calling thread. `hello` goes out with the first claim and both replies are read together:
/// one round trip, as replies come in the order of the requests.
///
/// Not Sendable: one thread uses it. The claims last until `close()` (or the process's end:
/// the kernel closes the socket, and the server releases them).
public final class ClaimConnection {
    public let socketPath: String
    private let descriptor: Int32
    private var framer = LineFramer(maxLineBytes: 64 << 20)
    private var nextID: Int64 = 1
    /// The `hello` whose reply has not been read yet.
    private var unconfirmedHello: Int64?
    /// What the server said in a `bye` push, for the error when it then closes.
    private var farewell: String?
    private var closed = false
    /// Claims the server broke that the caller has not taken yet (`takeBrokenClaims`).
    private var brokenClaims: [BrokenPush] = []

    /// The socket, for a caller that polls it while it waits for something else; when it is
    /// readable, call `takeBrokenClaims`.
    public var pollDescriptor: Int32 { descriptor }

    /// Reads what the server has sent without waiting for more, and returns the claims it
    /// broke since the last call (a claim that kept another user waiting for the mount's break
    /// time). Throws `.closed` when the server closed the connection.
    public func takeBrokenClaims() throws(CoordFSError) -> [BrokenPush] {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            while let frame = framer.next() {
                guard case .line(let line) = frame else { continue }
                switch ShortExchange.message(line) {
                case .broken(let broken)?: brokenClaims.append(broken)
                case .push(let bye?)?: farewell = bye
                default: continue
                }
            }
            let count = buffer.withUnsafeMutableBytes { Glibc.recv(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if count < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { break }
                throw .closed(reason: "\(Errno(rawValue: errno))")
            }
            if count == 0 {
                defer { brokenClaims.removeAll() }
                if !brokenClaims.isEmpty { return brokenClaims }
                throw .closed(reason: farewell.map { "the server said: \($0)" } ?? "the server closed the connection")
            }
            buffer.withUnsafeBytes { framer.append(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
        }
        defer { brokenClaims.removeAll() }
        return brokenClaims
    }

    /// Connects to a control socket; the `hello` is sent at once, its reply read with the
    /// first request's.
    public init(socketPath: String, client: String = CoordFSConnection.defaultClientName) throws(CoordFSError) {
        self.socketPath = socketPath
        descriptor = try ControlSocketAddress.connect(socketPath)
        let hello = nextRequestID()
        do {
            try send(ShortExchange.line(id: hello, hello: .init(version: ProtocolVersion.current, client: client)))
        } catch {
            Glibc.close(descriptor)
            throw error
        }
        unconfirmedHello = hello
    }

    deinit {
        close()
    }

    /// Takes claims on several paths, all or none, as `CoordFSConnection.claim` does: `timeout`
    /// `.zero` fails at once with `conflict`, nil waits the mount's claim timeout, a wait that
    /// runs out fails with `timeout`. Blocks until the server answers.
    public func claim(reading: [FilePath] = [], writing: [FilePath] = [], timeout: Duration? = nil) throws(CoordFSError) -> CoordFSConnection.HeldClaim {
        let id = nextRequestID()
        guard let line = ShortExchange.line(id: id, claim: Request.Claim(reading: reading, writing: writing, timeout: timeout)) else {
            throw .protocolViolation("a claim's wait must be a number of seconds")
        }
        try send(line)
        if let hello = unconfirmedHello {
            unconfirmedHello = nil
            _ = try reply(to: hello)
        }
        guard let reply = ShortExchange.claimReply(try reply(to: id)) else {
            throw .protocolViolation("a claim reply without its claim")
        }
        return .init(id: reply.claim, reading: reply.read, writing: reply.write, waited: reply.waited)
    }

    /// Closes the connection: the server releases its claims at once.
    public func close() {
        guard !closed else { return }
        closed = true
        Glibc.close(descriptor)
    }

    // MARK: The exchange

    private func nextRequestID() -> Int64 {
        defer { nextID += 1 }
        return nextID
    }

    private func send(_ line: [UInt8]) throws(CoordFSError) {
        var offset = 0
        while offset < line.count {
            let count = line.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if count < 0 {
                if errno == EINTR { continue }
                throw .closed(reason: "\(Errno(rawValue: errno))")
            }
            offset += count
        }
    }

    /// Reads lines until the reply to `id`, skipping pushes (and replies to nothing still
    /// asked), and returns its `ok` body; an error reply is thrown as `.server`.
    private func reply(to id: Int64) throws(CoordFSError) -> JSONValue {
        while true {
            switch ShortExchange.message(try nextLine()) {
            case .ok(.number(id), let body)?:
                return body
            case .error(let replyID, let detail)? where replyID == .number(id) || replyID == nil:
                // (No id: the server could not read a line of ours, which leaves nothing to wait for.)
                throw .server(detail)
            case .push(let bye)?:
                if let bye { farewell = bye }
            case .broken(let broken)?:
                brokenClaims.append(broken)
            case .ok?, .error?:
                continue
            case nil:
                throw .protocolViolation("a line that is not a message of the protocol")
            }
        }
    }

    private func nextLine() throws(CoordFSError) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            if let frame = framer.next() {
                guard case .line(let line) = frame else { continue }
                return line
            }
            let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw .closed(reason: "\(Errno(rawValue: errno))")
            }
            if count == 0 {
                throw .closed(reason: farewell.map { "the server said: \($0)" } ?? "the server closed the connection")
            }
            buffer.withUnsafeBytes { framer.append(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
        }
    }
}

extension Request.Claim {
    /// The request for these paths, waiting as `timeout` says (see `CoordFSConnection.claim`).
    init(reading: [FilePath], writing: [FilePath], timeout: Duration?) {
        self.init(read: reading.isEmpty ? nil : reading, write: writing.isEmpty ? nil : writing)
        if let timeout {
            if timeout <= .zero {
                nonblock = true
            } else {
                wait = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
            }
        }
    }
}

/// Connecting to a control socket, for both kinds of connection.
enum ControlSocketAddress {
    /// A connected, close-on-exec socket: a child process (`coordfs exec`'s command) must
    /// never inherit it, or a claim would outlive the process that took it.
    static func connect(_ path: String) throws(CoordFSError) -> Int32 {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        // The limit both sides keep (ProtocolLimits), a little under sun_path's size.
        guard bytes.count <= ProtocolLimits.maxSocketPathBytes, !bytes.contains(0) else {
            throw .cannotConnect(socket: path, reason: "the path is too long for a socket (at most \(ProtocolLimits.maxSocketPathBytes) bytes)")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw .cannotConnect(socket: path, reason: Errno(rawValue: errno).description) }
        let length = socklen_t(MemoryLayout.offset(of: \sockaddr_un.sun_path)! + bytes.count + 1)
        while withUnsafePointer(to: &address, {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, length) }
        }) != 0 {
            let error = Errno(rawValue: errno)
            guard error == .interrupted else {
                Glibc.close(descriptor)
                let reason = error == .connectionRefused ? "nobody listens there (is the mount still running?)" : error.description
                throw .cannotConnect(socket: path, reason: reason)
            }
        }
        return descriptor
    }
}
