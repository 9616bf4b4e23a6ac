"""A seeded random walk of one process's system calls: opens of every kind kept open across
renames, unlinks, links and exchanges of their names, writes, reads, truncations, syncs and
closes, mixed with changes of the tree. Every call's result (or errno name) is printed, so the
transcript on the mount must equal the one on a plain directory line for line: one owner sees
its own writes everywhere, as on a plain disk. Usage: randomWalk.py SEED STEPS [more], where
`more` adds the calls of a second set (fchmod, fallocate, copy_file_range, xattrs, utimensat,
dup) and so walks other sequences for the same seeds."""
from coordtest import *
import random, zlib

seed, steps = int(sys.argv[1]), int(sys.argv[2])
more = sys.argv[3:] == ['more']
rng = random.Random(seed)
DIRECTORIES = ['.', 'd', 'd/e', 'x']
NAMES = ['a', 'b', 'c', 'd', 'e', 'x']
OPEN_FLAGS = {
    'r': os.O_RDONLY,
    'w': os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
    'rw': os.O_RDWR | os.O_CREAT,
    'append': os.O_WRONLY | os.O_CREAT | os.O_APPEND,
    'excl': os.O_RDWR | os.O_CREAT | os.O_EXCL,
    'rw-existing': os.O_RDWR,
}
handles = {}  # number -> (fd, path it was opened by, flags name)
next_handle = 0
picked = []  # what the step's call was given, for its line of the transcript


def pick(value):
    picked.append(str(value))
    return value


def path():
    directory = rng.choice(DIRECTORIES)
    name = rng.choice(NAMES)
    return pick(name if directory == '.' else directory + '/' + name)


def some_directory():
    return pick(rng.choice(DIRECTORIES[1:] + ['y', 'd/f']))


def describe(status):
    kind = 'dir' if stat.S_ISDIR(status.st_mode) else 'file' if stat.S_ISREG(status.st_mode) else \
        'symlink' if stat.S_ISLNK(status.st_mode) else 'other'
    # A directory's size is the backing filesystem's business (ext4 grows it in blocks either way).
    size = '' if kind == 'dir' else ' size=%d' % status.st_size
    return '%s mode=%o nlink=%d%s' % (kind, stat.S_IMODE(status.st_mode), status.st_nlink, size)


def digest(data):
    return 'len=%d crc=%08x' % (len(data), zlib.crc32(data))


