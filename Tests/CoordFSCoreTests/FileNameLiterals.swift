@testable import CoordFSCore

/// Names written in tests as literals ("a", "f\(i)"). Only in the tests: in the library a
/// literal could quietly pick a system call's name overload where a path was meant.
extension FileName: ExpressibleByStringLiteral, ExpressibleByStringInterpolation {
    public init(stringLiteral text: String) {
        self = text.isEmpty ? .empty : FileName(text.utf8)!
    }
}

/// The name whose bytes are `text`'s UTF-8.
func name(_ text: some StringProtocol) -> FileName {
    FileName(text.utf8)!
}
