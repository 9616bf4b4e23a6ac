"""One kind of change made directly in the backing, seen through the mount.

  prepare BACKING               the starting tree, made before the mount starts
  check BACKING KIND METHOD     in the mount: warm every cache, make the change in the backing
                                (this process, alive all along), then wait for the new state
                                through the mount (cat, stat, ls, xattrs, ENOENT) and the
                                outside events; METHOD says what their origin can tell.

Open handles through the mount are compared with handles on the same files in the backing:
after the change they must read what the bare disk's handles read.
"""
from outside import *

OLD = b'old content\n'


def prepare(backing):
    os.umask(0o022)
    os.chdir(backing)
    write('f', OLD)
    os.mkdir('d')
    write('d/g', b'inner\n')
    write('d/h', b'second\n')
    write('d/w', b'draft\n')
    write('x', b'x\n')
    os.setxattr('x', 'user.color', b'red')
    os.setxattr('x', 'user.gone', b'bye')


def check(backing, kind, method):
    os.umask(0o022)
    mount = os.getcwd()
    m = lambda path: os.path.join(mount, path)
    b = lambda path: os.path.join(backing, path)
    assert watch_method() == method, f'the mount watches with {watch_method()}, not {method}'
    same_tree(mount, backing, 'the starting tree')
    # Names the changes create: looked up (and missing) first, so a negative entry is cached too.
    for name in ['new', 'newdir', 'd/moved', 'e', 'f-link', '.f.new']:
        assert outcome(os.lstat, m(name)) == 'ENOENT', name
    os.getxattr(m('x'), 'user.color')
    warm(mount)
    watch = Watch(mount)
    seen = OutsideEvents(watch, method)
    try:
        CHANGES[kind](m, b, seen)
        same_tree(mount, backing)
        print('outside events:', '; '.join(seen.finish(mount, backing)))
    finally:
        watch.stop()
    print('ok', kind)


def write_in_place(m, b, seen):
    pair = Pair(m(''), b(''), 'f')
    fd = os.open(b('f'), os.O_WRONLY)
    os.pwrite(fd, b'NEW', 0)                      # the same size: only the contents tell
    os.close(fd)
    settle('cat f', lambda: content(m('f')), b'NEW content\n')
    pair.expect_same()
    seen.expect('changed /f file')


def truncate(m, b, seen):
    os.truncate(b('f'), 4)
    settle('cat f', lambda: content(m('f')), b'old ')
    settle('the size of f', lambda: os.stat(m('f')).st_size, 4)
    seen.expect('changed /f file')


def replace_by_rename(m, b, seen):
    pair = Pair(m(''), b(''), 'f')
    write(b('.f.new'), b'replaced\n')
    os.rename(b('.f.new'), b('f'))
    settle('cat f', lambda: content(m('f')), b'replaced\n')
    settle('.f.new gone', lambda: os.lstat(m('.f.new')), 'ENOENT')
    pair.expect_same('the handle opened before the replacement to read the old file, as on the bare disk')
    assert pair.read()[0] == OLD, pair.read()
    seen.expect('created /.f.new file', 'moved /.f.new -> /f file')


def create(m, b, seen):
    write(b('new'), b'fresh\n', 0o640)
    settle('cat new', lambda: content(m('new')), b'fresh\n')
    settle('the mode of new', lambda: mode(m('new')), 0o640)
    settle('ls', lambda: sorted(os.listdir(m(''))), ['d', 'f', 'new', 'x'])
    seen.expect('created /new file')


def delete(m, b, seen):
    pair = Pair(m(''), b(''), 'f')
    os.unlink(b('f'))
    settle('stat f', lambda: os.lstat(m('f')), 'ENOENT')
    settle('cat f', lambda: content(m('f')), 'ENOENT')
    settle('ls', lambda: sorted(os.listdir(m(''))), ['d', 'x'])
    pair.expect_same('the handle opened before the deletion to read the file, as on the bare disk')
    assert pair.read()[0] == OLD, pair.read()
    seen.expect('deleted /f file')


def mkdir_and_rmdir(m, b, seen):
    os.mkdir(b('newdir'))
    settle('newdir a directory', lambda: stat.S_ISDIR(os.lstat(m('newdir')).st_mode), True)
    settle('ls', lambda: sorted(os.listdir(m(''))), ['d', 'f', 'newdir', 'x'])
    settle('the link count of the root', lambda: os.lstat(m('')).st_nlink, os.lstat(b('')).st_nlink)
    seen.expect('created /newdir dir')
    same_tree(m(''), b(''))
    warm(m(''))
    os.rmdir(b('newdir'))
    settle('stat newdir', lambda: os.lstat(m('newdir')), 'ENOENT')
    settle('ls newdir', lambda: os.listdir(m('newdir')), 'ENOENT')
    settle('ls', lambda: sorted(os.listdir(m(''))), ['d', 'f', 'x'])
    seen.expect('deleted /newdir dir')


def rename_file(m, b, seen):
    pair = Pair(m(''), b(''), 'f')
    os.rename(b('f'), b('d/moved'))
    settle('stat f', lambda: os.lstat(m('f')), 'ENOENT')
    settle('cat d/moved', lambda: content(m('d/moved')), OLD)
    settle('ls', lambda: sorted(os.listdir(m(''))), ['d', 'x'])
    settle('ls d', lambda: sorted(os.listdir(m('d'))), ['g', 'h', 'moved', 'w'])
    pair.expect_same()
    seen.expect('moved /f -> /d/moved file')


