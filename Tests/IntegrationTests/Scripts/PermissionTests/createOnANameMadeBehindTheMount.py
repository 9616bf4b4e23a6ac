from coordtest import *
def append(path, data):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666); os.write(fd, data); os.close(fd)
t('append to root 0600 file', append, 'shared/x', b'pwned')
t('append to root 0666 file', append, 'shared/y', b'more')
t('append to own file', append, 'shared/z', b'more')
t('exclusive create', touch_open, 'pub/new2', os.O_CREAT | os.O_EXCL | os.O_WRONLY)
t('truncating create of root 0644 file', touch_open, 'pub/new', os.O_CREAT | os.O_TRUNC | os.O_WRONLY)
