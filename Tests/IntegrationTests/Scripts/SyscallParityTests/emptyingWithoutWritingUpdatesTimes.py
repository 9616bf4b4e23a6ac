from coordtest import *
def aged(data):
    write('g', data)
    os.utime('g', (1600000000, 1600000000))
    time.sleep(0.1)
    return time.time_ns() - 30_000_000
def fresh(status, since):
    return status.st_mtime_ns >= since and status.st_ctime_ns >= since
for round in range(3):
    since = aged('data %d ' % round * 100)
    touch_open('g', os.O_WRONLY | os.O_TRUNC)
    after = os.stat('g')
    print(round, 'O_TRUNC', after.st_size, fresh(after, since))
    since = aged('more %d ' % round * 50)
    fd = os.open('g', os.O_WRONLY)
    os.ftruncate(fd, 0)
    pending = os.fstat(fd)
    os.close(fd)
    after = os.stat('g')
    print(round, 'ftruncate', pending.st_size, fresh(pending, since), after.st_size, fresh(after, since), content('g'))
