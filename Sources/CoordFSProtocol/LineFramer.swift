/// Splits a byte stream into newline-terminated lines, with a bound on line length.
///
/// A line longer than `maxLineBytes` is reported once, as soon as it passes the bound (so the
/// sender hears of it without the server waiting for an end that may never come), and the
/// rest of it is skipped up to its newline; the stream then goes on with the next line. A
/// carriage return before the newline is dropped, so `\r\n` senders work too. Memory stays
/// within about `maxLineBytes` plus one read.
public struct LineFramer: Sendable {
    public enum Frame: Sendable, Hashable {
        case line([UInt8])
        /// A line passed the bound; at least `bytes` of it were seen and it is being skipped.
        case tooLarge(bytes: Int)
    }

    public let maxLineBytes: Int
    private var buffer: [UInt8] = []
    /// Where the unconsumed bytes begin (consumed ones are compacted away now and then).
    private var start = 0
    /// How far from `start` the buffer is known to hold no newline.
    private var scanned = 0
    /// True while skipping the rest of an oversized line.
    private var skipping = false

    public init(maxLineBytes: Int = ProtocolLimits.defaultMaxLineBytes) {
        precondition(maxLineBytes > 0)
        self.maxLineBytes = maxLineBytes
    }

    public mutating func append(_ bytes: some Sequence<UInt8>) {
        buffer.append(contentsOf: bytes)
    }

    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        buffer.append(contentsOf: bytes)
    }

    /// Bytes held that are not yet part of a returned line.
    public var pendingBytes: Int { buffer.count - start }

    /// The next complete line or oversize report, or nil until more bytes come.
    public mutating func next() -> Frame? {
        while true {
            let newline = buffer[(start + scanned)...].firstIndex(of: UInt8(ascii: "\n"))
            guard let newline else {
                if skipping {
                    buffer.removeAll(keepingCapacity: true)
                    start = 0
                    scanned = 0
                    return nil
                }
                scanned = buffer.count - start
                if scanned > maxLineBytes {
                    let seen = scanned
                    skipping = true
                    buffer.removeAll(keepingCapacity: false)
                    start = 0
                    scanned = 0
                    return .tooLarge(bytes: seen)
                }
                compact()
                return nil
            }
            let lineStart = start
            start = newline + 1
            scanned = 0
            if skipping {
                skipping = false
                continue
            }
            var end = newline
            if end > lineStart && buffer[end - 1] == UInt8(ascii: "\r") { end -= 1 }
            if end - lineStart > maxLineBytes {
                compact()
                return .tooLarge(bytes: end - lineStart)
            }
            let line = Array(buffer[lineStart..<end])
            compact()
            return .line(line)
        }
    }

    /// Drops consumed bytes once they are the larger part of the buffer, so many small lines in
    /// one read cost one move, not one each.
    private mutating func compact() {
        if start == buffer.count {
            buffer.removeAll(keepingCapacity: buffer.capacity <= 65_536)
            start = 0
        } else if start > 4096 && start * 2 > buffer.count {
            buffer.removeSubrange(0..<start)
            start = 0
        }
    }
}
