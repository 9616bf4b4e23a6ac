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

errors = open(os.path.join(os.path.dirname(backing), 'daemon.err'), 'wb')
daemon = subprocess.Popen([os.environ['COORDFS_BINARY'], 'mount', backing, mount, '--foreground'],
                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errors)


def mounted():
    with open('/proc/self/mountinfo') as table:
        return any(line.split()[4] == mount for line in table)


try:
    wait_until('the mount', lambda: mounted() or daemon.poll() is not None)
    assert daemon.poll() is None, f'the daemon exited with {daemon.returncode}: ' + open(errors.name).read()
    coordtest.MOUNT = mount
    os.chdir(mount)
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
finally:
    os.chdir('/')
    if mounted():
        subprocess.run([os.environ['COORDFS_BINARY'], 'unmount', mount])
    try:
        daemon.wait(timeout=15)
    except subprocess.TimeoutExpired:
        daemon.kill()
        daemon.wait()
    errors.close()
said = open(errors.name).read()
print('daemon exit', daemon.returncode)
print('warned:', 'cannot watch the backing' in said and 'caches for 1' in said)
print('ok')
