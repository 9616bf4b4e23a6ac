from coordtest import *
fd = os.open('new', os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644); os.write(fd, b'mine')
t('rename into another filesystem', os.rename, 'new', 'other/new')
t('rename within', os.rename, 'new', 'moved')
os.close(fd)
print(sorted(os.listdir('.')), os.listdir('other'), content('moved'))
