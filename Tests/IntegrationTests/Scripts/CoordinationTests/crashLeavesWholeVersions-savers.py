import os, sys
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
for i in range(8): Process(target=save, args=(i,)).start()
