import SystemPackage

/// A request with its id: what one line from a client holds.
public struct RequestEnvelope: Sendable, Hashable {
    public var id: RequestID
    public var request: Request

    public init(id: RequestID, request: Request) {
        self.id = id
        self.request = request
    }
}

/// Why a line is not a request the server can act on; the server answers it with an error
/// carrying `id` when the line had a usable one.
public struct RequestRejection: Error, Sendable, Hashable {
    public var id: RequestID?
    public var code: ErrorCode
    public var message: String

    public init(id: RequestID?, code: ErrorCode, message: String) {
        self.id = id
        self.code = code
        self.message = message
    }
}

private enum EnvelopeKey: String, CodingKey {
    case id, op
}

extension RequestEnvelope: Codable {
    public init(from decoder: any Decoder) throws {
        let container: KeyedDecodingContainer<EnvelopeKey>
        do {
            container = try decoder.container(keyedBy: EnvelopeKey.self)
        } catch {
            throw RequestRejection(id: nil, code: .badJSON, message: "a message is one JSON object on one line")
        }
        var id: RequestID?
        do {
            id = try container.decodeIfPresent(RequestID.self, forKey: .id)
        } catch {
            throw RequestRejection(id: nil, code: .badRequest, message: "\"id\" must be an integer or a string")
        }
        guard let id else {
            throw RequestRejection(id: nil, code: .badRequest, message: "a request needs an \"id\" (an integer or a string)")
        }
        let op: String
        do {
            guard let value = try container.decodeIfPresent(String.self, forKey: .op) else {
                throw RequestRejection(id: id, code: .badRequest, message: "a request needs an \"op\": one of \(Request.operations.joined(separator: ", "))")
            }
            op = value
        } catch let rejection as RequestRejection {
            throw rejection
        } catch {
            throw RequestRejection(id: id, code: .badRequest, message: "\"op\" must be a string")
        }
        do {
            switch op {
            case "hello": request = .hello(try .init(from: decoder))
            case "subscribe": request = .subscribe(try .init(from: decoder))
            case "unsubscribe": request = .unsubscribe(try .init(from: decoder))
            case "present": request = .present(try .init(from: decoder))
            case "answer": request = .answer(try .init(from: decoder))
            case "unpresent": request = .unpresent(try .init(from: decoder))
            case "claim": request = .claim(try .init(from: decoder))
            case "release": request = .release(try .init(from: decoder))
            case "cancel": request = .cancel(try .init(from: decoder))
            case "status": request = .status(Request.Status())
            case "versions": request = .versions(try .init(from: decoder))
            case "version-read": request = .versionRead(try .init(from: decoder))
            case "version-change": request = .versionChange(try .init(from: decoder))
            case "version-remove": request = .versionRemove(try .init(from: decoder))
            case "conflicts": request = .conflicts(try .init(from: decoder))
            case "version-restored": request = .versionRestored(try .init(from: decoder))
            default:
                throw RequestRejection(id: id, code: .unknownRequest,
                                       message: "unknown op \"\(op.prefix(64))\"; known: \(Request.operations.joined(separator: ", "))")
            }
        } catch let rejection as RequestRejection {
            throw rejection
        } catch let invalid as InvalidWirePath {
            throw RequestRejection(id: id, code: .invalidPath, message: "\(op): \"\(invalid.field)\" holds a NUL byte, which no path can")
        } catch let error as DecodingError {
            throw RequestRejection(id: id, code: .badRequest, message: "\(op): \(WireFormat.explain(error))")
        } catch {
            throw RequestRejection(id: id, code: .badRequest, message: "\(op): \(error)")
        }
        self.id = id
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: EnvelopeKey.self)
        try container.encode(id, forKey: .id)
        try container.encode(request.op, forKey: .op)
        switch request {
        case .hello(let body): try body.encode(to: encoder)
        case .subscribe(let body): try body.encode(to: encoder)
        case .unsubscribe(let body): try body.encode(to: encoder)
        case .present(let body): try body.encode(to: encoder)
        case .answer(let body): try body.encode(to: encoder)
        case .unpresent(let body): try body.encode(to: encoder)
        case .claim(let body): try body.encode(to: encoder)
        case .release(let body): try body.encode(to: encoder)
        case .cancel(let body): try body.encode(to: encoder)
        case .status(let body): try body.encode(to: encoder)
        case .versions(let body): try body.encode(to: encoder)
        case .versionRead(let body): try body.encode(to: encoder)
        case .versionChange(let body): try body.encode(to: encoder)
        case .versionRemove(let body): try body.encode(to: encoder)
        case .conflicts(let body): try body.encode(to: encoder)
        case .versionRestored(let body): try body.encode(to: encoder)
        }
    }
}
