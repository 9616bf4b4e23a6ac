import ctypes, mmap, os, subprocess, sys
from coordtest import wait_until_released
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
def mapped(name):
    # The distinct 4-byte words a private mapping shows. Through libc, with no stat on
    # the way (Python's open and mmap make one): a stat refreshes the attributes, and
    # the kernel drops the pages by itself when it sees a new modification time.
    fd = os.open(name, os.O_RDONLY)
    address = libc.mmap(None, 4096, mmap.PROT_READ, mmap.MAP_PRIVATE, fd, 0)
    data = ctypes.string_at(address, 4096)
    libc.munmap(address, 4096)
    os.close(fd)
    return ' '.join(sorted({data[i:i + 4].decode() for i in range(0, 4096, 4)}))
for name in ('read', 'unread'):
    with open(name, 'wb') as f: f.write(b'old!' * 1024)
for round in range(3):
    for name in ('read', 'unread'):
        writer = subprocess.Popen([sys.executable, '-c', f"import os, sys; fd = os.open({name!r}, os.O_WRONLY | os.O_TRUNC); os.write(fd, b'new{round}' * 1024); print(flush=True); sys.stdin.readline(); os.close(fd)"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        writer.stdout.readline()
        during = mapped(name) if name == 'read' else '-'
        writer.stdin.write('\n'); writer.stdin.flush(); writer.wait()
        wait_until_released('/' + name) # the kernel sends the writer's release after its exit, unwaited
        print(round, name, during, mapped(name))
