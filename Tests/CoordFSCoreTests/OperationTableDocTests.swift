import Foundation
import Testing
@testable import CoordFSCore

/// Docs/LOCKING.md's tables of what each operation claims and asks, read and compared with
/// `MountOperation` row by row: the document and the code cannot drift apart unnoticed.
///
/// Words in parentheses are remarks for the reader and are not compared; everything else in a
/// row must be one of the phrases below.
@Suite struct OperationTableDocTests {
    struct DocumentError: Error, CustomStringConvertible {
        let description: String
    }

    static let document: String = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return (try? String(contentsOf: root.appendingPathComponent("Docs/LOCKING.md"), encoding: .utf8)) ?? ""
    }()

    /// The inputs a row of the claims table may name under "when".
    enum Input: Hashable { case strictReads, inPlace }

    static let inputs: [String: Input] = ["`--strict-reads`": .strictReads, "in-place file": .inPlace]
    static let modes: [String: ClaimMode] = Dictionary(uniqueKeysWithValues: ClaimMode.allCases.map { ($0.description, $0) })
    static let claimedPaths: [String: [OperationPath]] = ["the item": [.item], "the source and the destination": [.source, .destination]]
    static let spans: [String: OperationClaim.Span] = ["for the operation": .operation, "until the handle's last release": .handle]
    static let kinds: [String: PresenterRequestKind] = ["save": .save, "relinquish": .relinquish, "accommodate-deletion": .accommodateDeletion]
    static let askedPaths: [String: OperationPath] = ["the item": .item, "the source": .source, "the destination": .destination]
    static let conditions: [String: PresenterQuestion.Condition] = [
        "if the rename replaces it": .ifDestinationIsReplaced,
        "unless the caller has it open for writing": .unlessCallerWritesIt,
    ]

    /// Every name the document may use, and the operation it stands for.
    static let operationsByName: [String: MountOperation] = {
        var byName: [String: MountOperation] = [:]
        for operation in MountOperation.allCases {
            for name in operation.names { precondition(byName.updateValue(operation, forKey: name) == nil, "\(name) twice") }
        }
        return byName
    }()

    // MARK: Reading the document

    /// The body rows of the first table after `heading`, cells trimmed; the header must be `columns`.
    static func table(under heading: String, columns: [String]) throws -> [[String]] {
        let lines = document.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard let start = lines.firstIndex(of: heading) else { throw DocumentError(description: "no section \(heading)") }
        let table = lines[(start + 1)...].drop { !$0.hasPrefix("|") }.prefix { $0.hasPrefix("|") }
        let rows = table.map { line in
            line.dropFirst().dropLast(line.hasSuffix("|") ? 1 : 0).split(separator: "|", omittingEmptySubsequences: false)
                .map { $0.trimmingCharacters(in: .whitespaces) }
        }
        guard rows.count > 2, rows[0] == columns else {
            throw DocumentError(description: "the table under \(heading) has columns \(rows.first ?? []), not \(columns)")
        }
        for row in rows.dropFirst(2) where row.count != columns.count {
            throw DocumentError(description: "row with \(row.count) cells: \(row)")
        }
        return Array(rows.dropFirst(2))
    }

    /// `text` without its remarks in parentheses, spaces tidied.
    static func withoutRemarks(_ text: String) -> String {
        var kept = ""
        var depth = 0
        for character in text {
            if character == "(" { depth += 1 } else if character == ")" { depth = max(0, depth - 1) } else if depth == 0 { kept.append(character) }
        }
        while kept.contains("  ") { kept = kept.replacingOccurrences(of: "  ", with: " ") }
        return kept.replacingOccurrences(of: " ,", with: ",").trimmingCharacters(in: .whitespaces)
    }

    static func lookUp<Value>(_ phrase: String, in vocabulary: [String: Value], _ what: String) throws -> Value {
        guard let value = vocabulary[phrase] else {
            throw DocumentError(description: "\"\(phrase)\" is no \(what) this test knows (\(vocabulary.keys.sorted()))")
        }
        return value
    }

    /// The operation names a cell lists, separated by commas.
    static func names(_ cell: String) throws -> [String] {
        let names = withoutRemarks(cell).split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        for name in names { _ = try lookUp(name, in: operationsByName, "operation") }
        return names
    }

    /// A claims-table row's claim: nil for "none", which names no path and no span.
    static func claim(_ mode: String, on paths: String, held span: String) throws -> OperationClaim? {
        let (mode, paths, span) = (withoutRemarks(mode), withoutRemarks(paths), withoutRemarks(span))
        if mode == "none" {
            guard paths.isEmpty, span.isEmpty else { throw DocumentError(description: "a claim of none on \(paths), \(span)") }
            return nil
        }
        return OperationClaim(try lookUp(mode, in: modes, "claim mode"), on: try lookUp(paths, in: claimedPaths, "set of claimed paths"),
                              for: try lookUp(span, in: spans, "span"))
    }

    /// A presenters-table row's questions: "none", or "`kind` of PATH[, CONDITION]" joined by ", then ".
    static func questions(_ cell: String) throws -> [PresenterQuestion] {
        let text = withoutRemarks(cell)
        if text == "none" { return [] }
        return try text.components(separatedBy: ", then ").map { (phrase: String) throws -> PresenterQuestion in
            // "…, to remove it": the question holds back a removal of the name, not a write.
            let removal = phrase.hasSuffix(", to remove it")
            let question = removal ? String(phrase.dropLast(", to remove it".count)) : phrase
            let parts = question.split(separator: "`", omittingEmptySubsequences: false)
            guard parts.count == 3, parts[0].isEmpty, parts[2].hasPrefix(" of ") else {
                throw DocumentError(description: "\"\(question)\" is not \"`kind` of a path\"")
            }
            let kind = try lookUp(String(parts[1]), in: kinds, "presenter request")
            let rest = parts[2].dropFirst(" of ".count).split(separator: ",", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            let path = try lookUp(rest[0], in: askedPaths, "path asked about")
            let condition: PresenterQuestion.Condition = try rest.count > 1 ? lookUp(rest[1], in: conditions, "condition") : .always
            return PresenterQuestion(kind, path, condition, holdingBack: removal ? .removal : nil)
        }
    }

    // MARK: The comparisons

    @Test func theClaimsTableIsTheCodes() throws {
        let rows = try Self.table(under: "## What each operation takes", columns: ["operation", "when", "claim", "on", "held"])
        // By name, then by the input a row names (nil for the row that applies otherwise).
        var documented: [String: [Input?: OperationClaim?]] = [:]
        for row in rows {
            let input: Input? = try row[1].isEmpty ? nil : Self.lookUp(row[1], in: Self.inputs, "input")
            let claim = try Self.claim(row[2], on: row[3], held: row[4])
            for name in try Self.names(row[0]) {
                let earlier = documented[name, default: [:]].updateValue(claim, forKey: input)
                #expect(earlier == nil, "\(name) has two rows for \(input.map { "\($0)" } ?? "the default")")
            }
        }
        for operation in MountOperation.allCases {
            for name in operation.names {
                let rules = documented[name] ?? [:]
                for strictReads in [false, true] {
                    for inPlace in [false, true] {
                        // The row for an input that holds, else the default row.
                        let holding = rules.keys.compactMap { $0 }.filter { $0 == .strictReads ? strictReads : inPlace }
                        #expect(holding.count <= 1, "\(name): rows for \(holding) all apply at once")
                        let key: Input? = holding.first
                        guard let documentedClaim = rules[key] else {
                            Issue.record("no row for \(name) (strict reads \(strictReads), in place \(inPlace))")
                            continue
                        }
                        let code = operation.claim(strictReads: strictReads, inPlace: inPlace)
                        #expect(code == documentedClaim, "\(name) (strict reads \(strictReads), in place \(inPlace)): the code claims \(String(describing: code))")
                    }
                }
            }
        }
    }

    @Test func thePresentersTableIsTheCodes() throws {
        let rows = try Self.table(under: "## Presenters come before claims", columns: ["access", "presenters asked, in this order"])
        var documented: [String: [PresenterQuestion]] = [:]
        for row in rows {
            let questions = try Self.questions(row[1])
            for name in try Self.names(row[0]) {
                #expect(documented.updateValue(questions, forKey: name) == nil, "\(name) has two rows")
            }
        }
        for operation in MountOperation.allCases {
            for name in operation.names {
                #expect(documented[name] == operation.presenterQuestions, "\(name): the code asks \(operation.presenterQuestions)")
            }
        }
    }

    /// The reader of the document must be able to fail: a row it cannot read is an error.
    @Test func unknownPhrasesAreErrors() throws {
        #expect(throws: DocumentError.self) { try Self.names("open for reading, chmod by path") }
        #expect(throws: DocumentError.self) { try Self.claim("write", on: "the parent", held: "for the operation") }
        #expect(throws: DocumentError.self) { try Self.claim("none", on: "the item", held: "") }
        #expect(throws: DocumentError.self) { try Self.questions("`relinquish` of the item, unless it is Tuesday") }
        #expect(throws: DocumentError.self) { try Self.questions("`save` then `relinquish` of the item") }
        #expect(try Self.questions("`save` of the item (when asked), then `relinquish` of the source")
            == [PresenterQuestion(.save, .item), PresenterQuestion(.relinquish, .source)])
    }
}
