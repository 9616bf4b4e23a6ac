"""Opens FILE for writing, overwrites its start, says so by creating WROTEFILE, and keeps the
handle open until the mount goes away (its daemon is killed)."""
from coordtest import *

path, wrote = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_RDWR)
os.write(fd, b'w' * 1000)
open(wrote, 'w').close()
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    try:
        os.stat(path)
    except OSError:
        break
    time.sleep(0.05)
try:
    os.close(fd)
except OSError:
    pass
