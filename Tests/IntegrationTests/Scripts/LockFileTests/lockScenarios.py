from coordtest import *
# Programs that coordinate themselves with locks, two or more processes each: every process
# must reach its lock call at once (the lock, not the filesystem, decides who waits), and get
# the errno a plain disk gives. Outcomes go to standard output (compared with a plain
# directory); how long each second process took to reach its lock call goes beside the working
# directory, to ../lock-timings-NAME (NAME: the working directory's), one "scenario seconds" line each.
import fcntl, multiprocessing, struct
timings = open(os.path.join('..', 'lock-timings-' + os.path.basename(os.getcwd())), 'w')
def took(scenario, seconds):
    timings.write('%s %.4f\n' % (scenario, seconds)); timings.flush()
def errname(e): return errno.errorcode[e.errno]
def nb_flock(fd):
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return 'locked'
    except OSError as e:
        return errname(e)
def wait_until_locked(fd, within=10):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if nb_flock(fd) == 'locked': return 'locked'
        time.sleep(0.01)
    return 'still blocked'
def start(target, *args):
    p = multiprocessing.Process(target=target, args=args)
    p.start()
    return p

# filelock (Python's): open O_RDWR|O_CREAT|O_TRUNC, poll flock(LOCK_EX|LOCK_NB).
def filelock_holder(path, ready, done):
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    ready.set(); done.wait(); os.close(fd)
def filelock(name, existing):
    if existing: write(name, '')
    ready, done = multiprocessing.Event(), multiprocessing.Event()
    holder = start(filelock_holder, name, ready, done)
    ready.wait()
    began = time.monotonic()
    fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    took('filelock-%s' % ('existing' if existing else 'new'), time.monotonic() - began)
    print(name, 'second LOCK_NB', nb_flock(fd))
    done.set(); holder.join()
    print(name, 'after the holder closed', wait_until_locked(fd))
    os.close(fd)
filelock('new.lock', False)
filelock('existing.lock', True)

# A single-instance daemon: it writes its pid into its lock file and keeps it locked.
def daemon(path, ready, done):
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.ftruncate(fd, 0); os.write(fd, b'%d\n' % os.getpid())
    ready.set(); done.wait(); os.close(fd)
ready, done = multiprocessing.Event(), multiprocessing.Event()
first = start(daemon, 'daemon.pid', ready, done)
ready.wait()
began = time.monotonic()
fd = os.open('daemon.pid', os.O_RDWR | os.O_CREAT, 0o644)
took('single-instance', time.monotonic() - began)
print('second instance LOCK_NB', nb_flock(fd))
print('second instance reads the running pid', os.pread(fd, 100, 0) == b'%d\n' % first.pid)
done.set(); first.join(); os.close(fd)
os.unlink('daemon.pid') # it holds a pid, which differs between the runs

# cargo: LOCK_NB first, then "Blocking waiting for file lock" and a blocking flock.
def cargo_second(path, go, result):
    go.wait() # started before the first build opened the lock file: it must not inherit that open file
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    outcome = nb_flock(fd)
    if outcome != 'locked':
        fcntl.flock(fd, fcntl.LOCK_EX)
        outcome += ', then waited and locked'
    os.write(fd, b'second\n')
    os.close(fd)
    result.put(outcome)
