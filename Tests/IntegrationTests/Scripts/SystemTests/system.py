"""Helpers for the scripts that mount the way the system does (mount(8), fstab, systemd):
a scratch directory with a backing and a mountpoint, programs placed where mount(8) looks
for them for the time of a script, and teardown that never leaves a mount behind."""
import os, shutil, signal, subprocess, tempfile, time

BINARY = os.environ['COORDFS_BINARY']

# The test runner starts scripts with signals blocked (and may ignore SIGINT); the programs
# these scripts start must get them as from a shell: SIGTERM to stop them, SIGALRM for
# flock -w's timeout.
signal.pthread_sigmask(signal.SIG_SETMASK, [])
for stop in (signal.SIGTERM, signal.SIGHUP):
    signal.signal(stop, signal.SIG_DFL)


def mounted(mountpoint):
    with open('/proc/self/mountinfo') as table:
        return any(line.split()[4] == mountpoint for line in table)


def wait_until(what, check, within=20, every=0.02):
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f'timed out waiting for {what}')
        time.sleep(every)


def daemons(mountpoint):
    """Command lines of coordfs daemons serving `mountpoint`."""
    found = []
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            with open(f'/proc/{pid}/cmdline', 'rb') as f:
                words = f.read().split(b'\0')
        except OSError:
            continue
        if b'--foreground' in words and mountpoint.encode() in words:
            found.append([w.decode(errors='replace') for w in words if w])
    return found


def unmount(mountpoint):
    """`coordfs unmount`, tried again for a while when the mount is still busy (a process
    that just ended may not have let go of it yet), and detached lazily as a last resort."""
    deadline = time.monotonic() + 10
    while mounted(mountpoint):
        result = subprocess.run([BINARY, 'unmount', mountpoint], capture_output=True, text=True)
        if result.returncode == 0:
            break
        if time.monotonic() > deadline:
            subprocess.run([BINARY, 'unmount', '--lazy', mountpoint], capture_output=True)
            break
        time.sleep(0.1)
    wait_until('the daemon to end', lambda: not daemons(mountpoint), within=10)


class Scratch:
    """`with Scratch() as s:` a temp dir with `s.backing` (holding `hello` = b'hi\\n') and an
    empty `s.mountpoint`; at the end anything still mounted there is unmounted
    (fusermount3 -u, then umount -l) and the dir removed."""

    def __enter__(self):
        self.root = tempfile.mkdtemp(prefix='coordfs-system-')
        self.backing = os.path.join(self.root, 'backing')
        self.mountpoint = os.path.join(self.root, 'mnt')
        os.mkdir(self.backing)
        os.mkdir(self.mountpoint)
        with open(os.path.join(self.backing, 'hello'), 'wb') as f:
            f.write(b'hi\n')
        return self

    def __exit__(self, *failure):
        os.chdir('/')
        if mounted(self.mountpoint):
            subprocess.run(['fusermount3', '-u', self.mountpoint], stderr=subprocess.DEVNULL)
        if mounted(self.mountpoint):
            subprocess.run(['umount', '-l', self.mountpoint], stderr=subprocess.DEVNULL)
        shutil.rmtree(self.root, ignore_errors=True)
        return False


class Placed:
    """`with Placed('/usr/local/bin/coordfs'):` a link to the binary under test where mount(8)
    looks (it runs helpers with a PATH of its own), removed at the end. Refuses to replace a
    file that is already there: that would test something else."""

    def __init__(self, *paths):
        self.paths = paths
        self.made = []

    def __enter__(self):
        for path in self.paths:
            if os.path.lexists(path):
                if os.path.islink(path) and os.readlink(path) == BINARY:
                    os.unlink(path)  # left by an earlier run that was killed
                else:
                    raise AssertionError(f'{path} exists: remove it (or run the tests where coordfs is not installed)')
            os.symlink(BINARY, path)
            self.made.append(path)
        return self

    def __exit__(self, *failure):
        for path in self.made:
            os.unlink(path)
        return False
