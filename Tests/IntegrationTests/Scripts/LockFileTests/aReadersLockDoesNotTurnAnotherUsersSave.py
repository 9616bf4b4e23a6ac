from coordtest import *
# Two users: nobody may only read `shared`, and takes a shared flock on it through a read-only
# descriptor. Root saves the file (half written, held open). Another writer's open must not
# turn root's save in place (commit its half): the lock is not the saver's, and nobody may not
# change the file. So the save stays atomic: readers see the original, and a second writer
# waits for root's claim (O_NONBLOCK: EAGAIN at once). Root's own lock does turn it in place.
import fcntl, multiprocessing
write('shared', 'original')
os.chmod('shared', 0o644)
def reader_locks(ready, done):
    os.setgid(65534); os.setuid(65534)
    fd = os.open('shared', os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_SH)
    ready.set(); done.wait(); os.close(fd)
ready, done = multiprocessing.Event(), multiprocessing.Event()
reader = multiprocessing.Process(target=reader_locks, args=(ready, done)); reader.start()
ready.wait()
def saver(saving, finish, lock):
    fd = os.open('shared', os.O_WRONLY | os.O_TRUNC)
    os.write(fd, b'half')
    if lock: fcntl.flock(fd, fcntl.LOCK_SH)
    saving.set(); finish.wait()
    os.write(fd, b' and whole'); os.close(fd)
def second_writer():
    try:
        os.close(os.open('shared', os.O_WRONLY | os.O_NONBLOCK)); return 'opened'
    except OSError as e:
        return errno.errorcode[e.errno]
for lock in (False, True):
    saving, finish = multiprocessing.Event(), multiprocessing.Event()
    root = multiprocessing.Process(target=saver, args=(saving, finish, lock)); root.start()
    saving.wait()
    print('saver locks' if lock else 'only the reader locks', 'second writer', second_writer(), 'readers see', content('shared'))
    finish.set(); root.join()
    print('after the close', content('shared'))
done.set(); reader.join()
