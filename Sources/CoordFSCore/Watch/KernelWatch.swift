import CSystemCalls
import Glibc
import SystemPackage

/// What one kernel record says, with directories still named by the kernel's keys: the two
/// interfaces decode into this, and `WatchEngine` does the rest once for both.
enum KernelEvent<Key: Hashable> {
    case overflow
    case created(Key, FileName, isDirectory: Bool)
    case deleted(Key, FileName, isDirectory: Bool)
    /// A name nil: the watched directory itself.
    case contentsChanged(Key, FileName?)
    case attributesChanged(Key, FileName?, isDirectory: Bool)
    /// inotify's halves of a move, paired by cookie in `WatchEngine`.
    case movedFrom(Key, FileName, isDirectory: Bool, cookie: UInt32)
    case movedTo(Key, FileName, isDirectory: Bool, cookie: UInt32)
    /// A whole move; a side is nil, or its directory unknown, when it lies outside the watch.
    /// `object` is the moved directory's own key where the kernel names it (fanotify): when two
    /// directories trade places (RENAME_EXCHANGE), the names alone mislead.
    case moved(from: (Key, FileName)?, to: (Key, FileName)?, isDirectory: Bool, object: Key?)
    /// The watched directory itself is gone (deleted, or its watch removed).
    case gone(Key)
}

/// One kernel interface that watches directories.
protocol KernelWatch: AnyObject, SendableMetatype {
    associatedtype Key: Hashable
    static var method: WatchMethod { get }
    /// The descriptor the events are read from.
    var descriptor: Int32 { get }
    /// Whether the kernel tells the mount's own changes by their pid (the events of other
    /// processes then carry theirs, or none); else `OwnChanges` tells them by path.
    static var namesProcesses: Bool { get }
    /// Whether an event on a watched subdirectory itself (not on a name in it) repeats what
    /// the watch of its parent reports: inotify tells both watches, fanotify one event.
    static var selfEventsRepeatParent: Bool { get }
    /// Watches the directory open as `directory`; returns the key its events will carry.
    func watch(directory: Int32) throws(Errno) -> Key
    /// Stops watching a directory that left the backing; `root` is the backing root, open.
    func unwatch(_ key: Key, root: Int32)
    /// The events of one read, each with the pid of the process that caused it where known.
    func decode(_ bytes: UnsafeRawBufferPointer, into events: inout [(event: KernelEvent<Key>, pid: Int32?)])
}

/// inotify: one watch per directory, keyed by its watch descriptor. Names no process.
final class InotifyWatch: KernelWatch {
    static let method = WatchMethod.inotify
    static let namesProcesses = false
    static let selfEventsRepeatParent = true
    /// No IN_DONT_FOLLOW: the directory is named by its /proc/self/fd link, which must be
    /// followed; it was opened with O_NOFOLLOW, and IN_ONLYDIR checks what the link leads to.
    static let mask = UInt32(CSYS_IN_CREATE | CSYS_IN_DELETE | CSYS_IN_MOVED_FROM | CSYS_IN_MOVED_TO
        | CSYS_IN_MODIFY | CSYS_IN_ATTRIB | CSYS_IN_DELETE_SELF | CSYS_IN_ONLYDIR | CSYS_IN_EXCL_UNLINK)

    private let owned: OwnedDescriptor
    var descriptor: Int32 { owned.raw }

    init() throws(Errno) {
        owned = try Syscall.inotifyInit()
    }

    func watch(directory: Int32) throws(Errno) -> Int32 {
        try Syscall.inotifyWatch(owned.raw, directory: directory, mask: Self.mask)
    }

    func unwatch(_ key: Int32, root: Int32) {
        Syscall.inotifyRemoveWatch(owned.raw, key)
    }

