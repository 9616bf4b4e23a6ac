import ArgumentParser
import CoordFSClient
import CoordFSExec
import CoordFSProtocol
import Glibc
import SystemPackage

/// `coordfs versions`: the versions a mount with `--versions` kept of a file.
struct Versions: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List, show and restore the versions a mount with --versions kept of a file.",
        subcommands: [List.self, Cat.self, Restore.self, Pin.self, Unpin.self, Resolve.self, Remove.self, Conflicts.self,
                      SimulateDay.self]
    )

    /// The file's location in its mount, for the subcommands.
    struct FileArgument: ParsableArguments {
        @Argument(help: "The file, through the mount (it may have been deleted).", completion: .file(), transform: ExactArguments.display)
        var file: String
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List a file's versions, oldest first.")

        @OptionGroup var target: FileArgument

        @Flag(help: "Print the control protocol's reply as one JSON object.")
        var json = false

        func run() throws {
            let reply = try Versions.withConnection(target.file) { connection, path in try await connection.versions(of: path) }
            if json { return emit(OutputLine(json: reply)) }
            emit("ID      KEPT                 KIND      SIZE        BY")
            for version in reply.versions {
                let by = "\(version.process ?? "?") (pid \(version.pid), uid \(version.uid)\(version.host.map { ", on \($0)" } ?? ""))"
                emit("\(Versions.pad(String(version.id), 7)) \(Versions.localTime(version.kept))  \(Versions.pad(version.kind, 9)) \(Versions.pad(String(version.size), 11)) \(by)")
            }
            if reply.deleted { emit("(the file was deleted; coordfs versions restore brings a version back)") }
        }
    }

    struct Cat: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Write a version's bytes to standard output.")

        @OptionGroup var target: FileArgument

        @Argument(help: "The version's id (coordfs versions list shows them).")
        var id: Int64

        func run() throws {
            let id = self.id
            try Versions.withConnection(target.file) { connection, path in
                try await connection.readVersion(id, of: path) { bytes in try Versions.writeAll(1, bytes) }
            }
        }
    }

    struct Restore: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make a version the file's content again.",
            discussion: "The version is written through the mount as any program's save: it waits for other writers' claims, the version it replaces is kept in turn, and subscribers hear of the change. A deleted file comes back with the version's permissions.")

        @OptionGroup var target: FileArgument

        @Argument(help: "The version's id (coordfs versions list shows them).")
        var id: Int64

        func run() throws {
            let id = self.id
            // The whole version first, in an unnamed temp: a connection lost halfway must not
            // leave the file half restored.
            guard let staging = tmpfile() else { throw CleanExit.failure("cannot make a temporary file: \(Errno(rawValue: errno))") }
            defer { fclose(staging) }
            let stagingDescriptor = fileno(staging)
            let mode = try Versions.withConnection(target.file) { connection, path in
                guard let version = try await connection.versions(of: path).versions.first(where: { $0.id == id }) else {
                    throw CoordFSError.server(ErrorDetail(code: .noVersion, message: "\(path) has no version \(id)"))
                }
                try await connection.readVersion(id, of: path) { bytes in try Versions.writeAll(stagingDescriptor, bytes) }
                return version.mode & 0o7777
            }
            let file = ExactArguments.path(target.file).withPlatformString { open($0, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode_t(mode)) }
            guard file >= 0 else { throw CleanExit.failure("cannot write \(target.file): \(Errno(rawValue: errno))") }
            var offset: off_t = 0
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            while true {
                let count = buffer.withUnsafeMutableBytes { pread(stagingDescriptor, $0.baseAddress, $0.count, offset) }
                if count < 0 && errno == EINTR { continue }
                guard count >= 0 else { close(file); throw CleanExit.failure("cannot read the temporary copy: \(Errno(rawValue: errno))") }
                if count == 0 { break }
                do { try Versions.writeAll(file, Array(buffer[..<count])) } catch { close(file); throw error }
                offset += off_t(count)
            }
            // The close commits the save: its failure is the restore's.
            guard close(file) == 0 else { throw CleanExit.failure("cannot write \(target.file): \(Errno(rawValue: errno))") }
            try Versions.withConnection(target.file) { connection, path in try await connection.noteRestored(id, of: path) }
        }
    }

    struct Pin: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Keep a version whatever retention says.")

        @OptionGroup var target: FileArgument

        @Argument(help: "The version's id.")
        var id: Int64

        func run() throws { try Versions.setPinned(true, id, of: target.file) }
    }

    struct Unpin: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Let retention expire a pinned version again.")

        @OptionGroup var target: FileArgument

        @Argument(help: "The version's id.")
        var id: Int64

        func run() throws { try Versions.setPinned(false, id, of: target.file) }
    }

    /// Pins or unpins version `id` of `file`.
    static func setPinned(_ pinned: Bool, _ id: Int64, of file: String) throws {
        _ = try withConnection(file) { connection, path in try await connection.changeVersion(id, of: path, pinned: pinned) }
    }

    struct Resolve: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Mark a conflict version resolved (all of the file's, without an id).")

        @OptionGroup var target: FileArgument

        @Argument(help: "The version's id (default: every unresolved conflict version of the file).")
        var id: Int64?

        func run() throws {
            let id = self.id
            try Versions.withConnection(target.file) { connection, path in
                var ids = id.map { [$0] } ?? []
                if id == nil {
                    ids = try await connection.versions(of: path).versions.filter { $0.kind == "conflict" && !$0.resolved }.map(\.id)
                }
                for version in ids { _ = try await connection.changeVersion(version, of: path, resolved: true) }
            }
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove versions of a file (its content stays as it is).")

        @OptionGroup var target: FileArgument

        @Argument(help: "The versions' ids.")
        var ids: [Int64] = []

        @Flag(help: "Remove every version of the file.")
        var all = false

        func validate() throws {
            guard all != !ids.isEmpty else { throw ValidationError("name the versions to remove, or --all") }
        }

        func run() throws {
            let ids: [Int64]? = all ? nil : self.ids
            let removed = try Versions.withConnection(target.file) { connection, path in try await connection.removeVersions(ids, of: path) }
            if all { emit("\(removed) version\(removed == 1 ? "" : "s") removed") }
        }
    }

    struct Conflicts: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the files at or beneath a directory with conflict versions not resolved yet.")

        @Argument(help: "The directory (or file), through the mount.", completion: .directory, transform: ExactArguments.display)
        var directory: String

        @Flag(help: "Print the control protocol's reply as one JSON object.")
        var json = false

        func run() throws {
            let located: LocatedPath
            do { located = try LocatedPath(directory) } catch { throw CleanExit.failure(error.commandLineMessage) }
            let files = try Versions.withConnection(directory) { connection, path in try await connection.conflicts(beneath: path) }
            if json { return emit(OutputLine(json: Request.Conflicts.Reply(files: files))) }
            for file in files {
                // Named as the user named the directory, as coordfs watch names event paths.
                let ids = file.versions.map { String($0.id) }.joined(separator: " ")
                emit(OutputLine(bytes: located.display(file.path) + Array("  conflict version\(file.versions.count == 1 ? "" : "s") \(ids)".utf8)))
            }
        }
    }

    /// Connects to the mount that holds `file` and runs `body` with the file's mount path;
    /// protocol errors end the command with their message.
    static func withConnection<Value: Sendable>(_ file: String,
                                                _ body: @escaping @Sendable (CoordFSConnection, FilePath) async throws -> Value) throws -> Value {
        do {
            let location = try ControlLocation.locate(ExactArguments.path(file))
            return try runBlocking {
                let connection = try await CoordFSConnection.connect(socketPath: location.socket, client: "coordfs versions")
                defer { connection.close() }
                return try await body(connection, location.path)
            }
        } catch let error as CoordFSError {
            throw CleanExit.failure(error.commandLineMessage)
        }
    }

    static func writeAll(_ descriptor: Int32, _ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let count = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress! + offset, $0.count - offset) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw CleanExit.failure("cannot write: \(Errno(rawValue: errno))") }
            offset += count
        }
    }

    static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }

    /// `YYYY-MM-DD HH:MM:SS` in the local zone, from nanoseconds since the epoch.
    static func localTime(_ nanoseconds: Int64) -> String {
        var seconds = time_t(nanoseconds / 1_000_000_000)
        var parts = tm()
        localtime_r(&seconds, &parts)
        var buffer = [CChar](repeating: 0, count: 32)
        let count = strftime(&buffer, buffer.count, "%Y-%m-%d %H:%M:%S", &parts)
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