result, go = multiprocessing.Queue(), multiprocessing.Event()
second = start(cargo_second, 'package-cache.lock', go, result)
fd = os.open('package-cache.lock', os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
os.write(fd, b'first\n')
go.set()
time.sleep(0.3)
os.close(fd)
second.join()
print('cargo second build', result.get())
print('cargo lock file', content('package-cache.lock'))

# Blocking flock waiters: three processes take turns.
def turn(path, label, ready):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    ready.set()
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, label.encode() + b'\n')
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
fd = os.open('turns', os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
waiters = []
began = time.monotonic()
for label in ('b', 'c', 'd'):
    ready = multiprocessing.Event()
    waiters.append(start(turn, 'turns', label, ready))
    ready.wait(20)
took('blocking-waiters', time.monotonic() - began)
os.write(fd, b'a\n')
fcntl.flock(fd, fcntl.LOCK_UN)
os.close(fd)
for w in waiters: w.join()
print('turns', sorted(content('turns').split()))
os.unlink('turns') # the waiters' order is the scheduler's, on either side

# OFD locks: advice with F_OFD_GETLK between processes, F_OFD_SETLK refused, F_OFD_SETLKW waits.
def flock_struct(kind, start=0, length=0): return struct.pack('hhxxxxqqixxxx', kind, 0, start, length, 0)
def ofd_holder(path, ready, done):
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.fcntl(fd, fcntl.F_OFD_SETLK, flock_struct(fcntl.F_WRLCK, 0, 10))
    ready.set(); done.wait()
    fcntl.fcntl(fd, fcntl.F_OFD_SETLK, flock_struct(fcntl.F_UNLCK, 0, 10))
    time.sleep(0.2); os.close(fd)
ready, done = multiprocessing.Event(), multiprocessing.Event()
holder = start(ofd_holder, 'ofd', ready, done)
ready.wait()
began = time.monotonic()
fd = os.open('ofd', os.O_RDWR | os.O_CREAT, 0o644)
took('ofd', time.monotonic() - began)
kind, _, start_, length, pid = struct.unpack('hhxxxxqqixxxx', fcntl.fcntl(fd, fcntl.F_OFD_GETLK, flock_struct(fcntl.F_WRLCK, 0, 10)))
print('ofd getlk', {fcntl.F_WRLCK: 'F_WRLCK', fcntl.F_UNLCK: 'F_UNLCK'}.get(kind), start_, length, pid)
try:
    fcntl.fcntl(fd, fcntl.F_OFD_SETLK, flock_struct(fcntl.F_WRLCK, 5, 1)); print('ofd setlk locked')
except OSError as e: print('ofd setlk', errname(e))
done.set()
fcntl.fcntl(fd, fcntl.F_OFD_SETLKW, flock_struct(fcntl.F_WRLCK, 5, 1)); print('ofd setlkw locked')
holder.join(); os.close(fd)

# POSIX locks (lockf), as CPython's test_fcntl uses them: open 'wb' in both processes.
def lockf_holder(path, ready, done):
    f = open(path, 'wb')
    fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    ready.set(); done.wait(); f.close()
for shared in (False, True):
    ready, done = multiprocessing.Event(), multiprocessing.Event()
    holder = start(lockf_holder, 'lockf', ready, done)
    ready.wait()
    began = time.monotonic()
    f = open('lockf', 'wb')
    took('lockf-' + ('share' if shared else 'exclusive'), time.monotonic() - began)
    kind, _, _, _, pid = struct.unpack('hhxxxxqqixxxx', fcntl.fcntl(f, fcntl.F_GETLK, flock_struct(fcntl.F_RDLCK if shared else fcntl.F_WRLCK)))
    print('lockf getlk names the holder', kind == fcntl.F_WRLCK and pid == holder.pid)
    try:
        fcntl.lockf(f, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB); print('lockf second locked')
    except OSError as e: print('lockf second', errname(e))
    done.set(); holder.join()
    fcntl.lockf(f, fcntl.LOCK_EX); print('lockf after the holder closed locked')
    f.close()

# The holder locks only after the second process began its open.
def late_locker(path, opened, lock_now, done):
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    opened.set(); lock_now.wait()
    fcntl.flock(fd, fcntl.LOCK_EX)
    done.wait(); os.close(fd)
opened, lock_now, done = multiprocessing.Event(), multiprocessing.Event(), multiprocessing.Event()
holder = start(late_locker, 'late.lock', opened, lock_now, done)
opened.wait()
def lock_soon():
    time.sleep(0.2); lock_now.set()
import threading
threading.Thread(target=lock_soon).start()
began = time.monotonic()
fd = os.open('late.lock', os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
took('locked-after-open', time.monotonic() - began)
lock_now.wait()
time.sleep(0.05)
print('late lock LOCK_NB', nb_flock(fd))
done.set(); holder.join(); os.close(fd)
