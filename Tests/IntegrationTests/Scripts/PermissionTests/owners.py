"""Imported by every script nobody runs in both directories: `who` tells owners and modes
as ls would, and the import sets the umask and says who runs."""
import os, stat
def who(*paths):
    out = []
    for p in paths:
        s = os.lstat(p)
        out.append('%s=%d:%d:%o' % (p, s.st_uid, s.st_gid, stat.S_IMODE(s.st_mode)))
    return ' '.join(out)
os.umask(0o022)
print('running as', os.getuid(), os.getgid(), os.getgroups())
