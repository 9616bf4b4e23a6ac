"""A mount by a daemon without the capabilities fanotify needs: the test runs this script in
a user namespace of its own (`unshare --user --map-root-user --mount`), where it is root of
nothing but its namespace, and it mounts there with the default options: the mount must
watch the backing all the same (fanotify, which the kernel allows without privileges on
single directories but then hides who made a change, or inotify) and pass the basic checks.

  BACKING MOUNTPOINT   mounts, creates, writes in place, renames and deletes in the backing
                       (caches warm first), checks the mount and the outside events, unmounts.
"""
from outside import *

backing, mount = sys.argv[1], sys.argv[2]
os.umask(0o022)
with open('/proc/self/uid_map') as uid_map:
    print('in a user namespace:', uid_map.read().split() != ['0', '0', '4294967295'])
write(os.path.join(backing, 'f'), 'old content\n')
os.mkdir(os.path.join(backing, 'd'))
write(os.path.join(backing, 'd/g'), 'inner\n')

with Daemon(backing, mount) as daemon:
    print('watch:', watch_method())
    same_tree(mount, backing, 'the starting tree')
    warm(mount)
    assert outcome(os.lstat, 'new') == 'ENOENT'
    watch = Watch(mount)
    seen = OutsideEvents(watch, 'unprivileged')
    try:
        write(os.path.join(backing, 'new'), 'fresh\n')
        settle('cat new', lambda: content('new'), b'fresh\n')
        seen.expect('created /new file')

        fd = os.open(os.path.join(backing, 'f'), os.O_WRONLY)
        os.pwrite(fd, b'NEW', 0)
        os.close(fd)
        settle('cat f', lambda: content('f'), b'NEW content\n')
        seen.expect('changed /f file')

        os.rename(os.path.join(backing, 'f'), os.path.join(backing, 'd/f2'))
        settle('stat f', lambda: os.lstat('f'), 'ENOENT')
        settle('cat d/f2', lambda: content('d/f2'), b'NEW content\n')
        seen.expect('moved /f -> /d/f2 file')

        os.unlink(os.path.join(backing, 'd/g'))
        settle('stat d/g', lambda: os.lstat('d/g'), 'ENOENT')
        settle('ls d', lambda: os.listdir('d'), ['f2'])
        seen.expect('deleted /d/g file')

        same_tree(mount, backing)
        print('outside events:', '; '.join(seen.finish(mount, backing)))
        print('origins:', ' '.join(seen.origins()))
    finally:
        watch.stop()
print('daemon exit', daemon.exit_code)
print('daemon said:', daemon.said or '(nothing)')
print('ok')
