/// A shell-style pattern for one path component: `*` (any run of characters, also none),
/// `?` (one character), `[...]` (one character of a set: ranges `a-z`, negation with `!` or
/// `^`, `]` first to include it), and `\` to take the next character literally. As fnmatch
/// without flags, `*` also matches a leading dot. Characters are Unicode scalars, so `?`
/// matches one letter of a non-ASCII name, not one byte of it; a byte of a name that is not
/// valid UTF-8 is one character that only `?`, `*` and a negated set match.
///
/// Parsed once, matched many times (on every open for writing); matching is iterative with
/// one backtrack point, so no pattern makes it take more than length × length steps.
struct GlobPattern: Sendable, Equatable {
    enum Token: Sendable, Equatable {
        case literal(Unicode.Scalar)
        case any                       // ?
        case star                      // *
        case set(ranges: [ClosedRange<Unicode.Scalar>], negated: Bool)

        /// `scalar` is nil for a byte that is not valid UTF-8 (see `FileName.scalars`).
        func matches(_ scalar: Unicode.Scalar?) -> Bool {
            switch self {
            case .literal(let expected): return scalar == expected
            case .any: return true
            case .star: return true
            case .set(let ranges, let negated):
                guard let scalar else { return negated }
                return ranges.contains { $0.contains(scalar) } != negated
            }
        }
    }

    let tokens: [Token]
    /// For a pattern that is `*` and then plain characters (`*.db`, most of the in-place
    /// defaults): those characters, which a name matches by ending with them.
    let literalSuffix: [Unicode.Scalar]?

    init(_ text: some StringProtocol) {
        let scalars = Array(text.unicodeScalars)
        var tokens: [Token] = []
        var index = 0
        while index < scalars.count {
            let scalar = scalars[index]
            switch scalar {
            case "*":
                if tokens.last != .star { tokens.append(.star) } // ** within a name is *
                index += 1
            case "?":
                tokens.append(.any)
                index += 1
            case "[":
                if let (token, next) = Self.parseSet(scalars, from: index) {
                    tokens.append(token)
                    index = next
                } else {
                    tokens.append(.literal("[")) // unclosed: a plain bracket, as fnmatch takes it
                    index += 1
                }
            case "\\" where index + 1 < scalars.count:
                tokens.append(.literal(scalars[index + 1]))
                index += 2
            default:
                tokens.append(.literal(scalar))
                index += 1
            }
        }
        self.tokens = tokens
        var suffix: [Unicode.Scalar] = []
        for token in tokens.dropFirst() {
            guard case .literal(let scalar) = token else { break }
            suffix.append(scalar)
        }
        literalSuffix = tokens.first == .star && suffix.count == tokens.count - 1 ? suffix : nil
    }

    /// Parses `[...]` starting at `start` (the `[`); nil when it is never closed.
    private static func parseSet(_ scalars: [Unicode.Scalar], from start: Int) -> (Token, Int)? {
        var index = start + 1
        var negated = false
        if index < scalars.count, scalars[index] == "!" || scalars[index] == "^" {
            negated = true
            index += 1
        }
        var ranges: [ClosedRange<Unicode.Scalar>] = []
        var first = true
        while index < scalars.count {
            var low = scalars[index]
            if low == "]" && !first {
                return (.set(ranges: ranges, negated: negated), index + 1)
            }
            first = false
            if low == "\\", index + 1 < scalars.count {
                index += 1
                low = scalars[index]
            }
            if index + 2 < scalars.count, scalars[index + 1] == "-", scalars[index + 2] != "]" {
                var high = scalars[index + 2]
                var end = index + 2
                if high == "\\", end + 1 < scalars.count {
                    end += 1
                    high = scalars[end]
                }
                if low <= high { ranges.append(low...high) } // a reversed range matches nothing
                index = end + 1
            } else {
                ranges.append(low...low)
                index += 1
            }
        }
        return nil
    }

