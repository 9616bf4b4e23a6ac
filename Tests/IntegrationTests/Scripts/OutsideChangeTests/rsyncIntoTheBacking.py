"""`rsync -a --delete` of a prepared tree into the backing, under a warm mount.

  prepare BACKING SOURCE   an older version of the tree in the backing, the newer in SOURCE
  check BACKING SOURCE     in the mount: read the whole tree, open a file rsync replaces, run
                           rsync into the backing; then the mount's tree equals the backing's
                           byte for byte, times included, and the backing equals the source
                           but for times (the control: rsync did what the test thinks).
"""
import re
from outside import *


def prepare(backing, source):
    os.umask(0o022)
    for root, version in ((backing, 1), (source, 2)):
        os.chdir(root)
        os.makedirs('a/deep/er')
        os.mkdir('b')
        write('a/1.txt', 'version %d\n' % version * (1 + 99 * (version - 1)))
        write('a/2.txt', 'same bytes, other times\n')
        write('a/deep/er/3.txt', 'deep %d\n' % version)        # the same size in both,
        os.utime('a/deep/er/3.txt', (1000000000 + 10 * version,) * 2)   # so times tell rsync
        write('b/keep.txt', 'kept\n')
        os.utime('b/keep.txt', (1000000000, 1000000000))
        os.utime('a/2.txt', (1000000000 + version, 1000000000 + version))
        if version == 1:
            write('stale.txt', 'only in the old tree\n')
            os.makedirs('gone/with/it')
            write('gone/with/it/x', 'x\n')
        else:
            write('new.txt', 'only in the new tree\n', 0o600)
            os.makedirs('c/d')
            write('c/d/e.sh', '#!/bin/sh\n', 0o755)
            os.symlink('a/1.txt', 'c/link')
            os.chmod('b', 0o750)


def timeless(entries):
    """A tree without modification times (this rsync leaves some of a directory's and a
    symlink's own behind): for the control, not for the mount's comparison."""
    return {path: re.sub(r' mtime=[0-9]+', '', description) for path, description in entries.items()}


def check(backing, source):
    mount = os.getcwd()
    same_tree(mount, backing, 'the starting tree')
    warm(mount)
    handle = Pair(mount, backing, 'a/1.txt')
    for name in ['new.txt', 'c']:
        assert outcome(os.lstat, name) == 'ENOENT', name
    watch = Watch(mount)
    try:
        subprocess.run(['rsync', '-a', '--delete', source + '/', backing + '/'], check=True)
        copied, original = timeless(tree(backing)), timeless(tree(source))
        assert copied == original, 'rsync did not copy the tree:\n' + tree_difference(copied, original, ('backing', 'source'))
        same_tree(mount, backing, 'the mount to show what rsync wrote')
        handle.expect_same()
        # rsync writes a new file under a temporary name and renames it into place.
        arrived = lambda event: is_outside(event) and event.get('destination', event.get('path')) == '/new.txt'
        watch.wait_for('an outside event that brings /new.txt', arrived)
        expect_outside_events(watch, {'deleted /stale.txt file', 'created /c dir', 'deleted /gone dir'},
                              'outside events of rsync')
    finally:
        watch.stop()
    print('ok')


if sys.argv[1] == 'prepare':
    prepare(sys.argv[2], sys.argv[3])
else:
    check(sys.argv[2], sys.argv[3])
