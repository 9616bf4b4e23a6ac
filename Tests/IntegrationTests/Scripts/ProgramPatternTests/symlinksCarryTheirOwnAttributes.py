from coordtest import *
# xattrs on a symlink itself (l*xattr): the backing decides, as on a plain disk: trusted.* and
# security.* are taken (root), user.* refused; the link's target is never touched.
write('target', 'x')
os.symlink('target', 'link')
os.symlink('nowhere', 'dangling')
for link in ('link', 'dangling'):
    t(link + ' set trusted', os.setxattr, link, 'trusted.coordfs-test', b'v1', follow_symlinks=False)
    t(link + ' get trusted', os.getxattr, link, 'trusted.coordfs-test', follow_symlinks=False)
    t(link + ' list', lambda: sorted(n for n in os.listxattr(link, follow_symlinks=False) if not n.startswith('security.')))
    t(link + ' set user', os.setxattr, link, 'user.coordfs-test', b'v', follow_symlinks=False)
    t(link + ' replace trusted', os.setxattr, link, 'trusted.coordfs-test', b'v2', os.XATTR_REPLACE, follow_symlinks=False)
    t(link + ' get again', os.getxattr, link, 'trusted.coordfs-test', follow_symlinks=False)
    t(link + ' remove trusted', os.removexattr, link, 'trusted.coordfs-test', follow_symlinks=False)
    t(link + ' get removed', os.getxattr, link, 'trusted.coordfs-test', follow_symlinks=False)
    t(link + ' remove missing', os.removexattr, link, 'trusted.coordfs-test', follow_symlinks=False)
t('target untouched', lambda: sorted(n for n in os.listxattr('target') if not n.startswith('security.')))