    func decode(_ bytes: UnsafeRawBufferPointer, into events: inout [(event: KernelEvent<Int32>, pid: Int32?)]) {
        let header = Int(CSYS_INOTIFY_EVENT_SIZE)
        var offset = 0
        while offset + header <= bytes.count {
            let wd = bytes.loadUnaligned(fromByteOffset: offset, as: Int32.self)
            let mask = bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
            let cookie = bytes.loadUnaligned(fromByteOffset: offset + 8, as: UInt32.self)
            let length = Int(bytes.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
            let nameBytes = bytes[(offset + header)..<min(bytes.count, offset + header + length)]
            offset += header + length
            let name = FileName(nameBytes.prefix { $0 != 0 })
            let isDirectory = mask & UInt32(CSYS_IN_ISDIR) != 0
            func has(_ bit: Int) -> Bool { mask & UInt32(bit) != 0 }
            let event: KernelEvent<Int32>
            if has(CSYS_IN_Q_OVERFLOW) {
                event = .overflow
            } else if has(CSYS_IN_IGNORED) || has(CSYS_IN_DELETE_SELF) {
                event = .gone(wd)
            } else if let name, has(CSYS_IN_CREATE) {
                event = .created(wd, name, isDirectory: isDirectory)
            } else if let name, has(CSYS_IN_DELETE) {
                event = .deleted(wd, name, isDirectory: isDirectory)
            } else if let name, has(CSYS_IN_MOVED_FROM) {
                event = .movedFrom(wd, name, isDirectory: isDirectory, cookie: cookie)
            } else if let name, has(CSYS_IN_MOVED_TO) {
                event = .movedTo(wd, name, isDirectory: isDirectory, cookie: cookie)
            } else if has(CSYS_IN_MODIFY) {
                event = .contentsChanged(wd, name)
            } else if has(CSYS_IN_ATTRIB) {
                event = .attributesChanged(wd, name, isDirectory: isDirectory)
            } else {
                continue // IN_UNMOUNT (IN_IGNORED follows), IN_MOVE_SELF (the parent reports the move)
            }
            events.append((event, nil))
        }
    }
}

/// A directory as fanotify's records name it: its filesystem's id and its file handle (type
/// and bytes).
struct FileHandleKey: Hashable {
    var filesystem: UInt64
    var handle: [UInt8]
}

/// fanotify with directory-and-name records: an inode mark per directory, keyed by its file
/// handle; every event names the process that caused it. With CAP_SYS_ADMIN; without it
/// (Linux 5.13 on) the same works on directories the user may read, but the kernel shows a
/// listener only its own pid, never another process's. Entry events
/// carry the entry's own handle too (FAN_REPORT_TARGET_FID), which tells a moved directory apart.
final class FanotifyWatch: KernelWatch {
    static let method = WatchMethod.fanotify
    static let namesProcesses = true
    static let selfEventsRepeatParent = false
    /// FAN_RENAME carries both sides of a move in one event, so the two halves are not asked for.
    static let mask = UInt64(CSYS_FAN_CREATE | CSYS_FAN_DELETE | CSYS_FAN_RENAME | CSYS_FAN_MODIFY
        | CSYS_FAN_ATTRIB | CSYS_FAN_DELETE_SELF | CSYS_FAN_ONDIR | CSYS_FAN_EVENT_ON_CHILD)

    /// This process, as the kernel names the maker of the mount's own changes.
    private let ownPID = getpid()
    private let owned: OwnedDescriptor
    var descriptor: Int32 { owned.raw }

    init() throws(Errno) {
        let flags = CSYS_FAN_CLASS_NOTIF | CSYS_FAN_CLOEXEC | CSYS_FAN_NONBLOCK
            | CSYS_FAN_REPORT_DIR_FID | CSYS_FAN_REPORT_NAME | CSYS_FAN_REPORT_FID | CSYS_FAN_REPORT_TARGET_FID
        owned = try Syscall.fanotifyInit(flags: UInt32(flags), eventFlags: UInt32(O_RDONLY))
    }

    func watch(directory: Int32) throws(Errno) -> FileHandleKey {
        try Syscall.fanotifyMark(owned.raw, flags: UInt32(CSYS_FAN_MARK_ADD | CSYS_FAN_MARK_INODE),
                                 mask: Self.mask, object: directory)
        return FileHandleKey(filesystem: try Syscall.filesystemID(of: directory),
                             handle: try Syscall.fileHandle(of: directory))
    }

    /// The mark is removed through the directory's handle where it still opens (a deleted
    /// directory's mark went with its inode). One that stays would only bring events of an
    /// unknown directory, which are dropped.
    func unwatch(_ key: FileHandleKey, root: Int32) {
        // Not O_PATH: fanotify_mark takes no such descriptor.
        guard let directory = try? Syscall.open(handle: key.handle, on: root, flags: O_RDONLY | O_DIRECTORY) else { return }
        try? Syscall.fanotifyMark(owned.raw, flags: UInt32(CSYS_FAN_MARK_REMOVE | CSYS_FAN_MARK_INODE),
                                  mask: Self.mask, object: directory.raw)
    }

