from coordtest import *
MiB = 1 << 20
fd = os.open('sparse', os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(fd, b'A' * 4096, 0); os.pwrite(fd, b'B' * 8192, MiB); os.pwrite(fd, b'C', 3 * MiB)
os.fsync(fd)
print(sizes('sparse'))
for name, whence in (('data', os.SEEK_DATA), ('hole', os.SEEK_HOLE)):
    for offset in (0, 4095, 4096, MiB - 1, MiB + 4096, 2 * MiB, 3 * MiB, 3 * MiB + 1):
        t('%s from %d' % (name, offset), os.lseek, fd, offset, whence)
t('position after seek', os.lseek, fd, 0, os.SEEK_CUR)
os.ftruncate(fd, 5 * MiB)
t('hole after extend', os.lseek, fd, 3 * MiB + 4096, os.SEEK_HOLE)
t('data after extend', os.lseek, fd, 3 * MiB + 4096, os.SEEK_DATA)
t('end', os.lseek, fd, 0, os.SEEK_END)
t('negative', os.lseek, fd, -1, os.SEEK_SET)
os.close(fd)
write('dense', 'x' * 10000)
fd = os.open('dense', os.O_RDONLY)
t('dense data', os.lseek, fd, 100, os.SEEK_DATA); t('dense hole', os.lseek, fd, 100, os.SEEK_HOLE)
os.close(fd)
