from coordtest import *
from owners import who
NOW, OMIT = (0, UTIME_NOW), (0, UTIME_OMIT)
recent = lambda ns: abs(ns - time.time_ns()) < 60 * 10**9
before = os.stat('shared/rootfile')
t('touch root 0666 file', os.utime, 'shared/rootfile')
after = os.stat('shared/rootfile'); print('touched', recent(after.st_mtime_ns), recent(after.st_atime_ns))
t('explicit times on root 0666 file', os.utime, 'shared/rootfile', (1, 1))
t('explicit mtime, atime omitted', utimens, 'shared/rootfile', OMIT, (5, 0))
t('now and omit on root 0666 file', utimens, 'shared/rootfile', NOW, OMIT)
t('both omitted on root 0666 file', utimens, 'shared/rootfile', OMIT, OMIT)
t('touch root 0644 file', os.utime, 'public')
t('touch with the touch tool', lambda: subprocess.run(['touch', '-c', 'shared/rootfile2']).returncode)
print('public untouched', os.stat('public').st_mtime_ns == 978307200 * 10**9)
write('shared/mine', 'x')
t('explicit times on own file', os.utime, 'shared/mine', ns=(1000000000000000001, 1000000000000000002))
s = os.stat('shared/mine'); print(s.st_atime_ns, s.st_mtime_ns)