    /// Whether the whole of `name` matches.
    func matches(_ name: some StringProtocol) -> Bool {
        matches(scalars: name.unicodeScalars.map { $0 })
    }

    /// The same for a name already split into scalars (`FileName.scalars`: nil for a byte that
    /// is not valid UTF-8): a policy tries many patterns on one name, on every open for
    /// writing, and splits it once.
    func matches(scalars: [Unicode.Scalar?]) -> Bool {
        if let literalSuffix {
            return scalars.count >= literalSuffix.count && scalars.suffix(literalSuffix.count).elementsEqual(literalSuffix) { $0 == $1 }
        }
        return matchesTokens(scalars)
    }

    /// The general matcher, which `matches` skips for a `literalSuffix`.
    func matchesTokens(_ scalars: [Unicode.Scalar?]) -> Bool {
        var t = 0, s = 0
        var starToken = -1, starScalar = 0
        while s < scalars.count {
            if t < tokens.count, tokens[t] == .star {
                starToken = t
                starScalar = s
                t += 1
            } else if t < tokens.count, tokens[t].matches(scalars[s]) {
                t += 1
                s += 1
            } else if starToken >= 0 {
                // let the last star take one more character and retry from there
                starScalar += 1
                s = starScalar
                t = starToken + 1
            } else {
                return false
            }
        }
        while t < tokens.count, tokens[t] == .star { t += 1 }
        return t == tokens.count
    }
}

/// A pattern for whole mount paths: components separated by `/`, each a `GlobPattern`, where a
/// component that is exactly `**` matches any number of directories (none included).
/// A leading `/` is allowed and changes nothing: paths are always matched from the mount's root.
struct PathPattern: Sendable, Equatable {
    enum Part: Sendable, Equatable {
        case component(GlobPattern)
        case anyDepth
    }

    let parts: [Part]

    init(_ text: some StringProtocol) {
        parts = text.split(separator: "/", omittingEmptySubsequences: true).map { piece in
            piece == "**" ? .anyDepth : .component(GlobPattern(piece))
        }
    }

    func matches(_ components: [FileName]) -> Bool {
        // Positions in the path each prefix of the pattern can stand at, advanced part by
        // part: linear in parts × components, whatever the number of `**`.
        var reachable = [Bool](repeating: false, count: components.count + 1)
        reachable[0] = true
        for part in parts {
            var next = [Bool](repeating: false, count: components.count + 1)
            switch part {
            case .anyDepth:
                var seen = false
                for index in reachable.indices {
                    seen = seen || reachable[index]
                    next[index] = seen
                }
            case .component(let glob):
                for index in components.indices where reachable[index] && glob.matches(scalars: components[index].scalars) {
                    next[index + 1] = true
                }
            }
            reachable = next
        }
        return reachable[components.count]
    }
}

/// Patterns as the command line takes them: one without `/` is matched against an item's
/// name (`*.db`), one with `/` against its whole path (`/logs/**`). Used by the in-place
/// policy and by the version store's exclusions.
public struct PathPatternSet: Sendable, Equatable {
    let namePatterns: [GlobPattern]
    let pathPatterns: [PathPattern]

    /// Empty patterns are ignored.
    public init(_ patterns: [String]) {
        var names: [GlobPattern] = []
        var paths: [PathPattern] = []
        for pattern in patterns where !pattern.isEmpty {
            if pattern.contains("/") {
                paths.append(PathPattern(pattern))
            } else {
                names.append(GlobPattern(pattern))
            }
        }
        namePatterns = names
        pathPatterns = paths
    }

    public var isEmpty: Bool { namePatterns.isEmpty && pathPatterns.isEmpty }

    /// Whether a pattern matches `path`'s name or the whole path.
    public func matches(_ path: MountPath) -> Bool {
        if let name = path.name, !namePatterns.isEmpty {
            let scalars = name.scalars
            if namePatterns.contains(where: { $0.matches(scalars: scalars) }) { return true }
        }
        return pathPatterns.contains(where: { $0.matches(path.components) })
    }
}
