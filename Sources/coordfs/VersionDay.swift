import ArgumentParser
import CoordFSCore
import CoordFSVersions
import Glibc
import Logging
import Synchronization
import SystemPackage

extension Versions {
    /// What the version store holds after a day of saves, lived in a second: its clock is
    /// injected. For `Scripts/bench` (and whoever sizes a backing); not shown in the help.
    struct SimulateDay: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "simulate-day",
            abstract: "Save one file over and over in a scratch store with a fast clock; print what stays.",
            shouldDisplay: false)

        @Option(help: ArgumentHelp("Seconds between saves.", valueName: "seconds"))
        var every = 10

        @Option(help: ArgumentHelp("How long the saves go on, in simulated hours.", valueName: "hours"))
        var hours = 24

        @Option(help: ArgumentHelp("The file's size.", valueName: "bytes"))
        var size = 4096

        @Option(help: ArgumentHelp("Which versions stay (as coordfs mount --versions-keep).", valueName: "how"))
        var keep: VersionRetention.Thinning = .staggered

        @Option(help: ArgumentHelp("Where to make the scratch backing (removed after).", valueName: "directory"))
        var scratch = "/tmp"

        func validate() throws {
            guard every > 0, hours > 0, size >= 0 else { throw ValidationError("--every and --hours must be positive, --size not negative") }
        }

        func run() throws {
            var template = Array((scratch + "/coordfs-version-day-XXXXXX").utf8CString)
            guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
                throw CleanExit.failure("cannot make a scratch folder in \(scratch): \(Errno(rawValue: errno))")
            }
            let backing = String(cString: made)
            defer { Self.removeTree(backing) }
            let now = Atomic<Int64>(VersionStore.now())
            let store = try VersionStore(backing: backing, retention: VersionRetention(thinning: keep, spaceShare: 1, minimumFreeBytes: 0),
                                         clock: { now.load(ordering: .relaxed) }, sweepEvery: nil, logger: Logger(label: "simulate-day"))
            let directory = try Syscall.openAt(AT_FDCWD, backing, O_RDONLY | O_DIRECTORY)
            let (name, staged) = (FileName("f".utf8)!, FileName("f.new".utf8)!)
            let path = MountPath(components: [name])
            let origin = VersionOrigin(pid: getpid(), uid: getuid(), process: "simulate-day")
            let saves = hours * 3600 / every
            var contents = [UInt8](repeating: 0, count: size)
            for save in 0..<saves {
                // As an editor saves: a new file, the old one kept, the new one renamed over it.
                withUnsafeBytes(of: save) { for (index, byte) in $0.enumerated() where index < contents.count { contents[index] = byte } }
                let file = try Syscall.openAt(directory.raw, staged, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
                _ = try contents.withUnsafeBytes { try Syscall.write(file.raw, from: $0, at: 0) }
                if save > 0 { _ = store.keepReplaced(name, in: directory.raw, path: path, kind: .save, origin: origin) }
                try Syscall.rename(directory.raw, staged, to: directory.raw, name, flags: 0)
                now.add(Int64(every) * 1_000_000_000, ordering: .relaxed)
            }
            store.sweep()
            let summary = store.summary()
            let objects = try Syscall.openAt(AT_FDCWD, backing + "/" + VersionStore.folderName.description + "/objects", O_RDONLY | O_DIRECTORY)
            let onDisk = try Syscall.directoryNames(objects.raw).reduce(Int64(0)) { total, version in
                total + ((try? Syscall.stat(at: objects.raw, version)).map { Int64($0.st_blocks) * 512 } ?? 0)
            }
            emit("\(saves) saves of a \(size)-byte file every \(every) s for \(hours) h (\(keep)): \(summary.versions) versions, "
                 + "\(summary.bytes) bytes (\(onDisk) bytes of disk)")
        }

        /// Removes the scratch backing: the file, and the store's folders and index.
        private static func removeTree(_ path: String) {
            guard let folder = try? Syscall.openAt(AT_FDCWD, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW) else { return }
            for name in (try? Syscall.directoryNames(folder.raw)) ?? [] {
                guard let status = try? Syscall.stat(at: folder.raw, name) else { continue }
                if status.st_mode & S_IFMT == S_IFDIR, let text = name.string { removeTree(path + "/" + text) }
                _ = try? Syscall.unlink(at: folder.raw, name, flags: status.st_mode & S_IFMT == S_IFDIR ? AT_REMOVEDIR : 0)
            }
            _ = rmdir(path)
        }
    }
}
