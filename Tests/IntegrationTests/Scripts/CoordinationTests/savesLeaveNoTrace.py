import os, stat
os.chdir('d')
def save(name, data):
    with open(name, 'wb') as f: f.write(data)
save('a', b'A' * 5000); os.setxattr('a', 'user.only-a', b'secret'); os.chmod('a', 0o640)
save('b', b'B' * 3); os.chmod('b', 0o755)
reader = open('a', 'rb')                      # holds the first version of a
for i in range(20):
    save('a', b'a%d' % i * 100)
    save('b', b'b%d' % i)
save('linked', b'new')
print('reader', reader.read() == b'A' * 5000)
print('a', open('a', 'rb').read() == b'a19' * 100, oct(os.stat('a').st_mode & 0o777), os.listxattr('a'))
print('b', open('b', 'rb').read(), oct(os.stat('b').st_mode & 0o777), os.listxattr('b'))
print('linked', open('linked', 'rb').read())
print('backing', sorted(os.listdir('../../backing/d')))
for name in ('a', 'b', 'linked'): os.unlink(name)
os.chdir('..')
os.rmdir('d')
os.mkdir('e'); os.mkdir('f')
save('e/x', b'1'); save('e/x', b'2'); os.unlink('e/x')
os.rename('f', 'e')
print('dirs', sorted(os.listdir('.')))