    func decode(_ bytes: UnsafeRawBufferPointer, into events: inout [(event: KernelEvent<FileHandleKey>, pid: Int32?)]) {
        let metadataLength = Int(CSYS_FAN_EVENT_METADATA_LEN)
        var offset = 0
        while offset + metadataLength <= bytes.count {
            let length = Int(bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
            guard length >= metadataLength, offset + length <= bytes.count else { return }
            let version = bytes[offset + 4]
            let headerLength = Int(bytes.loadUnaligned(fromByteOffset: offset + 6, as: UInt16.self))
            let mask = bytes.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self)
            // An unprivileged listener learns only its own pid; others' events say 0.
            let rawPID = bytes.loadUnaligned(fromByteOffset: offset + 20, as: Int32.self)
            let pid: Int32? = rawPID > 0 ? rawPID : nil
            // The mount's own change to a file tells the watch nothing (only directories shape
            // it): most events are such, so they cost no decoding.
            if rawPID == ownPID, mask & UInt64(CSYS_FAN_ONDIR | CSYS_FAN_Q_OVERFLOW) == 0 {
                offset += length
                continue
            }
            let records = Records(UnsafeRawBufferPointer(rebasing: bytes[(offset + headerLength)..<(offset + length)]))
            offset += length
            guard Int(version) == CSYS_FANOTIFY_METADATA_VERSION else { continue }
            decode(mask: mask, pid: pid, records, into: &events)
        }
    }

    /// The info records of one event, by kind.
    struct Records {
        var named: (FileHandleKey, FileName?)?
        var directory: FileHandleKey?
        var object: FileHandleKey?
        var old: (FileHandleKey, FileName)?
        var new: (FileHandleKey, FileName)?

        init(_ bytes: UnsafeRawBufferPointer) {
            var offset = 0
            while offset + 4 <= bytes.count {
                let type = Int(bytes[offset])
                let length = Int(bytes.loadUnaligned(fromByteOffset: offset + 2, as: UInt16.self))
                guard length >= 4, offset + length <= bytes.count else { return }
                let record = UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + length)])
                offset += length
                guard let (key, name) = Self.handleAndName(record) else { continue }
                switch type {
                case CSYS_FAN_EVENT_INFO_TYPE_DFID_NAME: named = (key, name)
                case CSYS_FAN_EVENT_INFO_TYPE_DFID: directory = key
                case CSYS_FAN_EVENT_INFO_TYPE_FID: object = key
                case CSYS_FAN_EVENT_INFO_TYPE_OLD_DFID_NAME: if let name { old = (key, name) }
                case CSYS_FAN_EVENT_INFO_TYPE_NEW_DFID_NAME: if let name { new = (key, name) }
                default: break
                }
            }
        }

        /// A record's handle and the name after it (nil for none, and for ".", the object itself).
        static func handleAndName(_ record: UnsafeRawBufferPointer) -> (FileHandleKey, FileName?)? {
            guard record.count >= 20 else { return nil }
            let filesystem = record.loadUnaligned(fromByteOffset: 4, as: UInt64.self)
            let handleLength = Int(record.loadUnaligned(fromByteOffset: 12, as: UInt32.self))
            let nameStart = 20 + handleLength
            guard nameStart <= record.count else { return nil }
            let key = FileHandleKey(filesystem: filesystem, handle: Array(record[16..<nameStart]))
            let nameBytes = record[nameStart...].prefix { $0 != 0 }
            let name = nameBytes.elementsEqual(CollectionOfOne(UInt8(ascii: "."))) ? nil : FileName(nameBytes)
            return (key, name)
        }
    }

    /// One event's kinds, in the order they can have happened to one object: the kernel merges
    /// queued events on the same object from the same process into one mask.
    private func decode(mask: UInt64, pid: Int32?, _ records: Records,
                        into events: inout [(event: KernelEvent<FileHandleKey>, pid: Int32?)]) {
        func has(_ bit: Int) -> Bool { mask & UInt64(bit) != 0 }
        if has(CSYS_FAN_Q_OVERFLOW) {
            events.append((.overflow, nil))
            return
        }
        let isDirectory = has(CSYS_FAN_ONDIR)
        // Where the event happened: a directory and a name in it, or an object itself.
        let place: (FileHandleKey, FileName?)? = records.named ?? records.directory.map { ($0, nil) }
        if let (directory, name) = place, let name, has(CSYS_FAN_CREATE) {
            events.append((.created(directory, name, isDirectory: isDirectory), pid))
        }
        if let (directory, name) = place, has(CSYS_FAN_MODIFY) {
            events.append((.contentsChanged(directory, name), pid))
        }
        if let (directory, name) = place, has(CSYS_FAN_ATTRIB) {
            events.append((.attributesChanged(directory, name, isDirectory: isDirectory), pid))
        }
        if has(CSYS_FAN_RENAME), records.old != nil || records.new != nil {
            events.append((.moved(from: records.old, to: records.new, isDirectory: isDirectory, object: records.object), pid))
        }
        if let (directory, name) = place, let name, has(CSYS_FAN_DELETE) {
            events.append((.deleted(directory, name, isDirectory: isDirectory), pid))
        }
        if has(CSYS_FAN_DELETE_SELF), let directory = place.flatMap({ $0.1 == nil ? $0.0 : nil }) ?? records.object {
            events.append((.gone(directory), pid))
        }
    }
}
