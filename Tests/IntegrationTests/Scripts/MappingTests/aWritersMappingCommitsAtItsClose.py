from mapped_reader import *
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.msync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
SIZE = 3 * 4096
with open('f', 'wb') as f: f.write(b'old!' * 1024)
fd = os.open('f', os.O_RDWR)
os.ftruncate(fd, SIZE)
address = libc.mmap(None, SIZE, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
print('mapped', address not in (None, ctypes.c_void_p(-1).value))
ctypes.memmove(address, b'new!' * (SIZE // 4), SIZE)
print('msync', libc.msync(address, SIZE, 4)) # MS_SYNC
print('others read', cat('f') == b'old!' * 1024)
print('others stat', subprocess.run(['stat', '-c', '%s', 'f'], capture_output=True, text=True).stdout.strip())
other = start_reader('f')
print('others map', ask(other, 'map'))
other.stdin.close(); other.wait()
print('owner sees', ctypes.string_at(address + SIZE - 4, 4))
libc.munmap(address, SIZE)
os.close(fd)
print('after close', cat('f') == b'new!' * (SIZE // 4), len(cat('f')))
# Closed before unmapped: the writes after the close commit at the munmap.
fd = os.open('f', os.O_RDWR)
m = mmap.mmap(fd, SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
os.close(fd)
m[0:4] = b'last'
print('before munmap', cat('f')[0:4])
m.close()
wait_until_released('/f') # the release comes after the munmap returned
print('after munmap', cat('f')[0:8], len(cat('f')))
print(sorted(name for name in os.listdir('.')))
