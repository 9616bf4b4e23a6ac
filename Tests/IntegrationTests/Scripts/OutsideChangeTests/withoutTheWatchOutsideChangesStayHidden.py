"""`--no-watch-backing` keeps the old behaviour: with the caches warm, changes made in the
backing stay invisible through the mount (for the length of this look: a second), and no
outside event comes. This is the control of the other tests: the same changes under a
watching mount must show, so those checks can fail.

  prepare BACKING
  check BACKING     in the mount: warm, change in place, chmod and delete in the backing, then
                    look for a second; a write through the mount is the fence for events.
"""
from outside import *


def prepare(backing):
    for name in ['f', 'g', 'h']:
        write(os.path.join(backing, name), 'old content\n')


def check(backing):
    mount = os.getcwd()
    print('watch:', watch_method())
    same_tree(mount, backing, 'the starting tree')
    warm(mount)
    watch = Watch(mount)
    try:
        fd = os.open(os.path.join(backing, 'f'), os.O_WRONLY)
        os.pwrite(fd, b'NEW', 0)
        os.close(fd)
        os.chmod(os.path.join(backing, 'g'), 0o600)
        os.unlink(os.path.join(backing, 'h'))
        looks = set()
        deadline = time.monotonic() + 1
        while time.monotonic() < deadline:
            looks.add((content('f'), mode('g'), outcome(lambda: os.lstat('h').st_size)))
            time.sleep(0.02)
        print('through the mount:', sorted(looks))
        write('fence', 'x\n')
        watch.wait_for('the event of the fence', lambda event: event.get('path') == '/fence')
        print('outside events:', [describe(e) for e in watch.events() if is_outside(e)])
    finally:
        watch.stop()


if sys.argv[1] == 'prepare':
    prepare(sys.argv[2])
else:
    check(sys.argv[2])
