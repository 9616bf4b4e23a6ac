"""Opens FILE for writing, replaces its contents with TEXT, says so by creating WROTEFILE,
waits for GOFILE, then closes: prints how the close went."""
from coordtest import *

path, text, wrote, go = sys.argv[1:5]
fd = os.open(path, os.O_RDWR)
os.ftruncate(fd, 0)
os.write(fd, text.encode())
open(wrote, 'w').close()
wait_until('the go file', lambda: os.path.exists(go), within=60)
try:
    os.close(fd)
    print('close ok')
except OSError as e:
    print('close', errno.errorcode[e.errno])
