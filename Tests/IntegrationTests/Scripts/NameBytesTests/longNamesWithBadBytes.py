from coordtest import *
from hexnames import h, listing
long = b'\xff\xfe' * 127 + b'\x80'            # 255 bytes, none of them UTF-8
other = b'a' * 250 + b'\xc3\x28\xe2\x82\x28'    # 255 bytes, ending in broken sequences
too_long = long + b'\x81'                     # 256 bytes
t('create 255', write, long, 'long')
t('stat 255', lambda: os.stat(long).st_size)
t('rename 255 to 255', os.rename, long, other)
t('stat old', os.stat, long)
t('read renamed', content, other)
t('mkdir 255', os.mkdir, long)
t('rename into dir', os.rename, other, long + b'/' + other)
print(listing(), '|', listing(long))
t('unlink 255', os.unlink, long + b'/' + other)
t('rmdir 255', os.rmdir, long)
t('create 256', write, too_long, 'x')
t('stat 256', os.stat, too_long)
t('mkdir 256', os.mkdir, too_long)
write(b'short', 'y')
t('rename to 256', os.rename, b'short', too_long)
t('symlink at 256', os.symlink, b'target', too_long)
print(listing())
