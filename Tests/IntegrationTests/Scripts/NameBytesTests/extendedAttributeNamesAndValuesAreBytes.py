from coordtest import *
from hexnames import h, listing
write(b'f\xff', 'x')
os.mkdir(b'd\xfe')
names = [b'user.n\xffame', b'user.' + bytes(range(0x80, 0x100)), 'user.bad\ufffd'.encode(), b'user.plain']
values = [b'v\xff\x00al', bytes(range(256)), b'', b'plain']
for target in (b'f\xff', b'd\xfe'):
    for name, value in zip(names, values):
        t('set', os.setxattr, target, name, value)
    print('list', sorted(h(os.fsencode(n)) for n in os.listxattr(target)))
    for name, value in zip(names, values):
        print('get', h(name)[:24], os.getxattr(target, name) == value)
    t('remove', os.removexattr, target, names[0])
    t('get removed', os.getxattr, target, names[0])
    t('remove repaired twin', os.removexattr, target, 'user.n\ufffdame'.encode())
t('control not listed', lambda: any(b'coordfs' in os.fsencode(n) for n in os.listxattr(b'f\xff')))
