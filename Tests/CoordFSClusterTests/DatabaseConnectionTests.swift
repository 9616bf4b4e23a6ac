import CoordFSCluster
import CoordFSTestSupport
import Foundation
import Glibc
import Testing

/// The libpq wrapper against a private server: values both ways, names as exact bytes,
/// notifications, and a session the server ends.
@Suite(.serialized)
struct DatabaseConnectionTests {
    let server: PostgresServer

    init() throws {
        server = try PostgresServer()
    }

    @Test func valuesRoundTripAndBytesStayExact() throws {
        let connection = try DatabaseConnection(conninfo: server.conninfo())
        let name: [UInt8] = [0x2f, 0x61, 0xff, 0xfe, 0x00, 0x7f, 0x5c, 0x78]
        let rows = try connection.execute("SELECT $1::bytea, $2::bigint + 1, $3::text, $4::boolean, $5::text IS NULL",
                                          [.bytes(name), .integer(41), .text("é ok"), .boolean(true), .null])
        #expect(rows.count == 1)
        #expect(rows.bytes(0, 0) == name)
        #expect(rows.integer(0, 1) == 42)
        #expect(rows.text(0, 2) == "é ok")
        #expect(rows.boolean(0, 3) == true)
        #expect(rows.boolean(0, 4) == true)
        try connection.execute("CREATE TEMP TABLE t (n int)")
        #expect(try connection.execute("INSERT INTO t SELECT generate_series(1, 3)").affected == 3)
    }

    @Test func errorsCarryTheirState() throws {
        let connection = try DatabaseConnection(conninfo: server.conninfo())
        #expect {
            try connection.execute("SELECT * FROM no_such_table")
        } throws: { error in
            (error as? DatabaseError)?.sqlState == "42P01" && (error as? DatabaseError)?.connectionLost == false
        }
        #expect(try connection.execute("SELECT 1").integer(0, 0) == 1)
        #expect(throws: DatabaseError.self) {
            try DatabaseConnection(conninfo: server.conninfo(database: "no_such_database"))
        }
    }

    /// A session the server ends in the middle of a statement (57P01, as at a fast shutdown or a
    /// restart) is a lost connection, not a statement refused: the events module sends again
    /// what such a statement carried, where it drops what the server refuses.
    @Test func aSessionEndedDuringAStatementIsALostConnection() throws {
        let victim = try DatabaseConnection(conninfo: server.conninfo())
        let conninfo = server.conninfo()
        let victimPID = victim.serverPID
        let ender = Thread {
            guard let killer = try? DatabaseConnection(conninfo: conninfo) else { return }
            for _ in 0..<200 {
                let active = (try? killer.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = $1::int AND state = 'active'",
                                                   [.integer(Int64(victimPID))]).integer(0, 0)) ?? 0
                if active > 0 { break }
                usleep(10_000)
            }
            _ = try? killer.execute("SELECT pg_terminate_backend($1::int)", [.integer(Int64(victimPID))])
        }
        ender.start()
        #expect {
            try victim.execute("SELECT pg_sleep(10)")
        } throws: { error in
            let error = error as? DatabaseError
            return error?.connectionLost == true
        }
    }

    @Test func notificationsArriveAndAnEndedSessionIsSeen() throws {
        let listener = try DatabaseConnection(conninfo: server.conninfo())
        let sender = try DatabaseConnection(conninfo: server.conninfo())
        try listener.execute("LISTEN coordfs_test")
        try sender.execute("SELECT pg_notify('coordfs_test', 'hello')")
        #expect(listener.waitForInput(timeout: .seconds(10)))
        let received = try listener.notifications()
        #expect(received == [DatabaseNotification(channel: "coordfs_test", payload: "hello", senderPID: sender.serverPID)])

        try sender.execute("SELECT pg_terminate_backend($1::int)", [.integer(Int64(listener.serverPID))])
        #expect(listener.waitForInput(timeout: .seconds(10)))
        #expect {
            _ = try listener.notifications()
            _ = try listener.execute("SELECT 1")
        } throws: { error in
            (error as? DatabaseError)?.connectionLost == true
        }
    }
}

/// Registration: the tables appear on first use, each mount gets its own id, and a host whose
/// session ends shows as dead to the others.
@Suite(.serialized)
struct HostRegistrationTests {
    let server: PostgresServer

    init() throws {
        server = try PostgresServer()
    }

    @Test func hostsRegisterAndADeadSessionShows() throws {
        let configuration = ClusterConfiguration(conninfo: server.conninfo(), name: "test")
        let first = try DatabaseConnection(conninfo: configuration.conninfo, parameters: configuration.connectionParameters)
        let second = try DatabaseConnection(conninfo: configuration.conninfo, parameters: configuration.connectionParameters)
        let a = try HostRegistration.register(on: first, configuration: configuration, mountpoint: Array("/mnt/a".utf8))
        let b = try HostRegistration.register(on: second, configuration: configuration, mountpoint: Array("/mnt/b".utf8))
        #expect(a.id != b.id)
        let observer = try DatabaseConnection(conninfo: configuration.conninfo)
        func alive() throws -> Set<Int64> {
            let rows = try observer.execute("""
                SELECT host_id FROM coordfs_hosts h WHERE cluster = $1 AND \(HostRegistration.isAliveCondition(hostColumn: "h.host_id", keyParameter: "$2"))
                """, [.text(configuration.name), .integer(Int64(configuration.lockKey))])
            return Set((0..<rows.count).compactMap { rows.integer($0, 0) })
        }
        #expect(try alive() == [a.id, b.id])
        try observer.execute("SELECT pg_terminate_backend($1::int)", [.integer(Int64(second.serverPID))])
        var remaining: Set<Int64> = []
        for _ in 0..<200 {
            remaining = try alive()
            if remaining == [a.id] { break }
            usleep(20_000)
        }
        #expect(remaining == [a.id])
    }
}
