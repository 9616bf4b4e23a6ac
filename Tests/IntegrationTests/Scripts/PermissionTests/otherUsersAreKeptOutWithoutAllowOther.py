from coordtest import *
t('stat the mount', lambda: stat.S_ISDIR(os.stat('mnt').st_mode))
t('list the mount', lambda: sorted(os.listdir('mnt')))
t('read a file', content, 'mnt/file')
t('stat a file', lambda: os.stat('mnt/file').st_size)
t('access', os.access, 'mnt/file', os.R_OK)
t('chdir into the mount', os.chdir, 'mnt/dir')
