import CoordFSCore

/// PostgreSQL array literals for one parameter each (libpq sends them as text): a statement that
/// takes many rows as a few arrays keeps one short text whatever the row count, so the server
/// parses little and the client builds little. Bytes travel as hex (`decode(x, 'hex')` on the
/// server), so no element ever needs quoting but text.
enum ArrayLiteral {
    /// `{2f61,NULL}`: each byte string as hex digits, nil as NULL.
    static func hex(_ values: [[UInt8]?]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var literal: [UInt8] = [UInt8(ascii: "{")]
        for (index, value) in values.enumerated() {
            if index > 0 { literal.append(UInt8(ascii: ",")) }
            guard let value else {
                literal += Array("NULL".utf8)
                continue
            }
            for byte in value {
                literal.append(digits[Int(byte >> 4)])
                literal.append(digits[Int(byte & 0xf)])
            }
        }
        literal.append(UInt8(ascii: "}"))
        return String(decoding: literal, as: UTF8.self)
    }

    static func hex(_ paths: [MountPath]) -> String {
        hex(paths.map { Optional($0.bytes) })
    }

    /// `{1,NULL,3}`.
    static func integers(_ values: [Int64?]) -> String {
        "{" + values.map { $0.map(String.init) ?? "NULL" }.joined(separator: ",") + "}"
    }

    /// `{t,f}`.
    static func booleans(_ values: [Bool]) -> String {
        "{" + values.map { $0 ? "t" : "f" }.joined(separator: ",") + "}"
    }

    /// `{"a","b \"c\""}`: every element quoted, backslashes and quotes escaped.
    static func texts(_ values: [String]) -> String {
        var literal = "{"
        for (index, value) in values.enumerated() {
            if index > 0 { literal += "," }
            literal += "\""
            for character in value.unicodeScalars {
                if character == "\\" || character == "\"" { literal += "\\" }
                literal.unicodeScalars.append(character)
            }
            literal += "\""
        }
        return literal + "}"
    }
}
