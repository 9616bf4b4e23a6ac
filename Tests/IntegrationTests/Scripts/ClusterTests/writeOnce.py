"""Opens FILE r+ (waiting for its write claim as long as the mount makes it) and writes TEXT at
its start; prints how it went."""
from coordtest import *

path, text = sys.argv[1], sys.argv[2]
try:
    with open(path, 'r+') as f:
        f.write(text)
    print('wrote')
except OSError as e:
    print('write', errno.errorcode[e.errno])
