"""What the OutsideChangeTests scripts share: `from outside import *` first.

A change made directly in the backing directory must show through the mount (its caches
dropped by the watch of the backing, not by timeouts) and reach `coordfs watch --json` as an
event marked `outside`. The scripts warm the kernel's caches through the mount *before* each
outside change (a cold cache would show the new state anyway, and the test could not fail),
then wait for the new state with a deadline: correctness, never timing.
"""
import errno, hashlib, json, os, signal, stat, subprocess, sys, threading, time
import coordtest
from coordtest import *

# How long a change made in the backing may take to show through the mount in these tests.
# (The target is 50 ms at p99, measured by Scripts/bench; a loaded machine is slow, not wrong.)
DEADLINE = 10


def tree(root):
    """Everything under `root` as it looks from outside: {relative path (bytes): description}
    with the type, permission bits, owner, link count, size, modification time, contents'
    digest or symlink target, and user xattrs (names and values). Names stay bytes. Reading
    it through the mount also warms the kernel's caches for every entry."""
    root = os.fsencode(root)
    entries = {}

    def describe(path):
        s = os.lstat(path)
        fields = ['type=%o mode=%o owner=%d:%d links=%d size=%d mtime=%d' % (
            stat.S_IFMT(s.st_mode), stat.S_IMODE(s.st_mode), s.st_uid, s.st_gid, s.st_nlink,
            s.st_size, s.st_mtime_ns)]
        if stat.S_ISREG(s.st_mode):
            fields.append('sha256=' + hashlib.sha256(content(path)).hexdigest())
        elif stat.S_ISLNK(s.st_mode):
            fields.append('target=%r' % os.readlink(path))
        if not stat.S_ISLNK(s.st_mode):
            for name in sorted(os.listxattr(path)):
                if name.startswith('user.'):
                    fields.append('xattr %s=%r' % (name, os.getxattr(path, name)))
        return ' '.join(fields), stat.S_ISDIR(s.st_mode)

    def walk(relative):
        path = os.path.join(root, relative) if relative else root
        entries[relative or b'.'], is_directory = describe(path)
        if is_directory:
            for name in sorted(os.listdir(path)):
                walk(os.path.join(relative, name))
    walk(b'')
    return entries


def warm(mount):
    """Fills the kernel's caches for everything under `mount`: contents, attributes, entries,
    listings, xattrs. Twice: right after a mount, one walk leaves some answers to be asked
    again (seen: contents and modes read afresh after one walk, kept after two)."""
    tree(mount)
    tree(mount)


def tree_difference(seen, truth, names=('mount', 'backing'), limit=20):
    """The entries where two trees differ, for a failure message."""
    lines = []
    width = max(map(len, names)) + 1
    for path in sorted(set(seen) | set(truth)):
        if seen.get(path) != truth.get(path):
            lines.append('  %r\n    %s %s\n    %s %s' % (path, (names[0] + ':').ljust(width), seen.get(path, 'absent'),
                                                      (names[1] + ':').ljust(width), truth.get(path, 'absent')))
    return '\n'.join(lines[:limit]) + ('\n  ...' if len(lines) > limit else '')


def same_tree(mount, backing, what='the mount shows the backing', within=DEADLINE):
    """Waits until the whole tree through the mount equals the backing's, byte for byte."""
    deadline = time.monotonic() + within
    while True:
        seen, truth = tree(mount), tree(backing)
        if seen == truth:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f'waited {within} s for {what}; still differing:\n' + tree_difference(seen, truth))
        time.sleep(0.02)


def settle(what, observe, expected, within=DEADLINE):
    """Waits until `observe()` (an OSError counts as its errno name) returns `expected`."""
    deadline = time.monotonic() + within
    while True:
        try:
            seen = observe()
        except OSError as e:
            seen = errno.errorcode[e.errno]
        if seen == expected:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f'waited {within} s for {what}: expected {expected!r}, still {seen!r}')
        time.sleep(0.02)


def outcome(f, *args):
    """f's result, or the errno name it failed with."""
    try:
        return f(*args)
    except OSError as e:
        return errno.errorcode[e.errno]


def watch_method():
    """How the mount watches its backing, as its status says (None: it does not)."""
    return coordtest.status()['server'].get('watch')


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


