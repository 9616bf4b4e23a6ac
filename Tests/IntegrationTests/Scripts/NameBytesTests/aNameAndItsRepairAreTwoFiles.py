from coordtest import *
from hexnames import h, listing
raw = b'bad\xff\xfename'
repaired = 'bad\ufffd\ufffdname'.encode()
write(raw, 'raw')
t('repaired before', os.stat, repaired)
write(repaired, 'repaired')
print('both', listing())
t('raw', content, raw)
t('repaired', content, repaired)
os.mkdir(b'd\xff')
t('repaired dir', os.listdir, 'd\ufffd'.encode())
os.unlink(repaired)
t('raw after', content, raw)
print('left', listing())
