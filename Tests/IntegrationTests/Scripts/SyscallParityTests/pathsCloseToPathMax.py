from coordtest import *
names = ['%02d' % i + 'd' * 198 for i in range(19)]
top = os.open('.', os.O_RDONLY | os.O_DIRECTORY)
fd = top
for name in names:
    os.mkdir(name, 0o755, dir_fd=fd)
    inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    if fd != top: os.close(fd)
    fd = inner
os.close(fd)
path = '/'.join(names) + '/' + 'f' * 180
print(len(path))
write(path, 'deep data')
s = os.stat(path); print(content(path), s.st_size, oct(s.st_mode), s.st_nlink)
os.rename(path, path[:-1] + 'g'); os.link(path[:-1] + 'g', path); print(os.stat(path).st_nlink)
os.symlink('f' * 180, path[:-2] + 'ln'); print(content(path[:-2] + 'ln'))
t('longer than PATH_MAX', os.stat, path + '/' + 'x' * 100)
t('create longer than PATH_MAX', touch_open, path[:-1] + 'h' * 120, os.O_CREAT | os.O_WRONLY)
for name in names: os.chdir(name)
print(sorted(n[:3] + '..%d' % len(n) for n in os.listdir('.')), os.stat('f' * 180).st_size)
write('written-from-inside', 'x' * 5000); print(sizes('written-from-inside'))
os.fchdir(top)
print(sum(len(files) for _, _, files in os.walk(names[0])))
shutil.rmtree(names[0])
print(os.listdir('.'))
