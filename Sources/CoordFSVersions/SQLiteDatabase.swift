import CSQLite

/// What SQLite said went wrong.
struct SQLiteError: Error, CustomStringConvertible {
    let code: Int32
    let message: String

    var description: String { "SQLite error \(code): \(message)" }
}

/// A value bound to a statement or read from a row.
enum SQLiteValue: Equatable {
    case integer(Int64)
    case blob([UInt8])
    case text(String)
    case null

    var integer: Int64? {
        if case .integer(let value) = self { return value }
        return nil
    }

    var blob: [UInt8]? {
        switch self {
        case .blob(let bytes): bytes
        case .text(let text): Array(text.utf8)
        default: nil
        }
    }

    var text: String? {
        if case .text(let value) = self { return value }
        return nil
    }
}

/// One connection to a database file: a thin wrapper over SQLite's C API, with its statements
/// prepared once and kept. (GRDB would bring all of Foundation, CoreFoundation and ICU into the
/// statically linked daemon, doubling its size, for the dozen statements the index runs.)
///
/// Not Sendable: one thread at a time (`VersionIndex` keeps it under a lock). SQLite is opened
/// without its own mutexes for that reason.
final class SQLiteDatabase {
    private let handle: OpaquePointer
    private var statements: [String: OpaquePointer] = [:]

    init(path: String) throws(SQLiteError) {
        var opened: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let status = sqlite3_open_v2(path, &opened, flags, nil)
        guard status == SQLITE_OK, let opened else {
            let message = opened.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open \(path)"
            if let opened { sqlite3_close_v2(opened) }
            throw SQLiteError(code: status, message: message)
        }
        handle = opened
        sqlite3_busy_timeout(handle, 5_000)
    }

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close_v2(handle)
    }

    /// Runs one or more statements that take no arguments and return nothing of interest.
    func execute(_ sql: String) throws(SQLiteError) {
        var error: UnsafeMutablePointer<CChar>?
        let status = sqlite3_exec(handle, sql, nil, nil, &error)
        if status != SQLITE_OK {
            let message = error.map { String(cString: $0) } ?? "\(status)"
            sqlite3_free(error)
            throw SQLiteError(code: status, message: message)
        }
    }

    /// Runs one statement with `arguments` and returns its rows.
    @discardableResult
    func rows(_ sql: String, _ arguments: [SQLiteValue] = []) throws(SQLiteError) -> [[SQLiteValue]] {
        let statement = try prepared(sql)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        for (index, argument) in arguments.enumerated() {
            let position = Int32(index + 1)
            let status: Int32 = switch argument {
            case .integer(let value): sqlite3_bind_int64(statement, position, value)
            case .blob(let bytes): bytes.withUnsafeBytes { sqlite3_bind_blob(statement, position, $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32($0.count), csqlite_transient()) }
            case .text(let text): sqlite3_bind_text(statement, position, text, -1, csqlite_transient())
            case .null: sqlite3_bind_null(statement, position)
            }
            guard status == SQLITE_OK else { throw failure(status) }
        }
        var result: [[SQLiteValue]] = []
        while true {
            let status = sqlite3_step(statement)
            if status == SQLITE_DONE { return result }
            guard status == SQLITE_ROW else { throw failure(status) }
            result.append((0..<sqlite3_column_count(statement)).map { column(statement, $0) })
        }
    }

    /// The first column of the first row, nil when there is none.
    func value(_ sql: String, _ arguments: [SQLiteValue] = []) throws(SQLiteError) -> SQLiteValue? {
        try rows(sql, arguments).first?.first
    }

    /// The rowid of the last row inserted on this connection.
    var lastInsertedRowID: Int64 { sqlite3_last_insert_rowid(handle) }

    /// Runs `body` in one transaction, taken for writing at once: committed when it returns,
    /// rolled back when it throws.
    func transaction<Result>(_ body: () throws(SQLiteError) -> Result) throws(SQLiteError) -> Result {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    private func prepared(_ sql: String) throws(SQLiteError) -> OpaquePointer {
        if let statement = statements[sql] { return statement }
        var statement: OpaquePointer?
        let status = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard status == SQLITE_OK, let statement else { throw failure(status) }
        statements[sql] = statement
        return statement
    }

    private func column(_ statement: OpaquePointer, _ index: Int32) -> SQLiteValue {
        switch sqlite3_column_type(statement, index) {
        case SQLITE_INTEGER:
            return .integer(sqlite3_column_int64(statement, index))
        case SQLITE_BLOB:
            let count = Int(sqlite3_column_bytes(statement, index))
            guard count > 0, let bytes = sqlite3_column_blob(statement, index) else { return .blob([]) }
            return .blob(Array(UnsafeRawBufferPointer(start: bytes, count: count)))
        case SQLITE_TEXT:
            guard let text = sqlite3_column_text(statement, index) else { return .text("") }
            return .text(String(cString: text))
        case SQLITE_FLOAT:
            return .integer(Int64(sqlite3_column_double(statement, index)))
        default:
            return .null
        }
    }

    private func failure(_ status: Int32) -> SQLiteError {
        SQLiteError(code: status, message: String(cString: sqlite3_errmsg(handle)))
    }
}
