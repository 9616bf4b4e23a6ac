from coordtest import *
import mmap
# Every way of changing a file's data, by nobody, on set-id files of root's (root's group,
# which nobody is not in): set-user-id falls, and set-group-id with it, on the mount as on
# the disk, although the daemon that changes the file is root.
def direct(path):
    fd = os.open(path, os.O_WRONLY | os.O_DIRECT)
    block = mmap.mmap(-1, 4096); block.write(b'd' * 4096)
    os.write(fd, block); os.close(fd)
def buffered(path):
    fd = os.open(path, os.O_WRONLY); os.write(fd, b'buffered'); os.close(fd)
def appended(path):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND); os.write(fd, b'more'); os.close(fd)
def allocate(mode):
    def change(path):
        fd = os.open(path, os.O_WRONLY)
        try:
            if libc.fallocate(fd, mode, 0, 8192) != 0: fail()
        finally:
            os.close(fd)
    return change
def truncated(path): os.truncate(path, 10)
def ftruncated(path):
    fd = os.open(path, os.O_WRONLY); os.ftruncate(fd, 20); os.close(fd)
def opened_truncating(path):
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC); os.close(fd)
def copied_into(path):
    source = os.open('setid/source', os.O_RDONLY); fd = os.open(path, os.O_WRONLY)
    os.copy_file_range(source, fd, 100, 0, 0); os.close(source); os.close(fd)
changes = [('direct', direct), ('buffered', buffered), ('appended', appended), ('allocated', allocate(0)),
           ('punched', allocate(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)), ('zeroed', allocate(FALLOC_FL_ZERO_RANGE)),
           ('truncated', truncated), ('ftruncated', ftruncated), ('opened-truncating', opened_truncating),
           ('copied-into', copied_into)]
for name, change in changes:
    for mode in ('6666', '6676'):
        path = 'setid/%s-%s' % (name, mode)
        t(path, change, path)
        print(path, oct(os.stat(path).st_mode & 0o7777))
print('done')
