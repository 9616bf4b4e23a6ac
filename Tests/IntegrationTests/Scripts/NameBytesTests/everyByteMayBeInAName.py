from coordtest import *
from hexnames import h, listing
# One file per byte value ('.' alone is no name: three of them), and a name of all of them.
singles = [bytes([b]) if b != 0x2E else b'...' for b in range(1, 256) if b != 0x2F]
everything = bytes(b for b in range(1, 256) if b != 0x2F)
mixed = [b'x' + bytes([b]) + b'\xff' + bytes([b]) for b in range(1, 256) if b != 0x2F]
for name in singles + mixed + [everything]:
    write(name, name)
print('names', len(os.listdir(b'.')))
for name in sorted(os.listdir(b'.')):
    assert content(name) == name, name
print(listing())
# Each renamed, then every other one removed; the rest read back.
for name in singles:
    os.rename(name, b'r' + name)
for name in mixed[::2]:
    os.unlink(name)
t('stat gone', os.stat, mixed[0])
t('stat renamed', lambda: os.stat(b'r\xff').st_size)
print(listing())
os.mkdir(everything[:100] + b'.d')
os.rename(b'r\x80', everything[:100] + b'.d/' + b'\x80\x81')
print(listing(everything[:100] + b'.d'))
