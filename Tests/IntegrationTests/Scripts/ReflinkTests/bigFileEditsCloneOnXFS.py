# A 4 KiB rewrite in the middle of a 256 MiB file, through a mount whose backing is XFS with
# reflinks and whose in-place threshold (64 MiB) the file is above: the save clones (the backing
# file shares its extents with the temp before the commit, the new version shares them with the
# old one after it, and free space drops by far less than a copy), a reader that opened the file
# before the edit reads the old version whole until it closes, and the result is the same edit
# made on a plain directory, byte for byte.
# Arguments: the backing (the XFS mount) and the plain directory; run in the mountpoint.
import fcntl, hashlib, os, random, struct, subprocess, sys
from coordtest import libc, wait_until_released
backing, plain = sys.argv[1], sys.argv[2]
MIB = 1 << 20
SIZE, MIDDLE, EDIT = 256 * MIB, 128 * MIB + 1000, b'E' * 4096

FS_IOC_FIEMAP, FIEMAP_EXTENT_SHARED, FIEMAP_FLAG_SYNC = 0xC020660B, 0x2000, 0x1
def shared_bytes(path):
    # How many of the file's bytes lie in extents it shares with another file (FIEMAP).
    shared, start = 0, 0
    with open(path, 'rb') as f:
        while True:
            count = 256
            request = bytearray(struct.pack('=QQLLLL', start, (1 << 64) - 1, FIEMAP_FLAG_SYNC, 0, count, 0) + bytes(56 * count))
            fcntl.ioctl(f.fileno(), FS_IOC_FIEMAP, request)
            mapped = struct.unpack_from('=L', request, 20)[0]
            last = False
            for i in range(mapped):
                logical, _, length, _, _, flags = struct.unpack_from('=QQQQQL', request, 32 + 56 * i)
                if flags & FIEMAP_EXTENT_SHARED: shared += length
                start, last = logical + length, flags & 0x1
            if mapped == 0 or last: return shared
def free_bytes(path):
    fd = os.open(path, os.O_RDONLY)
    libc.syncfs(fd) # this filesystem only: a machine-wide sync waits for everyone's writes
    os.close(fd)
    s = os.statvfs(path)
    return s.f_bavail * s.f_frsize
def digest(path):
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        while chunk := f.read(8 * MIB): h.update(chunk)
    return h.hexdigest()
def edit(path):
    # The save under test: open without O_TRUNC, 4 KiB in the middle, close.
    fd = os.open(path, os.O_WRONLY)
    os.pwrite(fd, EDIT, MIDDLE)
    return fd

rng = random.Random(20)
contents = b"".join(rng.randbytes(MIB) for _ in range(SIZE // MIB))
for directory in ('.', plain):
    with open(os.path.join(directory, 'big'), 'wb') as f: f.write(contents)
wait_until_released('/big')
before = hashlib.sha256(contents).hexdigest()
del contents
print('shared before the edit', shared_bytes(os.path.join(backing, 'big')))
inode = os.stat(os.path.join(backing, 'big')).st_ino

# A reader in another process, opened before the edit; it hashes what its handle reads when told.
reader = subprocess.Popen([sys.executable, '-c', '\n'.join([
    'import hashlib, os, sys',
    'fd = os.open("big", os.O_RDONLY)',
    'print("open", flush=True)',
    'for line in sys.stdin:',
    '    h, offset = hashlib.sha256(), 0',
    '    while chunk := os.pread(fd, 8 << 20, offset): h.update(chunk); offset += len(chunk)',
    '    print(h.hexdigest(), flush=True)',
])], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
assert reader.stdout.readline().strip() == 'open'
def reader_sees_old(when):
    reader.stdin.write('read\n'); reader.stdin.flush()
    print('reader', when, 'old version' if reader.stdout.readline().strip() == before else 'CHANGED')

free = free_bytes(backing)
fd = edit('big')
# Before the commit: the staged temp is a clone, so the committed file shares every extent.
print('shared before the commit', shared_bytes(os.path.join(backing, 'big')) >= SIZE - 64 * 1024)
reader_sees_old('during the save')
print('another process during the save', 'old version' if subprocess.run(['sha256sum', 'big'], capture_output=True, text=True).stdout.split()[0] == before else 'CHANGED')
os.close(fd)
wait_until_released('/big')
print('replaced', os.stat(os.path.join(backing, 'big')).st_ino != inode)
dropped = free - free_bytes(backing)
print('free space dropped by less than 16 MiB', dropped < 16 * MIB, f'({dropped // 1024} KiB)' if dropped >= 16 * MIB else '')
# After the commit: the reader still holds the old version, which shares all but the edit.
print('shared after the commit', shared_bytes(os.path.join(backing, 'big')) >= SIZE - 64 * 1024)
reader_sees_old('after the commit')
reader.stdin.close()
print('reader exit', reader.wait())

os.close(edit(os.path.join(plain, 'big')))
print('same as the plain edit', digest('big') == digest(os.path.join(plain, 'big')))
print('backing holds', sorted(os.listdir(backing)))
