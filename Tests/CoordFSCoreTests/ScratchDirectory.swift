import Glibc
import SystemPackage
import Testing
@testable import CoordFSCore

/// A fresh directory under /tmp for one test, removed when the test's suite instance goes.
final class ScratchDirectory {
    let path: String
    /// A readable descriptor of the directory.
    let descriptor: OwnedDescriptor

    init(_ label: String) throws {
        var template = Array("/tmp/coordfs-\(label)-XXXXXX".utf8CString)
        let created = try #require(template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) })
        path = String(cString: created)
        descriptor = try Syscall.openAt(AT_FDCWD, path, O_RDONLY | O_DIRECTORY)
    }

    deinit {
        _ = system("rm -rf '\(path)'")
    }

    var raw: Int32 { descriptor.raw }

    /// The device of /tmp, where scratch directories live.
    static var temporaryDevice: dev_t {
        var status = stat()
        return stat("/tmp", &status) == 0 ? status.st_dev : 0
    }

    /// Runs a shell command inside the directory; true when it exits 0.
    @discardableResult
    func shell(_ command: String) -> Bool {
        system("cd '\(path)' && \(command)") == 0
    }

    func write(_ name: String, _ bytes: [UInt8]) throws {
        let file = try Syscall.openAt(raw, name, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        try write(file.raw, bytes)
    }

    func write(_ fd: Int32, _ bytes: [UInt8], at offset: off_t = 0) throws {
        var done = 0
        while done < bytes.count {
            done += try bytes.withUnsafeBytes { buffer in
                Result { () throws(Errno) -> Int in
                    try Syscall.write(fd, from: UnsafeRawBufferPointer(rebasing: buffer[done...]), at: offset + off_t(done))
                }
            }.get()
        }
    }

    func read(_ name: String, in directory: Int32? = nil) throws -> [UInt8] {
        let file = try Syscall.openAt(directory ?? raw, name, O_RDONLY)
        return try Self.readAll(file.raw)
    }

    static func readAll(_ fd: Int32) throws -> [UInt8] {
        var result: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = try chunk.withUnsafeMutableBytes { buffer in
                Result { () throws(Errno) -> Int in try Syscall.read(fd, into: buffer, at: off_t(result.count)) }
            }.get()
            if count == 0 { return result }
            result += chunk[0..<count]
        }
    }

    func status(_ name: String) throws -> stat {
        try Syscall.stat(at: raw, name)
    }

    func exists(_ name: String) -> Bool {
        (try? Syscall.stat(at: raw, name)) != nil
    }

    // The same for a name in the top directory, as its bytes.

    func write(_ name: FileName, _ bytes: [UInt8]) throws {
        let file = try Syscall.openAt(raw, name, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        try write(file.raw, bytes)
    }

    func status(_ name: FileName) throws -> stat {
        try Syscall.stat(at: raw, name)
    }

    func exists(_ name: FileName) -> Bool {
        (try? Syscall.stat(at: raw, name)) != nil
    }

    /// The names in a directory of the scratch tree ("." for the top), without . and ..
    func names(in relative: String = ".") throws -> Set<FileName> {
        let directory = try Syscall.openAt(raw, relative, O_RDONLY | O_DIRECTORY)
        let stream = try Syscall.openDirectoryStream(directory.raw)
        defer { Syscall.closeDirectoryStream(stream) }
        var names: Set<FileName> = []
        while let entry = try Syscall.readDirectory(stream) {
            let name = withUnsafePointer(to: &entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: 256) { FileName(cString: $0) }
            }
            if name != "." && name != ".." { names.insert(name) }
        }
        return names
    }
}

func randomBytes(_ count: Int) -> [UInt8] {
    var generator = SystemRandomNumberGenerator()
    var bytes = [UInt8](repeating: 0, count: count)
    var index = 0
    while index < count {
        var word = generator.next() as UInt64
        for _ in 0..<8 where index < count {
            bytes[index] = UInt8(truncatingIfNeeded: word)
            word >>= 8
            index += 1
        }
    }
    return bytes
}

let isRoot = geteuid() == 0
