import CoordFSCluster
import CoordFSProtocol
import CoordFSServer
import Glibc
import SystemPackage

/// The environment variable a mount reads the cluster's connection string from when neither
/// `--cluster` nor `--cluster-file` is given (another way to keep a password out of `ps`).
let clusterVariable = "COORDFS_CLUSTER"

/// Where a mount's cluster is, from `--cluster`, `--cluster-file`, `COORDFS_CLUSTER` and
/// `--cluster-name`: nil when none of the first three is there (a mount of one host, which
/// never loads libpq).
struct ClusterChoice {
    var conninfo: String?
    var file: String?
    var name: String?

    /// Why the options do not go together, in one line; nil when they do.
    var problem: String? {
        if conninfo != nil, file != nil { return "--cluster and --cluster-file exclude each other" }
        if let name, name.isEmpty { return "--cluster-name cannot be empty" }
        if name != nil, conninfo == nil, file == nil, Self.environmentConninfo == nil {
            return "--cluster-name needs --cluster, --cluster-file or \(clusterVariable)"
        }
        return nil
    }

    /// Whether the mount joins a cluster (an option or the environment names one).
    var isChosen: Bool { conninfo != nil || file != nil || Self.environmentConninfo != nil }

    /// The configuration to join with, nil for a mount of one host.
    /// - Throws: one line saying why the connection string cannot be had (never the string itself).
    func configuration() throws(ClusterChoiceError) -> ClusterConfiguration? {
        let text: String
        if let conninfo {
            text = conninfo
        } else if let file {
            text = try Self.firstLine(of: file)
        } else if let fromEnvironment = Self.environmentConninfo {
            text = fromEnvironment
        } else {
            return nil
        }
        guard !text.allSatisfy(\.isWhitespace) else { throw ClusterChoiceError("the cluster's connection string is empty") }
        return ClusterConfiguration(conninfo: text, name: name ?? "default")
    }

    static var environmentConninfo: String? {
        getenv(clusterVariable).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The first line of `path`, without its line break (a file of one line, mode 600).
    static func firstLine(of path: String) throws(ClusterChoiceError) -> String {
        guard let stream = fopen(path, "re") else {
            throw ClusterChoiceError("cannot read --cluster-file \(path): \(String(cString: strerror(errno)))")
        }
        defer { fclose(stream) }
        var line: UnsafeMutablePointer<CChar>? = nil
        var capacity = 0
        defer { free(line) }
        let length = getline(&line, &capacity, stream)
        guard length > 0, let line else { throw ClusterChoiceError("--cluster-file \(path) is empty") }
        var bytes = UnsafeBufferPointer(start: line, count: length).map { UInt8(bitPattern: $0) }
        while let last = bytes.last, last == UInt8(ascii: "\n") || last == UInt8(ascii: "\r") { bytes.removeLast() }
        return String(decoding: bytes, as: UTF8.self)
    }
}

struct ClusterChoiceError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension StatusReport.Cluster {
    /// The cluster's part of `coordfs status`, as `session` finds the database now.
    init(_ session: ClusterSession, name: String) {
        let status = session.status()
        let claim = { (entry: ClusterStatus.Entry) in
            StatusReport.HostClaim(host: entry.host, path: Self.filePath(entry.path), mode: ClaimModeName(entry.mode),
                                   age: Double(entry.age.components.seconds) + Double(entry.age.components.attoseconds) / 1e18)
        }
        self.init(name: name, host: session.host.id, connected: status.connected, problem: status.problem,
                  hosts: status.hosts.map {
                      StatusReport.ClusterHost(id: $0.id, hostname: $0.hostname, pid: $0.pid,
                                               mountpoint: Self.filePath($0.mountpoint), alive: $0.alive)
                  },
                  held: status.grants.map(claim), waiting: status.waiting.map(claim))
    }

    /// Bytes as a path, exactly (a name is bytes, never text).
    static func filePath(_ bytes: [UInt8]) -> FilePath {
        let cString = bytes.map { CChar(bitPattern: $0) } + [0]
        return cString.withUnsafeBufferPointer { FilePath(platformString: $0.baseAddress!) }
    }
}
