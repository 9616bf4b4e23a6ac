import CoordFSClient
import CoordFSExec
import Glibc
import SystemPackage

/// A line for standard output: text, and paths as their exact bytes, the way ls and
/// inotifywait print names (never repaired). Written as an interpolation:
/// `"\(path) \(event.kind)"` puts the path's bytes and the kind's text.
struct OutputLine: ExpressibleByStringInterpolation, Sendable {
    var bytes: [UInt8]

    init(stringLiteral text: String) {
        bytes = Array(text.utf8)
    }

    init(stringInterpolation: Interpolation) {
        bytes = stringInterpolation.bytes
    }

    init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// `value` as a line of compact JSON, as the control socket carries it (`--json`);
    /// `{}` for one that holds a number JSON has none for.
    init(json value: some Encodable) {
        bytes = (try? JSONLineEncoder().encode(value)) ?? Array("{}".utf8)
    }

    struct Interpolation: StringInterpolationProtocol {
        var bytes: [UInt8] = []

        init(literalCapacity: Int, interpolationCount: Int) {
            bytes.reserveCapacity(literalCapacity + 32 * interpolationCount)
        }

        mutating func appendLiteral(_ text: String) {
            bytes += text.utf8
        }

        mutating func appendInterpolation(_ path: FilePath) {
            bytes += WirePath.bytes(of: path)
        }

        mutating func appendInterpolation(_ paths: [FilePath], separator: String) {
            for (index, path) in paths.enumerated() {
                if index > 0 { bytes += separator.utf8 }
                bytes += WirePath.bytes(of: path)
            }
        }

        /// Bytes as they are (a path the user typed, put together with others).
        mutating func appendInterpolation(raw: [UInt8]) {
            bytes += raw
        }

        mutating func appendInterpolation(_ value: some CustomStringConvertible) {
            bytes += value.description.utf8
        }
    }
}
