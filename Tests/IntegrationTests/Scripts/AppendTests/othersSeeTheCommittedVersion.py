# While this process appends at the end (and then writes inside the file), another process sees the
# committed version, byte for byte; after the close, the whole result.
from coordtest import *
BASE = b'committed\n' * 1000
open('f', 'wb').write(BASE)
def other():
    out = subprocess.run(['sh', '-c', 'stat -c %s f; cat f | md5sum'], capture_output=True).stdout.decode().split()
    return out[0], out[1]
import hashlib
md5 = lambda b: hashlib.md5(b).hexdigest()
fd = os.open('f', os.O_WRONLY)
os.lseek(fd, 0, os.SEEK_END)
os.write(fd, b'appended\n')
print('appending', other() == (str(len(BASE)), md5(BASE)))
os.pwrite(fd, b'X', 0)
print('after a write inside', other() == (str(len(BASE)), md5(BASE)))
os.write(fd, b'again\n')
os.close(fd)
final = b'X' + BASE[1:] + b'appended\nagain\n'
print('closed', other() == (str(len(final)), md5(final)), open('f', 'rb').read() == final)
