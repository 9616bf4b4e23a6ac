from coordtest import *
import mmap
write('shared.db', b'\0' * 8192)
fd = os.open('shared.db', os.O_RDWR)
m = mmap.mmap(fd, 8192, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
other = subprocess.run([sys.executable, '-c', '''
import mmap, os
fd = os.open('shared.db', os.O_RDWR)
m = mmap.mmap(fd, 8192, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
m[4096:4102] = b'from B'
print('B sees', m[0:6])
m.close(); os.close(fd)
'''.replace('\n                ', '\n')], capture_output=True, text=True)
print(other.stdout.strip() + other.stderr.strip())
print('A sees', m[4096:4102])
m[0:6] = b'from A'
reader = subprocess.run(['dd', 'if=shared.db', 'bs=6', 'count=1', 'status=none'], capture_output=True)
print('C reads', reader.stdout)
m.close(); os.close(fd)
print('after', content('shared.db')[0:6], content('shared.db')[4096:4102])
