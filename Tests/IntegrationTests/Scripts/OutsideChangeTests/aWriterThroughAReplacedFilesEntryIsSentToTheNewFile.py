"""A write through a kernel entry of a file replaced behind the mount is never lost in the
replaced file. While a node stands for the new file under the name, an open for writing
through the old entry fails with ESTALE (on which the kernel looks a path up again by itself);
once none does, the old node claims the name and follows it to the new file. Either way
nothing is written to the replaced file, unclaimed, where nobody would ever see it. A read
through the old entry reads the replaced version, or the new one once its node followed.
The entry is kept by an O_PATH descriptor and reopened through /proc/self/fd, the one way a
program meets that ESTALE (a path's open is retried by the kernel).

  prepare BACKING   f, "old"
  check BACKING     in the mount
"""
from outside import *


def prepare(backing):
    write(os.path.join(backing, 'f'), b'old')


def check(backing):
    warm('.')
    pinned = os.open('f', os.O_PATH)
    write(os.path.join(backing, 'f.new'), b'new')
    os.rename(os.path.join(backing, 'f.new'), os.path.join(backing, 'f'))
    # Only stat by the name until it shows the new file: a lookup made a node for it. (An open
    # through the old entry before that would make the old node follow the name at once.)
    replacement = os.stat(os.path.join(backing, 'f')).st_ino
    settle('the mount looks the new f up', lambda: os.stat('f').st_ino, replacement)
    settle('the mount shows the new f', lambda: content('f'), b'new')
    reopened = f'/proc/self/fd/{pinned}'
    read = content(reopened)
    assert read in (b'old', b'new'), read
    try:
        descriptor = os.open(reopened, os.O_WRONLY)
    except OSError as e:
        assert e.errno == errno.ESTALE, e
        print('write through the old entry: ESTALE')
    else:
        os.write(descriptor, b'W')
        os.close(descriptor)
        seen = content('f')
        print('write through the old entry:', 'reached f' if seen == b'Wew' else f'lost (f is {seen!r})')
    with open('f', 'r+b') as handle:                # by its name: the new file, claimed
        handle.seek(1)
        handle.write(b'EW')
    print('f:', content('f')[1:], 'backing:', content(os.path.join(backing, 'f'))[1:])
    print('ok')


if sys.argv[1] == 'prepare':
    prepare(sys.argv[2])
else:
    check(sys.argv[2])
