import os, errno
with open('f', 'wb') as f: f.write(b'committed' * 1000)
try:
    with open('f', 'wb') as f:
        for _ in range(64): f.write(b'x' * 65536)
    print('no error')
except OSError as e:
    print('save failed', errno.errorcode[e.errno])
print(open('f', 'rb').read() == b'committed' * 1000, sorted(os.listdir('.')))
