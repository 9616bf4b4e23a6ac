from coordtest import *
import mmap
write('f', b'.' * 8192)
fd = os.open('f', os.O_RDWR)
m = mmap.mmap(fd, 8192, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
ready, go = os.pipe()
done, finished = os.pipe()
pid = os.fork()
if pid == 0:
    m[0:5] = b'child'; m[5000:5005] = b'CHILD'
    os.write(go, b'x')
    os.read(done, 1)
    print('child sees', m[100:106])
    os._exit(0)
os.read(ready, 1)
print('parent sees', m[0:5], m[5000:5005])
m[100:106] = b'parent'
os.write(finished, b'x')
os.waitpid(pid, 0)
m.flush(); m.close(); os.close(fd)
data = content('f')
print('committed', len(data), data[0:5], data[100:106], data[5000:5005], data.count(b'.'))
fd = os.open('appended', os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
os.write(fd, b'a' * 8192)
m = mmap.mmap(fd, 8192, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
m[10:14] = b'MAPD'; m.flush(); m.close()
os.write(fd, b'end'); os.close(fd)
data = content('appended')
print('appended', len(data), data[8:16], data[-5:])
