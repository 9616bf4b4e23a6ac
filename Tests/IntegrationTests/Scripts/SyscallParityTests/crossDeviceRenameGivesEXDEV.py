from coordtest import *
write('x', 'payload'); os.mkdir('dir')
target = '/dev/shm/coordfs-exdev-%d' % os.getpid()
print('other fs', os.stat('.').st_dev != os.stat('/dev/shm').st_dev)
t('rename file out', os.rename, 'x', target)
t('rename dir out', os.rename, 'dir', target)
t('link out', os.link, 'x', target)
t('renameat2 noreplace out', renameat2, 'x', target, RENAME_NOREPLACE)
print(os.path.exists(target), content('x'))
# tools fall back to copy and delete on EXDEV
shutil.move('x', target)
print(os.path.exists('x'), open(target).read())
shutil.move(target, 'back')
print(content('back'), os.path.exists(target))
