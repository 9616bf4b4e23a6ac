#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// JSON in and out, the same way on both sides: compact, one message per line, keys in
/// their declared order, slashes left alone (paths stay readable).
public enum WireFormat {
    public static func makeDecoder() -> JSONDecoder {
        JSONDecoder()
    }

    /// `value` as one line: its JSON and a newline.
    public static func line(_ value: some Encodable) throws -> [UInt8] {
        var bytes = try JSONLineEncoder().encode(value)
        bytes.append(UInt8(ascii: "\n"))
        return bytes
    }

    /// Reads one request line; every way it can be wrong becomes a `RequestRejection`.
    public static func decodeRequest(_ line: some Collection<UInt8>, decoder: JSONDecoder = makeDecoder()) -> Result<RequestEnvelope, RequestRejection> {
        let data = Data(line)
        do {
            return .success(try decoder.decode(RequestEnvelope.self, from: data))
        } catch let rejection as RequestRejection {
            return .failure(rejection)
        } catch let error as DecodingError {
            if case .dataCorrupted = error {
                return .failure(RequestRejection(id: nil, code: .badJSON, message: "not valid JSON: \(explain(error))"))
            }
            return .failure(RequestRejection(id: nil, code: .badJSON, message: explain(error)))
        } catch {
            return .failure(RequestRejection(id: nil, code: .badJSON, message: "not valid JSON"))
        }
    }

    /// A decoding error in a sentence that names the field.
    public static func explain(_ error: DecodingError) -> String {
        func field(_ path: [any CodingKey]) -> String {
            var text = ""
            for key in path {
                if let index = key.intValue { text += "[\(index)]" } else { text += (text.isEmpty ? "" : ".") + key.stringValue }
            }
            return text.isEmpty ? "the message" : "\"\(text)\""
        }
        switch error {
        case .keyNotFound(let key, let context):
            return "missing field \(field(context.codingPath + [key]))"
        case .typeMismatch(let type, let context):
            return "\(field(context.codingPath)) must be \(describe(type))"
        case .valueNotFound(let type, let context):
            return "\(field(context.codingPath)) must be \(describe(type)), not null"
        case .dataCorrupted(let context):
            if context.codingPath.isEmpty { return context.debugDescription }
            return "\(field(context.codingPath)): \(context.debugDescription)"
        @unknown default:
            return "\(error)"
        }
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: return "a string"
        case is Bool.Type: return "true or false"
        case is Int.Type, is Int64.Type, is UInt64.Type, is Int32.Type, is UInt32.Type: return "an integer"
        case is Double.Type: return "a number"
        default:
            let name = "\(type)"
            if name.hasPrefix("Array") { return "an array" }
            if name.hasPrefix("Dictionary") { return "an object" }
            return "of type \(name)"
        }
    }
}

/// What a client reads: a reply to one of its requests, or a push.
public enum ServerLine: Sendable {
    /// A reply; `error` is set when the request failed. Decode the `ok` body with
    /// `WireFormat.decodeReplyBody`, knowing which request `id` was.
    case reply(id: RequestID?, error: ErrorDetail?)
    case push(Push)

    private static let pushPrefix = Array(#"{"push":"#.utf8)

    private struct Header: Decodable {
        var push: String?
        var id: RequestID?
        var error: ErrorDetail?
    }

    public static func classify(_ data: some Collection<UInt8>, decoder: JSONDecoder = WireFormat.makeDecoder()) throws -> ServerLine {
        let data = Data(data)
        // Pushes from this server begin with their "push" key (keys keep their order): one
        // parse instead of two for the bulk of a subscriber's traffic.
        if data.starts(with: pushPrefix), let push = try? decoder.decode(Push.self, from: data) {
            return .push(push)
        }
        let header = try decoder.decode(Header.self, from: data)
        if header.push != nil {
            return .push(try decoder.decode(Push.self, from: data))
        }
        return .reply(id: header.id, error: header.error)
    }
}

extension WireFormat {
    public static func decodeReplyBody<Body: Codable & Sendable>(_ type: Body.Type, from data: some Collection<UInt8>, decoder: JSONDecoder = makeDecoder()) throws -> Body {
        try decoder.decode(OkReply<Body>.self, from: Data(data)).ok
    }
}