def rename_directory(m, b, seen):
    """A directory renamed while this process has files open under it through the mount: two
    readers and a writer. The readers keep reading their files, also when one of them is then
    changed in place at its new path; the writer's data lands in the file at its new path."""
    readers = [Pair(m(''), b(''), 'd/g'), Pair(m(''), b(''), 'd/h')]
    writer = os.open(m('d/w'), os.O_WRONLY)
    os.rename(b('d'), b('e'))
    settle('stat d', lambda: os.lstat(m('d')), 'ENOENT')
    settle('ls e', lambda: sorted(os.listdir(m('e'))), ['g', 'h', 'w'])
    settle('cat e/g', lambda: content(m('e/g')), b'inner\n')
    for pair in readers:
        pair.expect_same()
    seen.expect('moved /d -> /e dir')
    warm(m(''))

    fd = os.open(b('e/h'), os.O_WRONLY)
    os.pwrite(fd, b'SECOND', 0)
    os.close(fd)
    settle('cat e/h', lambda: content(m('e/h')), b'SECOND\n')
    readers[1].expect_same('the handle opened as d/h to read the new bytes of e/h, as on the bare disk')
    seen.expect('changed /e/h file')

    os.write(writer, b'written after the move\n')
    os.close(writer)
    seen.changed_through_mount('/e/w')
    settle('cat e/w', lambda: content(m('e/w')), b'written after the move\n')
    settle('cat e/w in the backing', lambda: content(b('e/w')), b'written after the move\n')
    settle('ls of the backing', lambda: sorted(os.listdir(b(''))), ['e', 'f', 'x'])
    for pair in readers:
        pair.close()


def chmod(m, b, seen):
    os.chmod(b('f'), 0o600)
    settle('the mode of f', lambda: mode(m('f')), 0o600)
    seen.expect('attributes /f file')


def chown(m, b, seen):
    os.chown(b('f'), 65534, 65534)
    settle('the owner of f', lambda: (os.lstat(m('f')).st_uid, os.lstat(m('f')).st_gid), (65534, 65534))
    seen.expect('attributes /f file')


def utimes(m, b, seen):
    atime, mtime = 978307200_123456789, 1012608000_987654321     # 2001-01-01, 2002-02-02 UTC
    os.utime(b('f'), ns=(atime, mtime))
    # Checked before anything reads f (a read may move the access time on).
    settle('the times of f', lambda: (os.lstat(m('f')).st_atime_ns, os.lstat(m('f')).st_mtime_ns), (atime, mtime))
    seen.expect('attributes /f file')


def xattrs(m, b, seen):
    os.setxattr(b('x'), 'user.color', b'blue')
    os.setxattr(b('x'), 'user.shape', b'round')
    os.removexattr(b('x'), 'user.gone')
    settle('user.color of x', lambda: os.getxattr(m('x'), 'user.color'), b'blue')
    settle('user.gone of x', lambda: os.getxattr(m('x'), 'user.gone'), 'ENODATA')
    settle('the xattrs of x', lambda: sorted(os.listxattr(m('x'))), ['user.color', 'user.shape'])
    # The kernel merges like events still queued: one event at least, and no other kind.
    seen.expect('attributes /x file')


def hard_link(m, b, seen):
    os.link(b('f'), b('f-link'))
    settle('cat f-link', lambda: content(m('f-link')), OLD)
    settle('the link count of f', lambda: os.lstat(m('f')).st_nlink, 2)
    settle('the link count of f-link', lambda: os.lstat(m('f-link')).st_nlink, 2)
    settle('ls', lambda: sorted(os.listdir(m(''))), ['d', 'f', 'f-link', 'x'])
    seen.expect('created /f-link file')
    seen.touch('/f')                              # its link count changed: an attributes event may come


def unnamed_file_linked_in(m, b, seen):
    """A file made the way coordfs itself saves: unnamed (O_TMPFILE), written, its mode set,
    then linked in under its name. Through the mount that is one new file: so from outside."""
    fd = os.open(b(''), os.O_TMPFILE | os.O_WRONLY, 0o600)
    os.write(fd, b'made unnamed\n')
    os.fchmod(fd, 0o640)
    AT_EMPTY_PATH = 0x1000
    if libc.linkat(fd, b'', AT_FDCWD, os.fsencode(b('new')), AT_EMPTY_PATH) != 0:
        fail()
    os.close(fd)
    settle('cat new', lambda: content(m('new')), b'made unnamed\n')
    settle('the mode of new', lambda: mode(m('new')), 0o640)
    settle('ls', lambda: sorted(os.listdir(m(''))), ['d', 'f', 'new', 'x'])
    seen.expect('created /new file')


CHANGES = {
    'writeInPlace': write_in_place, 'truncate': truncate, 'replaceByRename': replace_by_rename,
    'create': create, 'delete': delete, 'mkdirAndRmdir': mkdir_and_rmdir, 'renameFile': rename_file,
    'renameDirectoryWithOpenFiles': rename_directory, 'chmod': chmod, 'chown': chown,
    'utimes': utimes, 'xattrs': xattrs, 'hardLink': hard_link, 'unnamedFileLinkedIn': unnamed_file_linked_in,
}

if sys.argv[1] == 'prepare':
    prepare(sys.argv[2])
else:
    check(*sys.argv[2:5])
