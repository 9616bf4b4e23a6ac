import CoordFSProtocol
import Foundation
import Glibc

/// Why a `LineClient` call failed (connect, send, a missing or unreadable line, a closed connection).
public struct LineClientError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// A blocking line-oriented client on a plain socket: what a script in any language does.
/// Shared by the server tests (a scratch socket) and the integration tests (a mount's socket).
public final class LineClient {
    public let fd: Int32
    private var framer = LineFramer(maxLineBytes: 64 << 20)

    public init(socketPath: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            for (index, byte) in socketPath.utf8.enumerated() { buffer[index] = byte }
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard result == 0 else {
            let error = errno
            Glibc.close(fd)
            throw LineClientError("connect: \(String(cString: strerror(error)))")
        }
    }

    deinit { Glibc.close(fd) }

    public func send(_ text: String) throws {
        try send(Array(text.utf8) + [UInt8(ascii: "\n")])
    }

    public func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let count = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL)) }
            if count < 0 {
                if errno == EINTR { continue }
                throw LineClientError("send: \(String(cString: strerror(errno)))")
            }
            offset += count
        }
    }

    /// The next line, or an error when none comes in time or the server closed.
    public func readLine(timeout: Duration = .seconds(10)) throws -> [UInt8] {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let frame = framer.next() {
                if case .line(let line) = frame { return line }
                continue
            }
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else { throw LineClientError("no line within \(timeout)") }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(clamping: remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000 + 1)
            let ready = poll(&poller, 1, milliseconds)
            if ready < 0 && errno == EINTR { continue }
            if ready <= 0 { continue }
            var buffer = [UInt8](repeating: 0, count: 65_536)
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw LineClientError("the server closed the connection") }
            framer.append(buffer[0..<count])
        }
    }

    /// True when the server closed the connection (or closes it within `timeout`).
    public func isClosedByServer(timeout: Duration = .seconds(5)) -> Bool {
        do {
            while true { _ = try readLine(timeout: timeout) }
        } catch {
            return "\(error)".contains("closed")
        }
    }

    public func readJSON(timeout: Duration = .seconds(10)) throws -> [String: Any] {
        let line = try readLine(timeout: timeout)
        guard let object = try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any] else {
            throw LineClientError("not a JSON object: \(String(decoding: line, as: UTF8.self))")
        }
        return object
    }

    /// Sends a request and returns the next reply, keeping pushes that come before it.
    public func request(_ text: String, timeout: Duration = .seconds(10)) throws -> [String: Any] {
        try send(text)
        while true {
            let message = try readJSON(timeout: timeout)
            if message["push"] != nil {
                pushes.append(message)
                continue
            }
            return message
        }
    }

    /// Pushes read while waiting for replies, oldest first.
    public var pushes: [[String: Any]] = []

    /// The next push (a buffered one first).
    public func nextPush(timeout: Duration = .seconds(10)) throws -> [String: Any] {
        if !pushes.isEmpty { return pushes.removeFirst() }
        while true {
            let message = try readJSON(timeout: timeout)
            if message["push"] != nil { return message }
            throw LineClientError("expected a push, got a reply: \(message)")
        }
    }
}

extension Dictionary where Key == String, Value == Any {
    /// The error code of a reply, nil for a success or a push.
    public var errorCode: String? { (self["error"] as? [String: Any])?["code"] as? String }
    /// The `ok` object of a successful reply.
    public var ok: [String: Any]? { self["ok"] as? [String: Any] }
}
