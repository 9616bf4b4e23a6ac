# Appends and what may follow them, run on the mount and on a plain directory: the results
# (contents, sizes, names) must be the same.
from coordtest import *
import hashlib, mmap
BASE = b''.join(b'line %03d\n' % i for i in range(100))
def fresh(name='f'):
    for n in os.listdir('.'):
        os.unlink(n)
    with open(name, 'wb') as f: f.write(BASE)
def show(label, name='f'):
    data = open(name, 'rb').read() if os.path.exists(name) else None
    print(label, sorted(os.listdir('.')), None if data is None else (len(data), data[-40:], data[:12], hashlib.sha256(data).hexdigest()[:16]))

fresh(); fd = os.open('f', os.O_WRONLY | os.O_APPEND)
os.write(fd, b'one\n'); os.write(fd, b'two\n'); os.close(fd); show('o_append')

fresh(); fd = os.open('f', os.O_WRONLY)
os.lseek(fd, 0, os.SEEK_END); os.write(fd, b'tail\n')
os.pwrite(fd, b'MID', 3); os.write(fd, b'after\n'); os.close(fd); show('end then middle')

fresh(); fd = os.open('f', os.O_RDWR | os.O_APPEND)
os.write(fd, b'grow\n'); os.ftruncate(fd, 5); os.write(fd, b'cut\n')
os.lseek(fd, 0, 0); print('own read', os.read(fd, 100)); os.close(fd); show('append then truncate')

fresh(); fd = os.open('f', os.O_WRONLY | os.O_APPEND)
os.write(fd, b'before rename\n'); os.rename('f', 'g'); os.write(fd, b'after rename\n'); os.close(fd); show('renamed', 'g')

fresh(); fd = os.open('f', os.O_WRONLY | os.O_APPEND)
os.write(fd, b'doomed\n'); os.unlink('f'); os.write(fd, b'more\n'); print('unlinked size', os.fstat(fd).st_size); os.close(fd); show('unlinked')

fresh(); a = os.open('f', os.O_WRONLY | os.O_APPEND); b = os.open('f', os.O_RDWR)
os.write(a, b'from a\n'); print('b sees', os.pread(b, 100, len(BASE)), os.fstat(b).st_size)
os.pwrite(b, b'from b\n', os.fstat(b).st_size); os.write(a, b'a again\n')
r = os.open('f', os.O_RDONLY); print('own reader', os.pread(r, 100, len(BASE))); os.close(r)
os.close(b); os.close(a); show('two handles')

fresh(); open('src', 'wb').write(b'copied bytes\n'); fd = os.open('f', os.O_WRONLY); src = os.open('src', os.O_RDONLY)
os.copy_file_range(src, fd, 13, 0, len(BASE)); os.close(src); os.close(fd); show('copy_file_range at the end')

fresh(); fd = os.open('f', os.O_RDWR)
os.lseek(fd, 0, os.SEEK_END); os.write(fd, b'mapped tail\n')
with mmap.mmap(fd, len(BASE) + 12) as m:
    m[0:4] = b'LINE'; m[-5:-1] = b'TAIL'; m.flush()
os.close(fd); show('mapped')

fresh(); fd = os.open('f', os.O_WRONLY | os.O_APPEND)
os.write(fd, b'x' * 10); fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 1 << 16); os.write(fd, b'y\n'); os.close(fd); show('fallocate')

fresh(); fd = os.open('f', os.O_WRONLY | os.O_APPEND)
os.write(fd, b'first\n'); os.chmod('f', 0o600); os.write(fd, b'second\n'); os.close(fd)
print('mode', oct(os.stat('f').st_mode & 0o777)); show('chmod while appending')
