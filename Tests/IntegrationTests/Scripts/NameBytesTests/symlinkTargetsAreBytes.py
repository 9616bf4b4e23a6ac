from coordtest import *
from hexnames import h, listing
targets = [b'tar\xffget', bytes(range(1, 256)), b'\xc3\x28/\x80', 'bad\ufffd'.encode(), b'../\xfe\xfd']
for index, target in enumerate(targets):
    os.symlink(target, b'link\xff%d' % index)
for index, target in enumerate(targets):
    got = os.readlink(b'link\xff%d' % index)
    print('readlink', index, got == target)
print('hex', h(os.readlink(b'link\xff0')))
print(listing())
