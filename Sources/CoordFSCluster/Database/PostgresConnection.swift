import CLibPQ
import Glibc

/// What went wrong talking to PostgreSQL: the server's or libpq's message, and the SQLSTATE
/// code when the server sent one (for example 57P01 when an administrator ended the session).
public struct DatabaseError: Error, CustomStringConvertible, Sendable {
    public let message: String
    public let sqlState: String?
    /// True when the connection itself is gone (not only this statement): the session's
    /// advisory locks went with it.
    public let connectionLost: Bool

    public init(_ message: String, sqlState: String? = nil, connectionLost: Bool = false) {
        self.message = message
        self.sqlState = sqlState
        self.connectionLost = connectionLost
    }

    /// Whether an error with this SQLSTATE ends the session, whatever libpq's connection
    /// status says yet: a connection exception (class 08), or the server ending the session
    /// (57P01 an administrator's command or a fast shutdown, 57P02 a crash, 57P03 a server
    /// that cannot take connections now, 57P05 an idle session's timeout). libpq returns such
    /// a FATAL error as the statement's result and may still call the connection good until it
    /// reads the end of it; taken for a refusal of the statement, a batch of events would be
    /// dropped rather than sent again once the session is back.
    static func endsSession(sqlState: String?) -> Bool {
        guard let sqlState else { return false }
        return sqlState.hasPrefix("08") || sqlState.hasPrefix("57P")
    }

    public var description: String {
        message.trimmingCharacters(in: " \n")
    }

    /// The message on one line (libpq's run over lines, a hint on the next), for a user.
    public var oneLine: String {
        message.split(whereSeparator: \.isNewline).map { $0.drop(while: \.isWhitespace) }.joined(separator: " ")
    }
}

extension String {
    fileprivate func trimmingCharacters(in set: String) -> String {
        let drop: (Character) -> Bool = { set.contains($0) }
        return String(self.drop(while: drop).reversed().drop(while: drop).reversed())
    }
}

/// One value sent to the server. Bytes go in binary form (names are bytes, never text); the
/// rest as text, which the server parses by the column or cast it meets.
public enum DatabaseValue: Sendable, Hashable {
    case text(String)
    case integer(Int64)
    case bytes([UInt8])
    case boolean(Bool)
    case null
}

/// A statement's rows, read as text (libpq's text format); bytea columns come back as `\x`
/// hex, which `bytes` decodes.
public struct DatabaseRows: Sendable {
    public let rows: [[[UInt8]?]]
    /// Rows a command touched (INSERT, UPDATE, DELETE), 0 for others.
    public let affected: Int

    public var count: Int { rows.count }

    public func isNull(_ row: Int, _ column: Int) -> Bool { rows[row][column] == nil }

    public func text(_ row: Int, _ column: Int) -> String? {
        rows[row][column].map { String(decoding: $0, as: UTF8.self) }
    }

    public func integer(_ row: Int, _ column: Int) -> Int64? {
        text(row, column).flatMap { Int64($0) }
    }

    public func boolean(_ row: Int, _ column: Int) -> Bool? {
        rows[row][column].map { $0 == Array("t".utf8) }
    }

    /// A bytea column: `\x` followed by two hex digits a byte.
    public func bytes(_ row: Int, _ column: Int) -> [UInt8]? {
        guard let raw = rows[row][column] else { return nil }
        guard raw.count >= 2, raw[0] == UInt8(ascii: "\\"), raw[1] == UInt8(ascii: "x") else { return raw }
        func nibble(_ digit: UInt8) -> UInt8 {
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
            default: digit &- UInt8(ascii: "A") &+ 10
            }
        }
        var result: [UInt8] = []
        result.reserveCapacity((raw.count - 2) / 2)
        var index = 2
        while index + 1 < raw.count {
            result.append(nibble(raw[index]) << 4 | nibble(raw[index + 1]))
            index += 2
        }
        return result
    }
}

