"""What the integration tests' Python scripts share: `from coordtest import *` first.

The tests run every script with this folder on PYTHONPATH and COORDFS_BINARY set to the
coordfs they mount with (Tests/IntegrationTests/Harness.swift, `scriptEnvironment`).

The system calls Python's os module lacks (renameat2, fallocate, utimensat), and helpers for
the parity scripts: `t(label, f, ...)` prints f's result or the errno name.

Waits: a script that hands off to another process (it holds a claim, it waits for one, a
presenter was asked) waits for that fact as `coordfs status --json` reports it, never for a
guessed time, so the tests hold on a loaded machine.
"""
import ctypes, errno, json, os, shutil, stat, subprocess, sys, time

# System calls the os module lacks.
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW = 0x100
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2
FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE = 0x01, 0x02, 0x10
UTIME_NOW, UTIME_OMIT = (1 << 30) - 1, (1 << 30) - 2
class timespec(ctypes.Structure):
    _fields_ = [('tv_sec', ctypes.c_long), ('tv_nsec', ctypes.c_long)]
libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
libc.utimensat.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(timespec), ctypes.c_int]
def fail():
    e = ctypes.get_errno()
    raise OSError(e, os.strerror(e))
def renameat2(a, b, flags):
    if libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), flags) != 0: fail()
def fallocate(fd, mode, offset, length):
    if libc.fallocate(fd, mode, offset, length) != 0: fail()
def utimens(path, atime, mtime, flags=0):
    times = (timespec * 2)(timespec(*atime), timespec(*mtime))
    if libc.utimensat(AT_FDCWD, path.encode(), times, flags) != 0: fail()

# The parity scripts' helpers.
def t(label, f, *args, **kwargs):
    try:
        result = f(*args, **kwargs)
    except OSError as e:
        print(label, errno.errorcode[e.errno])
        return None
    print(label, 'ok' if result is None else result)
    return result
def touch_open(path, flags, mode=0o644):
    os.close(os.open(path, flags, mode))
def write(path, data, mode=0o644):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    os.write(fd, data if isinstance(data, bytes) else data.encode())
    os.close(fd)
def content(path):
    with open(path, 'rb') as f: return f.read()
def kind(path):
    try: m = os.lstat(path).st_mode
    except OSError as e: return errno.errorcode[e.errno]
    return 'dir' if stat.S_ISDIR(m) else 'file' if stat.S_ISREG(m) else 'symlink' if stat.S_ISLNK(m) else 'other'
def links(*paths):
    return ' '.join('%s=%d' % (p, os.lstat(p).st_nlink) for p in paths)
def sizes(path):
    # Allocation in 32 KiB units: ext4 may add an extent-index block (8 sectors) to
    # either file depending on free-space fragmentation, which is not a difference
    # the mount makes. Every allocation the scripts check is a multiple of 32 KiB.
    s = os.stat(path)
    return 'size=%d alloc32k=%d' % (s.st_size, s.st_blocks // 64)

# Waits.

# The mount the script runs in: its working directory when it started.
MOUNT = os.getcwd()


def wait_until(what, check, within=20, every=0.02):
    """Calls `check` until it returns something true, and returns that; fails saying `what`
    it waited for (and the last thing `check` returned) after `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f'waited {within} s for {what}; last saw: {result!r}')
        time.sleep(every)


def status():
    """The mount's status: the control protocol's status reply, as a dictionary."""
    reply = subprocess.run([os.environ['COORDFS_BINARY'], 'status', '--json', MOUNT], capture_output=True, check=True)
    return json.loads(reply.stdout)


def wait_for_status(what, fact, within=20):
    """Polls the mount's status until `fact(status)` is true; returns that status."""
    last = {}
    def check():
        nonlocal last
        last = status()
        return last if fact(last) else None
    try:
        return wait_until(what, check, within)
    except AssertionError:
        raise AssertionError(f'waited {within} s for {what}; the last status: {json.dumps(last)}') from None


def waiters(report, path):
    """Who waits for a claim on `path` (mount-relative: '/f')."""
    return [waiter for waiter in report['claims']['waiting'] if path in waiter.get('paths', [])]


def holders(report, path):
    """The claims held on `path`."""
    return [holder for holder in report['claims']['held'] if holder.get('path') == path]


def wait_until_waiting(path, pid=None, count=1):
    """Waits until `count` requests wait for a claim on `path` (one of them by `pid`, when given)."""
    def fact(report):
        found = waiters(report, path)
        return len(found) >= count and (pid is None or any(w['owner']['pid'] == pid for w in found))
    return wait_for_status(f'{count} waiting for {path}' + (f' (pid {pid} among them)' if pid else ''), fact)


def wait_until_released(path):
    """Waits until nobody holds a claim on `path`: a closed writer's last release (which the
    kernel sends after the close or exit returned) has committed and let go."""
    return wait_for_status(f'no claim held on {path}', lambda report: not holders(report, path))


def wait_until_asked(path, pid):
    """Waits until a presenter request about `path` from `pid` is pending."""
    return wait_for_status(f'a presenter asked about {path} for pid {pid}',
                           lambda report: any(r.get('path') == path and r['requester'] == pid for r in report['presenterRequests']))


if __name__ == '__main__':
    # For shell scripts: `python3 -m coordtest waiting PATH [COUNT]`.
    import sys
    if sys.argv[1:2] == ['waiting']:
        wait_until_waiting(sys.argv[2], count=int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    else:
        sys.exit('usage: coordtest waiting PATH [COUNT]')
