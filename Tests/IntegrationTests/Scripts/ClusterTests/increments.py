"""Adds COUNT to the number in FILE (mount-relative, in the mount this runs in), one at a
time: open it r+ (a write claim until the close), read, write n+1, close. An increment the
mount refused (EBUSY, ENOLCK or EWOULDBLOCK at the open; EIO at the close of a commit it
refused) changed nothing, and is tried again; every refusal is counted. Prints one JSON
line: the increments made and the refusals by errno name."""
from coordtest import *

path, count = sys.argv[1], int(sys.argv[2])
retried = {'EBUSY', 'ENOLCK', 'EAGAIN', 'EIO', 'EINTR'}
refusals = {}
made = 0
while made < count:
    try:
        with open(path, 'r+') as f:
            n = int(f.read() or '0')
            f.seek(0)
            f.write(str(n + 1))
            f.truncate()
        made += 1
    except OSError as e:
        name = errno.errorcode.get(e.errno, str(e.errno))
        refusals[name] = refusals.get(name, 0) + 1
        if name not in retried or sum(refusals.values()) > 5000:
            print(json.dumps({'made': made, 'refusals': refusals, 'gave up': str(e)}))
            sys.exit(1)
        time.sleep(0.05)
print(json.dumps({'made': made, 'refusals': refusals}))
