# Appends 4 MiB to 'log' and holds the append open (uncommitted) until the mount goes away;
# 'held' (a file of its own, committed at its close) says the bytes are written.
from coordtest import *
f = open('log', 'ab', buffering=0)
for i in range(64): f.write(b'%06d' % i + b'u' * (65536 - 7) + b'\n')
open('held', 'wb').close()
try:
    while True:
        os.fstat(f.fileno()); time.sleep(0.05)
except OSError:
    pass
