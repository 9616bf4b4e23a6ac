from coordtest import *
# With --writeback-cache the kernel gathers writes in its page cache: st_blocks may lag while
# they wait, and agrees with the backing once they are flushed (fsync) and the file is closed.
backing = sys.argv[1]
fd = os.open('f', os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
for i in range(64):
    os.write(fd, b'x' * 1024)
os.fsync(fd)
os.close(fd)
mounted, underneath = os.stat('f'), os.stat(os.path.join(backing, 'f'))
print('size', mounted.st_size, underneath.st_size)
print('blocks agree after the flush', mounted.st_blocks == underneath.st_blocks, mounted.st_blocks > 0)
