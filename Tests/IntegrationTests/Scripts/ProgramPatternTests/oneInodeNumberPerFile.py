from coordtest import *
# One file, one inode number, whatever saves do underneath (a save stages a new file and
# renames it over the old): stat before and after rewrites, the number /proc/locks shows for a
# lock on it, hard links, and no two files sharing a number (the replaced file's number freed
# and handed to a new file by the backing).
import fcntl
write('f', 'one')
before = os.stat('f').st_ino
fd = os.open('f', os.O_WRONLY | os.O_TRUNC); os.write(fd, b'two')
print('while saving', os.fstat(fd).st_ino == before, os.stat('f').st_ino == before)
fcntl.flock(fd, fcntl.LOCK_EX)
device = os.stat('f').st_dev
mark = '%02x:%02x:%d' % (os.major(device), os.minor(device), before)
print('/proc/locks names the file', any(mark in line and str(os.getpid()) in line for line in open('/proc/locks')))
os.close(fd)
print('after the save', os.stat('f').st_ino == before)
for i in range(20):
    write('f', 'again %d' % i)
print('after more saves', os.stat('f').st_ino == before)
os.link('f', 'hard')
print('hard link shares it', os.stat('hard').st_ino == os.stat('f').st_ino)
names = []
for i in range(50):
    write('n%d' % i, 'x'); write('n%d' % i, 'y'); names.append('n%d' % i)
numbers = [os.stat(n).st_ino for n in names + ['f']]
print('no two files share a number', len(set(numbers)) == len(numbers))
print('listing agrees with stat', all(e.inode() == os.stat(e.name).st_ino for e in os.scandir('.')))