/// A wake-up sent with NOTIFY: its channel and payload.
public struct DatabaseNotification: Sendable, Hashable {
    public let channel: String
    public let payload: String
    /// The server process that sent it (our own session's id when we sent it ourselves).
    public let senderPID: Int32

    public init(channel: String, payload: String, senderPID: Int32) {
        self.channel = channel
        self.payload = payload
        self.senderPID = senderPID
    }
}

/// One blocking libpq connection. Not Sendable: libpq connections must not be used from two
/// threads at once, so each belongs to the one thread that made it (the cluster's session
/// thread, or the event thread).
public final class DatabaseConnection {
    private let connection: OpaquePointer

    /// Connects with `parameters` (libpq keywords) laid over `conninfo`, a URI or a
    /// `key=value` string: later keywords win, so the caller's keepalive settings stand.
    public init(conninfo: String, parameters: [(String, String)] = []) throws(DatabaseError) {
        var loadError = [CChar](repeating: 0, count: 512)
        guard cpq_load(&loadError, loadError.count) == 0 else {
            let message = loadError.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            throw DatabaseError("cannot load PostgreSQL's client library (install libpq5): \(message)")
        }
        let keywords = ["dbname"] + parameters.map(\.0)
        let values = [conninfo] + parameters.map(\.1)
        let made: OpaquePointer? = withCStrings(keywords) { keywordPointers in
            withCStrings(values) { valuePointers in
                cpq_connectdb_params(keywordPointers, valuePointers, 1)
            }
        }
        guard let made else { throw DatabaseError("out of memory connecting to PostgreSQL") }
        guard cpq_status(made) == Int32(CPQ_CONNECTION_OK) else {
            let message = String(cString: cpq_error_message(made))
            cpq_finish(made)
            throw DatabaseError(message, connectionLost: true)
        }
        connection = made
    }

    deinit {
        cpq_finish(connection)
    }

    /// The socket to poll for notifications and for the server closing the session.
    public var socket: Int32 { cpq_socket(connection) }

    /// The server process serving this session (pg_stat_activity.pid, pg_locks.pid).
    public var serverPID: Int32 { cpq_backend_pid(connection) }

    /// Whether libpq still takes the connection for open.
    public var isOpen: Bool { cpq_status(connection) == Int32(CPQ_CONNECTION_OK) }

    /// Runs one statement with `$1…` parameters and waits for its result.
    @discardableResult
    public func execute(_ sql: String, _ values: [DatabaseValue] = []) throws(DatabaseError) -> DatabaseRows {
        let buffers: [[CChar]?] = values.map { value in
            switch value {
            case .text(let text): Array(text.utf8CString)
            case .integer(let number): Array(String(number).utf8CString)
            case .boolean(let flag): Array((flag ? "t" : "f").utf8CString)
            case .bytes(let bytes): bytes.map { CChar(bitPattern: $0) }
            case .null: nil
            }
        }
        let lengths: [Int32] = zip(values, buffers).map { value, buffer in
            if case .bytes(let bytes) = value { return Int32(bytes.count) }
            return Int32(max((buffer?.count ?? 1) - 1, 0))
        }
        let formats: [Int32] = values.map { if case .bytes = $0 { 1 } else { 0 } }
        let result: OpaquePointer? = withPointers(buffers) { pointers in
            lengths.withUnsafeBufferPointer { lengthPointer in
                formats.withUnsafeBufferPointer { formatPointer in
                    cpq_exec_params(connection, sql, Int32(values.count), pointers,
                                    lengthPointer.baseAddress, formatPointer.baseAddress)
                }
            }
        }
        guard let result else {
            throw DatabaseError(String(cString: cpq_error_message(connection)), connectionLost: !isOpen)
        }
        defer { cpq_clear(result) }
        let status = cpq_result_status(result)
        guard status == Int32(CPQ_PGRES_COMMAND_OK) || status == Int32(CPQ_PGRES_TUPLES_OK) else {
            let state = cpq_result_error_field(result, Int32(CPQ_PG_DIAG_SQLSTATE)).map { String(cString: $0) }
            throw DatabaseError(String(cString: cpq_result_error_message(result)), sqlState: state,
                                connectionLost: !isOpen || DatabaseError.endsSession(sqlState: state))
        }
        let rowCount = Int(cpq_ntuples(result))
        let columnCount = Int(cpq_nfields(result))
        var rows: [[[UInt8]?]] = []
        rows.reserveCapacity(rowCount)
        for row in 0..<rowCount {
            var fields: [[UInt8]?] = []
            fields.reserveCapacity(columnCount)
            for column in 0..<columnCount {
                if cpq_getisnull(result, Int32(row), Int32(column)) != 0 {
                    fields.append(nil)
                    continue
                }
                let length = Int(cpq_getlength(result, Int32(row), Int32(column)))
                let start = UnsafeRawPointer(cpq_getvalue(result, Int32(row), Int32(column))!)
                fields.append(Array(UnsafeRawBufferPointer(start: start, count: length)))
            }
            rows.append(fields)
        }
        let affected = Int(String(cString: cpq_cmd_tuples(result))) ?? 0
        return DatabaseRows(rows: rows, affected: affected)
    }

