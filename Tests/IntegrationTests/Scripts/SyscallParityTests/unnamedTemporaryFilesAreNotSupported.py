from coordtest import *
def tmpfile():
    fd = os.open('.', os.O_TMPFILE | os.O_RDWR, 0o600)
    os.write(fd, b'unnamed')
    # link(2) would link the /proc symlink itself: linkat with AT_SYMLINK_FOLLOW names the file
    if libc.linkat(AT_FDCWD, b'/proc/self/fd/%d' % fd, AT_FDCWD, b'named', 0x400) != 0: fail()
    os.close(fd)
    return content('named')
t('O_TMPFILE', tmpfile)
