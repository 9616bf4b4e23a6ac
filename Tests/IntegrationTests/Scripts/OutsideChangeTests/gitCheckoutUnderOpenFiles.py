"""`git checkout` of another branch run in the backing while this process has files open
through the mount.

  prepare BACKING   a repository in the backing with branches one (checked out) and two
  check BACKING     in the mount: read the whole tree, open files the checkout changes and
                    deletes, run the checkout in the backing; then the mount's tree equals the
                    backing's byte for byte (.git included), the open handles read what
                    handles on the bare disk read, and the watch saw the checkout from outside.
"""
from outside import *


def git(*arguments, cwd):
    subprocess.run(['git', *arguments], cwd=cwd, check=True, stdout=subprocess.DEVNULL)


def prepare(backing):
    os.umask(0o022)
    os.chdir(backing)
    git('init', '-q', '-b', 'one', cwd=backing)
    git('config', 'user.email', 'test@example.com', cwd=backing)
    git('config', 'user.name', 'test', cwd=backing)
    os.makedirs('src/deep')
    os.mkdir('bin')
    os.mkdir('docs')
    write('README', 'branch one\n')
    write('src/a.c', 'int a(void) { return 1; }\n')
    write('src/b.c', 'int b(void) { return 2; }\n' * 50)
    write('src/deep/c.c', 'int c;\n')
    write('bin/run.sh', '#!/bin/sh\necho one\n', 0o755)
    write('docs/old.md', '# old\n')
    os.symlink('README', 'link')
    git('add', '-A', cwd=backing)
    git('commit', '-q', '-m', 'one', cwd=backing)
    git('checkout', '-q', '-b', 'two', cwd=backing)
    write('README', 'branch two, a longer readme\n')
    write('src/a.c', 'int a(void) { return 2; }\n')         # the same size as on one
    os.unlink('docs/old.md')
    write('docs/new.md', '# new\n')
    os.chmod('bin/run.sh', 0o644)
    os.unlink('link')
    os.symlink('src/a.c', 'link')
    shutil.rmtree('src/deep')
    os.makedirs('lib/more')
    write('lib/more/d.c', 'int d;\n')
    git('add', '-A', cwd=backing)
    git('commit', '-q', '-m', 'two', cwd=backing)
    git('checkout', '-q', 'one', cwd=backing)


def check(backing):
    mount = os.getcwd()
    same_tree(mount, backing, 'the starting tree')
    warm(mount)
    assert content('README') == b'branch one\n'
    handles = [Pair(mount, backing, path) for path in ['README', 'src/a.c', 'docs/old.md', 'src/b.c']]
    for name in ['docs/new.md', 'lib']:
        assert outcome(os.lstat, name) == 'ENOENT', name
    watch = Watch(mount)
    try:
        git('checkout', '-q', 'two', cwd=backing)
        same_tree(mount, backing, 'the mount to show the checked-out branch two')
        assert content('README') == b'branch two, a longer readme\n'
        assert outcome(os.lstat, 'docs/old.md') == 'ENOENT'
        assert mode('bin/run.sh') == 0o644
        for pair in handles:
            pair.expect_same()
        expect_outside_events(watch, {'deleted /docs/old.md file', 'created /docs/new.md file', 'created /lib dir',
                                      'deleted /src/deep dir'}, 'outside events of the checkout')
    finally:
        watch.stop()
    print('ok')


if sys.argv[1] == 'prepare':
    prepare(sys.argv[2])
else:
    check(sys.argv[2])
