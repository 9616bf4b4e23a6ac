import Foundation
import Glibc

/// A private PostgreSQL server for the tests that need one: initdb and pg_ctl from Debian's
/// postgresql package, a data folder and a Unix socket in a fresh temporary folder, trust
/// authentication for the `postgres` role, no TCP. Never the system's service. It runs as the
/// `postgres` user (initdb refuses root); `stop()` (or deinit) shuts it down and removes it.
public final class PostgresServer {
    public struct Unavailable: Error, CustomStringConvertible {
        public let description: String
    }

    public let root: String
    public var dataDirectory: String { root + "/data" }
    /// The socket's folder: libpq's `host` for a Unix socket.
    public var socketDirectory: String { root }
    public let port = 5432
    private let binaries: String
    private var running = false

    /// A libpq connection string for `database`, as `--cluster` takes it.
    public func conninfo(database: String = "postgres") -> String {
        "postgresql:///\(database)?host=\(socketDirectory)&port=\(port)&user=postgres"
    }

    /// Makes and starts the server; throws `Unavailable` with the reason when it cannot.
    public init() throws {
        (binaries, root) = try Self.prepare()
        try asPostgres([binaries + "/initdb", "-D", dataDirectory, "--auth=trust", "--username=postgres",
                        "--no-sync", "-E", "UTF8", "--locale=C"])
        try configure()
        try start()
    }

    /// Makes and starts a streaming standby of `primary` (pg_basebackup, which writes the
    /// standby's connection to it): read-only until `promote()`. Its own socket folder,
    /// the same port number.
    public init(standbyOf primary: PostgresServer) throws {
        (binaries, root) = try Self.prepare()
        try asPostgres([binaries + "/pg_basebackup", "-D", dataDirectory, "-R", "-X", "stream", "-h", primary.socketDirectory,
                        "-p", String(primary.port), "-U", "postgres", "--no-sync"])
        try configure()
        try start()
    }

    private static func prepare() throws -> (binaries: String, root: String) {
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        guard let newest = versions.compactMap(Int.init).max() else {
            throw Unavailable(description: "PostgreSQL is not installed (Scripts/test installs Debian's postgresql)")
        }
        var template = Array("/tmp/coordfs-pg-XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw Unavailable(description: "cannot make a temporary folder: errno \(errno)")
        }
        let root = String(cString: made)
        guard let postgres = getpwnam("postgres") else {
            throw Unavailable(description: "no postgres user (Debian's postgresql package makes it)")
        }
        chown(root, postgres.pointee.pw_uid, postgres.pointee.pw_gid)
        chmod(root, 0o755)
        return ("/usr/lib/postgresql/\(newest)/bin", root)
    }

    /// Our settings after the data folder's own (later lines win).
    private func configure() throws {
        let settings = """

            listen_addresses = ''
            unix_socket_directories = '\(socketDirectory)'
            port = \(port)
            fsync = off
            max_connections = 60
            log_min_messages = warning
            """
        let configuration = try String(contentsOfFile: dataDirectory + "/postgresql.conf", encoding: .utf8)
        try (configuration + settings).write(toFile: dataDirectory + "/postgresql.conf", atomically: false, encoding: .utf8)
    }

    /// Makes every commit wait until a standby has it (synchronous replication), so that a
    /// promoted standby has every transaction a client saw committed.
    public func requireSynchronousStandby() throws {
        try query("ALTER SYSTEM SET synchronous_standby_names = '*'")
        try query("SELECT pg_reload_conf()")
    }

    /// Promotes a standby to primary, waiting until it accepts writes.
    public func promote() throws {
        try asPostgres([binaries + "/pg_ctl", "-D", dataDirectory, "-w", "-t", "60", "promote"])
    }

    /// Stops the server the way a crash would (immediate shutdown: no checkpoint, sessions cut).
    public func crash() throws {
        guard running else { return }
        running = false
        try asPostgres([binaries + "/pg_ctl", "-D", dataDirectory, "-w", "-t", "30", "-m", "immediate", "stop"])
    }

    public func start() throws {
        // The server inherits pg_ctl's standard output: a file, never the pipe `run` reads to its end.
        try asPostgres([binaries + "/pg_ctl", "-D", dataDirectory, "-l", root + "/server.log", "-w", "-t", "30", "start"],
                       output: root + "/pg_ctl.out")
        running = true
    }

    /// Stops the server now: sessions are ended (fast shutdown).
    public func stop() throws {
        guard running else { return }
        running = false
        try asPostgres([binaries + "/pg_ctl", "-D", dataDirectory, "-w", "-t", "30", "-m", "fast", "stop"])
    }

    /// Stops and starts again: every session ends, as in a database restart.
    public func restart() throws {
        try stop()
        try start()
    }

    /// Runs SQL with psql and returns its unaligned output (one row a line, `|` between columns).
    @discardableResult
    public func query(_ sql: String, database: String = "postgres") throws -> String {
        try asPostgres(["/usr/bin/psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", socketDirectory,
                        "-p", String(port), "-U", "postgres", "-d", database, "-c", sql])
    }

    /// The server's log so far, for a failing test's message.
    public var log: String {
        (try? String(contentsOfFile: root + "/server.log", encoding: .utf8)) ?? ""
    }

    deinit {
        try? stop()
        _ = try? Self.run(["/bin/rm", "-rf", root])
    }

    @discardableResult
    private func asPostgres(_ arguments: [String], output: String? = nil) throws -> String {
        try Self.run(["/usr/bin/setpriv", "--reuid=postgres", "--regid=postgres", "--clear-groups"] + arguments, output: output)
    }

    /// Runs a program to its end with its output in a file (by posix_spawn and waitpid:
    /// Foundation's Process waits on descriptors the server pg_ctl leaves behind inherits).
    private static func run(_ arguments: [String], output file: String? = nil) throws -> String {
        let outputPath = file ?? "/tmp/coordfs-pg-run-\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
        defer { if file == nil { unlink(outputPath) } }
        let child = try ChildProcess(arguments, in: "/tmp", output: outputPath)
        guard child.waitForExit(within: .seconds(120)) else {
            child.stop()
            throw Unavailable(description: "\(arguments.joined(separator: " ")) did not finish in 120 s")
        }
        let text = child.output
        guard child.exitCode == 0 else {
            throw Unavailable(description: "\(arguments.joined(separator: " ")) exited with \(child.exitCode.map(String.init) ?? "a signal"): \(text)")
        }
        return text
    }
}