    /// Runs `body` between BEGIN and COMMIT; rolled back when it throws.
    public func inTransaction<Result>(_ body: () throws(DatabaseError) -> Result) throws(DatabaseError) -> Result {
        try execute("BEGIN")
        do throws(DatabaseError) {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            if !error.connectionLost { _ = try? execute("ROLLBACK") }
            throw error
        }
    }

    /// Makes tables and functions that may exist already (`IF NOT EXISTS`, `OR REPLACE`), in
    /// one transaction under the schema's lock, so two hosts starting at once do not race.
    func install(_ statements: [String]) throws(DatabaseError) {
        try inTransaction { () throws(DatabaseError) in
            try execute("SELECT pg_advisory_xact_lock(hashtext('coordfs schema'))")
            for statement in statements { try execute(statement) }
        }
    }

    /// Reads what the server sent since the last call without waiting (call it when `socket`
    /// is readable) and returns the notifications among it. Throws when the server has closed
    /// the session.
    public func notifications() throws(DatabaseError) -> [DatabaseNotification] {
        guard cpq_consume_input(connection) == 1 else {
            throw DatabaseError(String(cString: cpq_error_message(connection)), connectionLost: true)
        }
        var received: [DatabaseNotification] = []
        while let notify = cpq_notifies(connection) {
            received.append(DatabaseNotification(channel: String(cString: notify.pointee.relname),
                                                 payload: String(cString: notify.pointee.extra),
                                                 senderPID: notify.pointee.be_pid))
            cpq_freemem(notify)
        }
        if !isOpen { throw DatabaseError(String(cString: cpq_error_message(connection)), connectionLost: true) }
        return received
    }

    /// Waits up to `timeout` for the socket to have something to read; true when it has.
    public func waitForInput(timeout: Duration) -> Bool {
        var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        let (seconds, attoseconds) = timeout.components
        let milliseconds = Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000)
        return poll(&descriptor, 1, max(milliseconds, 0)) > 0
    }
}

private func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    let buffers = strings.map { Array($0.utf8CString) } as [[CChar]?]
    return withPointers(buffers + [nil]) { body($0!) }
}

/// Pointers to each buffer's bytes (nil for nil), alive for the length of `body`.
private func withPointers<R>(_ buffers: [[CChar]?], _ body: (UnsafePointer<UnsafePointer<CChar>?>?) -> R) -> R {
    let allocated: [UnsafeMutablePointer<CChar>?] = buffers.map { buffer in
        guard let buffer else { return nil }
        let copy = UnsafeMutablePointer<CChar>.allocate(capacity: max(buffer.count, 1))
        copy.initialize(from: buffer, count: buffer.count)
        return copy
    }
    defer { allocated.forEach { $0?.deallocate() } }
    let constant = allocated.map { UnsafePointer($0) }
    return constant.withUnsafeBufferPointer { body($0.baseAddress) }
}
