"""Adds COUNT to the number in FILE (mount-relative, in the mount this runs in), one at a
time: open it r+ (a write claim until the close), read, write n+1, close. An increment the
mount refused (EBUSY, ENOLCK or EWOULDBLOCK at the open; EIO at the close of a commit it
refused) changed nothing, and is tried again; every refusal is counted. Prints one JSON
line: the increments made and the refusals by errno name. With a third argument, LOG, each
increment also goes to LOG as one line: the value written, when the open and the close
returned (CLOCK_REALTIME), and the inode the open found (for a failing test's message)."""
from coordtest import *

path, count = sys.argv[1], int(sys.argv[2])
log = open(sys.argv[3], 'a', buffering=1) if len(sys.argv) > 3 else None
retried = {'EBUSY', 'ENOLCK', 'EAGAIN', 'EIO', 'EINTR'}
refusals = {}
made = 0
while made < count:
    try:
        with open(path, 'r+') as f:
            opened = time.time()
            inode = os.fstat(f.fileno()).st_ino
            n = int(f.read() or '0')
            f.seek(0)
            f.write(str(n + 1))
            f.truncate()
        made += 1
        if log:
            log.write(f'{n + 1} {opened:.6f} {time.time():.6f} {os.getpid()} {inode}\n')
    except OSError as e:
        name = errno.errorcode.get(e.errno, str(e.errno))
        refusals[name] = refusals.get(name, 0) + 1
        if name not in retried or sum(refusals.values()) > 5000:
            print(json.dumps({'made': made, 'refusals': refusals, 'gave up': str(e)}))
            sys.exit(1)
        time.sleep(0.05)
print(json.dumps({'made': made, 'refusals': refusals}))
