from coordtest import *
# Eight processes create files under umask 022 first, so that every worker thread of the daemon
# serves creates under a mask that clears bits; then the same under umask 0, mode 0666: each
# file must come out 0666 whichever thread serves it (and 0644 under 022).
import multiprocessing
def make(batch, mask, mode, count, worker):
    os.umask(mask)
    for i in range(count):
        os.close(os.open('%s/%d-%d' % (batch, worker, i), os.O_CREAT, mode))
def run(batch, mask, mode):
    os.mkdir(batch)
    workers = [multiprocessing.Process(target=make, args=(batch, mask, mode, 100, w)) for w in range(8)]
    for w in workers: w.start()
    for w in workers: w.join()
    found = {}
    for name in os.listdir(batch):
        m = '%o' % stat.S_IMODE(os.stat(batch + '/' + name).st_mode)
        found[m] = found.get(m, 0) + 1
    print(batch, sorted(found.items()))
run('masked', 0o022, 0o666)
run('unmasked', 0o000, 0o666)
run('masked-again', 0o077, 0o666)
run('unmasked-again', 0o000, 0o640)
