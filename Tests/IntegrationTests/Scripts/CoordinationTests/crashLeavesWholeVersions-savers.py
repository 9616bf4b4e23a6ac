import os, sys, time
from multiprocessing import Process
def save(i):
    version = 0
    while True:
        version += 1
        try:
            with open('f%d' % i, 'wb') as f:
                for _ in range(16): f.write(('%d:%d\n' % (i, version)).encode() * 4096)
        except OSError:
            return
for i in range(8):
    with open('f%d' % i, 'wb') as f: f.write(('%d:0\n' % i).encode() * 4096 * 16)
def hold():
    # One save surely in flight at the crash, with data written: its file stays open, and
    # 'held' (a file of its own, committed at its close) says the data is in. It ends once
    # the mount is gone.
    f = open('f8', 'wb')
    f.write(b'8:1\n' * 4096); f.flush()
    open('held', 'wb').close()
    try:
        while True:
            os.fstat(f.fileno()); time.sleep(0.05)
    except OSError:
        return
for i in range(8): Process(target=save, args=(i,)).start()
Process(target=hold).start()
