# Appends a few bytes to 'data' and holds the handle open (the append uncommitted) until a
# line arrives on standard input.
from coordtest import *
fd = os.open('data', os.O_WRONLY | os.O_APPEND)
os.write(fd, b'held!\n')
print('holding', flush=True)
sys.stdin.readline()
os.close(fd)
