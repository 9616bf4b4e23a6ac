/// The watched directories as a tree, each known by the key the kernel's events name it by
/// (an inotify watch descriptor, a fanotify file handle). A directory records only its parent
/// and name, so a move of a directory is one update however large its subtree, and a path is
/// found by walking up.
struct DirectoryTree<Key: Hashable> {
    private struct Entry {
        var parent: Key?
        var name: FileName
        var children: [FileName: Key] = [:]
    }

    private var entries: [Key: Entry] = [:]
    private(set) var root: Key?

    var count: Int { entries.count }

    var allKeys: [Key] { Array(entries.keys) }

    init() {}

    mutating func setRoot(_ key: Key) {
        entries[key] = Entry(parent: nil, name: .empty)
        root = key
    }

    func contains(_ key: Key) -> Bool { entries[key] != nil }

    /// The path of the directory `key` names; nil for one not (or no longer) watched.
    func path(of key: Key) -> MountPath? {
        var components: [FileName] = []
        var current = key
        while true {
            guard let entry = entries[current] else { return nil }
            guard let parent = entry.parent else { break }
            components.append(entry.name)
            current = parent
            if components.count > 4096 { return nil } // a cycle would be a bug; never loop on it
        }
        return MountPath(components: components.reversed())
    }

    /// The watched directory called `name` in `parent`.
    func child(of parent: Key, named name: FileName) -> Key? {
        entries[parent]?.children[name]
    }

    /// Records `key` as `name` in `parent`, moving it there if it was known elsewhere, and
    /// forgetting a different directory that had the name.
    mutating func place(_ key: Key, in parent: Key, as name: FileName) {
        if let previous = entries[parent]?.children[name], previous != key { forget(previous) }
        if let old = entries[key] {
            if let oldParent = old.parent { entries[oldParent]?.children[old.name] = nil }
            entries[key]?.parent = parent
            entries[key]?.name = name
        } else {
            entries[key] = Entry(parent: parent, name: name)
        }
        entries[parent]?.children[name] = key
    }

    /// Forgets `key` and every directory under it; returns the keys forgotten.
    @discardableResult
    mutating func forget(_ key: Key) -> [Key] {
        guard let entry = entries[key] else { return [] }
        if let parent = entry.parent, entries[parent]?.children[entry.name] == key {
            entries[parent]?.children[entry.name] = nil
        }
        var forgotten: [Key] = []
        var pending = [key]
        while let next = pending.popLast() {
            guard let removed = entries.removeValue(forKey: next) else { continue }
            forgotten.append(next)
            pending.append(contentsOf: removed.children.values)
        }
        if key == root { root = nil }
        return forgotten
    }
}
