# "open O_RDWR, read the number, write number+1, close", 1,250 times in each of 8 processes.
import os, sys
from multiprocessing import Process
def work():
    for _ in range(1250):
        fd = os.open('counter', os.O_RDWR)
        n = int(os.read(fd, 64) or b'0')
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, str(n + 1).encode())
        os.close(fd)
with open('counter', 'w') as f: f.write('0')
workers = [Process(target=work) for _ in range(8)]
for w in workers: w.start()
for w in workers: w.join()
print(open('counter').read())
