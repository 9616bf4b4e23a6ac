# The in-place size threshold where the backing has no reflinks (ext4, as the tests' scratch is
# here): a file above it (2 MiB, mounted with --in-place-larger-than 1) is written in place, so
# a reader that opened it before sees the edit at once and the backing keeps the same inode; one
# below it (512 KiB) is saved atomically. On a scratch that clones, both are saved atomically.
# Argument: the backing; run in the mountpoint.
import errno, fcntl, os, sys
from coordtest import wait_until_released
backing = sys.argv[1]
FICLONE = 0x40049409
def clones(directory):
    source, destination = (os.open(directory, os.O_TMPFILE | os.O_RDWR, 0o600) for _ in range(2))
    try:
        fcntl.ioctl(destination, FICLONE, source)
        return True
    except OSError as error:
        assert error.errno in (errno.EOPNOTSUPP, errno.ENOTTY, errno.EXDEV, errno.EINVAL), error
        return False
    finally:
        os.close(source); os.close(destination)
copies_are_real = not clones(backing)
for name, size in (('big', 2 << 20), ('small', 512 << 10)):
    with open(name, 'wb') as f: f.write(b'a' * size)
    wait_until_released('/' + name)
    inode = os.stat(os.path.join(backing, name)).st_ino
    reader = os.open(name, os.O_RDONLY)
    writer = os.open(name, os.O_WRONLY)
    os.pwrite(writer, b'b' * 4096, size // 2)
    seen = os.pread(reader, 1, size // 2)
    os.close(writer)
    wait_until_released('/' + name)
    in_place = size > (1 << 20) and copies_are_real
    print(name, 'as expected' if (seen == b'b') == in_place else f'UNEXPECTED: the reader saw {seen!r}',
          'as expected' if (os.stat(os.path.join(backing, name)).st_ino == inode) == in_place else 'UNEXPECTED inode')
    os.close(reader)
