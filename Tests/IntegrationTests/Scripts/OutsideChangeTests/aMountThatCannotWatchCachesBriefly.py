"""A mount whose watch cannot start: the test runs this script in a user namespace of its own
(`unshare --user --map-root-user --mount`), whose limits of inotify watches and fanotify marks
it sets to 0, then mounts there with the default options. The daemon must say at mount time
that it cannot watch, run without a watch, and cache for a second instead of a day, so that
changes made in the backing still show through the mount (without outside events).

  BACKING MOUNTPOINT   mounts, warms the caches, writes in place, creates and deletes in the
                       backing, checks that each shows through the mount, unmounts.
"""
from outside import *

backing, mount = sys.argv[1], sys.argv[2]
os.umask(0o022)
for limit in ['/proc/sys/user/max_inotify_watches', '/proc/sys/user/max_fanotify_marks']:
    with open(limit, 'w') as setting:
        setting.write('0\n')
write(os.path.join(backing, 'f'), 'old content\n')
write(os.path.join(backing, 'gone'), 'to be deleted\n')

with Daemon(backing, mount) as daemon:
    print('watch:', watch_method())
    warm(mount)
    assert outcome(os.lstat, 'new') == 'ENOENT'
    fd = os.open(os.path.join(backing, 'f'), os.O_WRONLY)
    os.pwrite(fd, b'NEW', 0)
    os.close(fd)
    write(os.path.join(backing, 'new'), 'fresh\n')
    os.unlink(os.path.join(backing, 'gone'))
    settle('cat f', lambda: content('f'), b'NEW content\n')
    settle('cat new', lambda: content('new'), b'fresh\n')
    settle('stat gone', lambda: os.lstat('gone'), 'ENOENT')
    same_tree(mount, backing)
print('daemon exit', daemon.exit_code)
print('warned:', 'cannot watch the backing' in daemon.said and 'caches for 1' in daemon.said)
print('ok')
