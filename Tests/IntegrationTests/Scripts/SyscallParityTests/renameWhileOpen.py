from coordtest import *
os.mkdir('sub')
fd = os.open('a', os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b'one ')
os.rename('a', 'sub/b'); os.write(fd, b'two ')
print(os.path.exists('a'), content('sub/b'))
os.rename('sub', 'sub2'); os.write(fd, b'three'); os.fchmod(fd, 0o640); os.fsync(fd); os.close(fd)
print(content('sub2/b'), oct(os.stat('sub2/b').st_mode))
r = os.open('sub2/b', os.O_RDONLY); os.rename('sub2/b', 'c')
print(os.read(r, 100), os.fstat(r).st_size); os.close(r)
# the file behind a name replaced while open
write('victim', 'old'); v = os.open('victim', os.O_RDONLY)
write('new', 'newer'); os.rename('new', 'victim')
print(os.read(v, 100), os.fstat(v).st_nlink, content('victim')); os.close(v)
# keep appending from another process while the name moves
w = os.open('log', os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
for i in range(5):
    os.write(w, b'%d ' % i); os.rename('log' if i == 0 else 'log%d' % (i - 1), 'log%d' % i)
os.close(w)
print(sorted(os.listdir('.')), content('log4'))
