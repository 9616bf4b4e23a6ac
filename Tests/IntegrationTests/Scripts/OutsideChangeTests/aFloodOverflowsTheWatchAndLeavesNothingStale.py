"""100,000 files created in the backing while the daemon is stopped (SIGSTOP), so that the
watch's queue (16,384 events by default) surely overflows; one file is deleted and one changed
in the middle of the flood.

  prepare BACKING          flood/ with the file to delete and the file to change
  check BACKING DAEMON METHOD
                           in the mount: warm flood/ and its files, flood the backing with the
                           daemon stopped, continue it; then a subscriber gets the backing's
                           overflow marker (after its own queue's, perhaps, or folded into it),
                           and nothing is stale: the listing equals the backing's, the
                           deleted file is gone, the changed one shows its new bytes.
"""
from outside import *

FILES = 100_000
# Long enough for a debug build to list 100,000 names a few times over.
SLOW = 120


def prepare(backing):
    os.mkdir(os.path.join(backing, 'flood'))
    write(os.path.join(backing, 'flood/victim'), 'to be deleted\n')
    write(os.path.join(backing, 'flood/changed'), 'old bytes\n')


def check(backing, daemon, method):
    mount = os.getcwd()
    assert watch_method() == method, f'the mount watches with {watch_method()}, not {method}'
    flood, inside = os.path.join(backing, 'flood'), os.path.join(mount, 'flood')
    assert sorted(os.listdir(inside)) == ['changed', 'victim']
    assert content('flood/victim') == b'to be deleted\n' and content('flood/changed') == b'old bytes\n'
    for name in ['n000000', 'n099999']:
        assert outcome(os.lstat, 'flood/' + name) == 'ENOENT', name
    warm(mount)
    before = os.lstat(inside)
    watch = Watch(mount)
    try:
        os.kill(daemon, signal.SIGSTOP)
        try:
            for number in range(FILES):
                os.close(os.open(os.path.join(flood, 'n%06d' % number), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
                if number == FILES // 2:
                    os.unlink(os.path.join(flood, 'victim'))
                    fd = os.open(os.path.join(flood, 'changed'), os.O_WRONLY)
                    os.pwrite(fd, b'NEW', 0)
                    os.close(fd)
        finally:
            os.kill(daemon, signal.SIGCONT)
        settle('the backing\'s overflow marker at the subscriber',
               lambda: any(marker.get('reason') == 'backing' for marker in watch.overflows()), True, within=SLOW)
        print('overflow markers:', json.dumps(watch.overflows()))

        def listing():
            names, truth = set(os.listdir(inside)), set(os.listdir(flood))
            return len(names), len(truth), sorted(names - truth)[:5], sorted(truth - names)[:5]
        settle('ls flood | wc -l to equal the backing', lambda: listing()[0], len(os.listdir(flood)), within=SLOW)
        assert listing()[0:2] == (FILES + 1, FILES + 1) and not listing()[2] and not listing()[3], listing()
        settle('stat flood/victim', lambda: os.lstat('flood/victim'), 'ENOENT')
        settle('cat flood/changed', lambda: content('flood/changed'), b'NEW bytes\n')
        settle('stat flood/n099999', lambda: stat.S_ISREG(os.lstat('flood/n099999').st_mode), True)
        settle('the times and links of flood', lambda: (os.lstat(inside).st_mtime_ns, os.lstat(inside).st_nlink),
               (os.lstat(flood).st_mtime_ns, os.lstat(flood).st_nlink))
        assert os.lstat(flood).st_mtime_ns != before.st_mtime_ns
    finally:
        watch.stop()
    print('ok')


if sys.argv[1] == 'prepare':
    prepare(sys.argv[2])
else:
    check(sys.argv[2], int(sys.argv[3]), sys.argv[4])