def payload():
    count = rng.choice([0, 1, 7, 100, 4096, 5000, 70000])
    return bytes(rng.getrandbits(8) for _ in range(min(count, 64))) * (count // 64 + 1)


def read_all(p):
    with open(p, 'rb') as f:
        return digest(f.read())


def listing(p):
    return ' '.join(sorted(os.listdir(p)))


def do_open():
    global next_handle
    p, flags = path(), pick(rng.choice(list(OPEN_FLAGS)))
    if flags != 'r' and hard_linked(p):
        # A save replaces the file, so its other names keep the old one: a known difference
        # (README, "Known differences from the bare disk"), not walked here.
        return 'skipped: hard-linked'
    if flags != 'r' and read_before(p):
        # Nor is this: a descriptor opened before a save keeps the version it opened (README).
        return 'skipped: open for reading from before'
    fd = os.open(p, OPEN_FLAGS[flags], 0o640)
    handles[next_handle] = (fd, p, flags)
    next_handle += 1
    return 'handle %d' % (next_handle - 1)


def handle():
    number = pick(rng.choice(sorted(handles)))
    return number, handles[number][0]


def hard_linked(p):
    try:
        status = os.stat(p)  # an open follows a symlink
    except OSError:
        return False
    return stat.S_ISREG(status.st_mode) and status.st_nlink > 1


def read_before(p):
    try:
        status = os.stat(p)
    except OSError:
        return False
    return any(flags == 'r' and (os.fstat(fd).st_dev, os.fstat(fd).st_ino) == (status.st_dev, status.st_ino)
               for fd, _, flags in handles.values())


def do_link():
    a, b = path(), path()
    if any(flags != 'r' for _, _, flags in handles.values()):
        return 'skipped: a file is open for writing'  # (the same cost, from the other side)
    return os.link(a, b)


def do_write():
    number, fd = handle()
    data = payload()
    if rng.random() < 0.5:
        return os.write(fd, data)
    return os.pwrite(fd, data, rng.choice([0, 3, 4096, 10000]))


def do_read():
    number, fd = handle()
    if rng.random() < 0.5:
        return digest(os.read(fd, rng.choice([1, 100, 8192, 100000])))
    return digest(os.pread(fd, 100000, rng.choice([0, 5, 4096])))


def do_seek():
    number, fd = handle()
    if stat.S_ISDIR(os.fstat(fd).st_mode):
        # FUSE seeks in directories by their size, where ext4 ends one at the largest offset:
        # every FUSE filesystem differs here, so the walk does not look.
        return 'skipped: a directory'
    return os.lseek(fd, rng.choice([0, 10, 5000]), rng.choice([os.SEEK_SET, os.SEEK_END]))


def do_fstat():
    number, fd = handle()
    return describe(os.fstat(fd))


def do_truncate_handle():
    number, fd = handle()
    return os.ftruncate(fd, rng.choice([0, 1, 3000, 9000]))


def do_fsync():
    number, fd = handle()
    return os.fsync(fd)


def do_close():
    number, fd = handle()
    del handles[number]
    os.close(fd)
    return 'closed %d' % number


def do_rename():
    a, b = path(), path()
    flags = pick(rng.choice([0, 0, 0, RENAME_NOREPLACE, RENAME_EXCHANGE]))
    if flags == 0:
        return os.rename(a, b)
    return renameat2(a, b, flags)


def do_rename_directory():
    return os.rename(some_directory(), some_directory())


def do_fchmod():
    number, fd = handle()
    return os.fchmod(fd, pick(rng.choice([0o600, 0o640, 0o755])))


def do_fallocate():
    number, fd = handle()
    mode = pick(rng.choice([0, FALLOC_FL_KEEP_SIZE]))
    return fallocate(fd, mode, rng.choice([0, 4096, 20000]), rng.choice([1, 8192]))


def do_copy_range():
    (source, source_fd), (target, target_fd) = handle(), handle()
    return os.copy_file_range(source_fd, target_fd, rng.choice([10, 5000, 100000]), rng.choice([0, 3]), rng.choice([0, 100]))


def do_dup():
    global next_handle
    number, fd = handle()
    if len(handles) >= 6:
        return 'skipped: enough handles'
    handles[next_handle] = (os.dup(fd), handles[number][1], handles[number][2])
    next_handle += 1
    return 'handle %d' % (next_handle - 1)


def do_setxattr():
    return os.setxattr(path(), 'user.' + pick(rng.choice(['k', 'v'])), bytes(rng.choice([1, 7, 300])), follow_symlinks=False)


def do_getxattr():
    p = path()
    return ' '.join('%s=%d' % (name, len(os.getxattr(p, name, follow_symlinks=False)))
                    for name in sorted(os.listxattr(p, follow_symlinks=False)))


def do_utime():
    p = path()
    os.utime(p, ns=(1_000_000_000, pick(rng.choice([1_500_000_000_123, 2_000_000_000_000]))))
    return os.stat(p).st_mtime_ns


# (weight, name, call, needs a handle, in the second set only). The first set's order and
# weights are fixed: changing them would change every walk a seed names.
CALLS = [
    (6, 'open', do_open, False, False),
    (8, 'write', do_write, True, False),
    (4, 'read', do_read, True, False),
    (2, 'seek', do_seek, True, False),
    (4, 'fstat', do_fstat, True, False),
    (2, 'ftruncate', do_truncate_handle, True, False),
    (1, 'fsync', do_fsync, True, False),
    (5, 'close', do_close, True, False),
    (5, 'rename', do_rename, False, False),
    (1, 'rename-directory', do_rename_directory, False, False),
    (3, 'unlink', lambda: os.unlink(path()), False, False),
    (2, 'mkdir', lambda: os.mkdir(some_directory(), 0o750), False, False),
    (1, 'rmdir', lambda: os.rmdir(some_directory()), False, False),
    (2, 'link', do_link, False, False),
    (1, 'symlink', lambda: os.symlink(rng.choice(NAMES), path()), False, False),
    (1, 'readlink', lambda: os.readlink(path()), False, False),
    (1, 'chmod', lambda: os.chmod(path(), rng.choice([0o600, 0o644, 0o755])), False, False),
    (2, 'truncate', lambda: os.truncate(path(), rng.choice([0, 2, 6000])), False, False),
    (5, 'stat', lambda: describe(os.lstat(path())), False, False),
    (4, 'read-whole', lambda: read_all(path()), False, False),
    (2, 'list', lambda: listing(pick(rng.choice(DIRECTORIES + ['y', 'd/f']))), False, False),
    (2, 'fchmod', do_fchmod, True, True),
    (2, 'fallocate', do_fallocate, True, True),
    (2, 'copy_file_range', do_copy_range, True, True),
    (1, 'dup', do_dup, True, True),
    (2, 'setxattr', do_setxattr, False, True),
    (2, 'getxattr', do_getxattr, False, True),
    (2, 'utime', do_utime, False, True),
]
ACTIONS = [(weight, name, call, needs_handle) for weight, name, call, needs_handle, second in CALLS if more or not second]
WEIGHTS = [weight for weight, _, _, _ in ACTIONS]

for made in DIRECTORIES[1:]:
    os.makedirs(made, exist_ok=True)
for step in range(steps):
    _, name, action, needs_handle = rng.choices(ACTIONS, WEIGHTS)[0]
    if needs_handle and not handles:
        continue
    if name == 'open' and len(handles) >= 6:
        continue
    picked.clear()
    try:
        result = action()
    except OSError as e:
        print(step, name, ' '.join(picked), errno.errorcode[e.errno])
        continue
    print(step, name, ' '.join(picked), 'ok' if result is None else result)
for number in sorted(handles):
    t('end close %d' % number, os.close, handles[number][0])
print('final', ' | '.join('%s: %s' % (p, listing(p)) for p in sorted(set(DIRECTORIES + ['y', 'd/f'])) if os.path.isdir(p)))