class Pair:
    """One file opened twice, through the mount and directly in the backing, to show that the
    mount's open handle reads what a handle on the bare disk reads after an outside change."""
    def __init__(self, mount, backing, path):
        self.path = path
        self.through = os.open(os.path.join(mount, path), os.O_RDONLY)
        self.bare = os.open(os.path.join(backing, path), os.O_RDONLY)
        assert self.read() == (os.pread(self.bare, 1 << 20, 0),) * 2, f'{path}: the handles differ at the start'

    def read(self):
        return os.pread(self.through, 1 << 20, 0), os.pread(self.bare, 1 << 20, 0)

    def expect_same(self, what=None):
        settle(what or f'the open handle on {self.path} through the mount to read what a handle on the bare disk reads',
               lambda: self.read()[0], self.read()[1])

    def close(self):
        os.close(self.through)
        os.close(self.bare)


class Watch:
    """`coordfs watch --json --recursive MOUNT` in a process of its own; its lines are parsed
    as they come. Subscribed once the mount's status counts one more subscriber."""
    def __init__(self, mount):
        before = len(coordtest.status()['subscribers'])
        self.process = subprocess.Popen([os.environ['COORDFS_BINARY'], 'watch', '--json', '--recursive', mount],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines = []
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        wait_for_status('the watch subscribed', lambda report: len(report['subscribers']) > before)

    def _read(self):
        for line in self.process.stdout:
            try:
                parsed = json.loads(line)
            except ValueError:
                parsed = {'unparsed': line.decode(errors='replace')}
            with self.lock:
                self.lines.append(parsed)

    def seen(self):
        with self.lock:
            return list(self.lines)

    def events(self):
        return [line for line in self.seen() if 'kind' in line]

    def overflows(self):
        return [line['overflow'] for line in self.seen() if 'overflow' in line]

    def wait_for(self, what, matches, after=0, within=DEADLINE):
        """Waits for an event at index `after` or later for which `matches(event)` holds;
        returns its index in `events()`."""
        deadline = time.monotonic() + within
        while True:
            events = self.events()
            for index in range(after, len(events)):
                if matches(events[index]):
                    return index
            if time.monotonic() > deadline:
                raise AssertionError(f'waited {within} s for {what}; the watch printed:\n' + self.transcript())
            time.sleep(0.02)

    def transcript(self):
        return '\n'.join('  ' + json.dumps(line) for line in self.seen()) or '  (nothing)'

    def stop(self):
        self.process.kill()
        self.process.wait()


def describe(event):
    """An event as one line: kind, path(s), dir or file."""
    text = f"{event.get('kind')} {event.get('path')}"
    if 'destination' in event:
        text += f" -> {event['destination']}"
    return text + (' dir' if event.get('directory') else ' file')


def is_outside(event):
    return event.get('origin', {}).get('outside') is True


def expect_outside_events(watch, wanted, what):
    """Waits until the outside events seen include every line of `wanted` (see `describe`),
    and checks that every event the watch saw is an outside one (a tool working in the
    backing, nothing through the mount)."""
    outside_events = lambda: {describe(e) for e in watch.events() if is_outside(e)}
    settle(what, lambda: wanted - outside_events(), set())
    if any(not is_outside(e) for e in watch.events()):
        raise AssertionError('events not marked outside:\n' + watch.transcript())


class OutsideEvents:
    """Checks the outside events of one mount against what the script did: they come in the
    order of the changes, each names only paths the script touched, and their origin is what
    the watch's method can know (`fanotify`: the pid, uid and name of this very process, alive
    all along; `inotify`: only `outside`; `unprivileged`: `outside`, and the pid and name if
    given are this process's)."""
    def __init__(self, watch, method):
        self.watch, self.method = watch, method
        self.next = 0
        self.touched = set()
        self.through_mount = {'/fence-mount'}

    def expect(self, *wanted):
        """Waits for the outside events `wanted` ("KIND PATH [-> DESTINATION] dir|file"), in this order."""
        for line in wanted:
            words = line.split()
            self.touched.update(word for word in words if word.startswith('/'))
            self.next = self.watch.wait_for(f'the outside event "{line}" (after #{self.next})',
                                            lambda event: is_outside(event) and describe(event) == line, after=self.next) + 1

    def touch(self, *paths):
        """Paths the script changed behind the mount whose events it does not ask for one by one."""
        self.touched.update(paths)

    def changed_through_mount(self, *paths):
        """Paths this process changed through the mount (their events are not outside)."""
        self.through_mount.update(paths)

    def check_origin(self, event):
        origin = event.get('origin', {})
        if self.method == 'fanotify':
            want = {'outside': True, 'pid': os.getpid(), 'uid': os.getuid(), 'process': 'python3'}
            return {key: origin.get(key) for key in want} == want
        if self.method == 'inotify':
            return origin == {'outside': True}
        # Unprivileged fanotify hides other processes' pids from the listener: whatever the
        # origin names, it must be this process (never a pid 0, never another process).
        return origin.get('outside') is True and origin.get('pid', os.getpid()) == os.getpid() \
            and origin.get('process', 'python3') == 'python3'

    def origins(self):
        """The distinct origins of the outside events seen."""
        return sorted({json.dumps(e['origin'], sort_keys=True) for e in self.watch.events() if is_outside(e)})

    def finish(self, mount, backing):
        """A fence, then the checks on everything seen: this process writes a file through the
        mount and saves over it (its events must not be `outside`, and carry this pid), then
        writes one in the backing;
        once that one's event came, every outside event the watch could have made of the
        mount's own write has come too. Returns the outside events, described."""
        # A new file, then a save over it (which stages a copy beside it).
        write(os.path.join(mount, 'fence-mount'), 'through the mount\n')
        write(os.path.join(mount, 'fence-mount'), 'through the mount, again\n')
        own = self.watch.wait_for('the events of two writes through the mount',
                                  lambda e: not is_outside(e) and describe(e) == 'changed /fence-mount file')
        write(os.path.join(backing, 'fence-outside'), 'behind the mount\n')
        self.watch.wait_for('the outside event of the fence', lambda e: is_outside(e) and e.get('path') == '/fence-outside', after=own)
        events = self.watch.events()
        problems = []
        for event in events:
            paths = {event.get('path'), event.get('destination')} - {None}
            origin = event.get('origin', {})
            if not is_outside(event):
                if not paths <= self.through_mount:
                    problems.append(('an event not marked outside, of a path this process did not change through the mount', event))
                elif 'outside' in origin or origin.get('pid') != os.getpid():
                    problems.append((f'a change through the mount by pid {os.getpid()} with another origin', event))
            else:
                if not paths <= self.touched | {'/fence-outside'}:
                    problems.append(('an outside event for a path nothing changed behind the mount', event))
                if not self.check_origin(event):
                    problems.append((f'an outside origin that is not what {self.method} can tell of pid {os.getpid()} '
                                     f'(python3, uid {os.getuid()})', event))
        if problems:
            raise AssertionError('\n'.join(f'{what}: {json.dumps(event)}' for what, event in problems)
                                 + '\nthe watch printed:\n' + self.watch.transcript())
        return [describe(event) for event in events if is_outside(event)]


class Daemon:
    """`coordfs mount BACKING MOUNTPOINT --foreground` started from this process (for the scripts
    that mount for themselves, in a user namespace of their own), its errors kept beside the
    backing. `with Daemon(...) as daemon:` waits for the mount and unmounts at the end; then
    `exit_code` and `said` tell how it ended."""

    def __init__(self, backing, mount):
        self.mount = mount
        self.errors = open(os.path.join(os.path.dirname(backing), 'daemon.err'), 'wb')
        self.process = subprocess.Popen([os.environ['COORDFS_BINARY'], 'mount', backing, mount, '--foreground'],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.errors)

    def mounted(self):
        with open('/proc/self/mountinfo') as table:
            return any(line.split()[4] == self.mount for line in table)

    def __enter__(self):
        wait_until('the mount', lambda: self.mounted() or self.process.poll() is not None)
        assert self.process.poll() is None, f'the daemon exited with {self.process.returncode}: ' + open(self.errors.name).read()
        coordtest.MOUNT = self.mount
        os.chdir(self.mount)
        return self

    def __exit__(self, *failure):
        os.chdir('/')
        if self.mounted():
            subprocess.run([os.environ['COORDFS_BINARY'], 'unmount', self.mount])
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.errors.close()
        self.exit_code = self.process.returncode
        self.said = open(self.errors.name).read().strip()
        return False
