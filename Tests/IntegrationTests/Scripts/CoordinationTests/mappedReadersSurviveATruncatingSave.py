import os, subprocess, sys
with open('f', 'wb') as f: f.write(b'A' * 8192)
reader = subprocess.Popen([sys.executable, '-c', '''
import mmap, sys
f = open('f', 'rb'); m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
for line in sys.stdin:
    print(line.strip(), m[0:1].decode(), m[5000:5001].decode(), flush=True)
'''.replace('\n                ', '\n')], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
def ask(step):
    reader.stdin.write(step + '\n'); reader.stdin.flush()
    print(reader.stdout.readline().strip() or f'{step} reader died')
ask('mapped')
fd = os.open('f', os.O_WRONLY | os.O_TRUNC)
ask('truncated')
os.write(fd, b'B' * 10)
os.fstat(fd)
ask('written')
os.close(fd)
reader.stdin.close()
print('reader', reader.wait(), open('f').read())
