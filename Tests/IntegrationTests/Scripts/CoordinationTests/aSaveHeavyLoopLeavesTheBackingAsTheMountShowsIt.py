import os, random
from multiprocessing import Process
def work(seed):
    rng = random.Random(seed)
    dirs = ['d%d/s%d' % (seed, i) for i in range(3)] + ['shared']
    for d in dirs: os.makedirs(d, exist_ok=True)
    names = ['f%d-%d' % (seed, i) for i in range(4)]
    for step in range(300):
        d = rng.choice(dirs); path = os.path.join(d, rng.choice(names))
        op = rng.randrange(8)
        if op == 0:
            with open(path, 'wb') as f: f.write(os.urandom(rng.randrange(1, 9000)))
        elif op == 1 and os.path.exists(path):
            with open(path, 'r+b') as f: f.seek(rng.randrange(100)); f.write(b'patched')
        elif op == 2:
            with open(path, 'ab') as f: f.write(b'line %d\n' % step)
        elif op == 3:
            tmp = path + '.tmp%d' % seed
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, b'atomic %d' % step)
            if rng.random() < 0.5: os.rename(tmp, path); os.close(fd)
            else: os.close(fd); os.replace(tmp, path)
        elif op == 4 and os.path.exists(path):
            os.rename(path, os.path.join(rng.choice(dirs), rng.choice(names)))
        elif op == 5 and os.path.exists(path):
            os.unlink(path)
        elif op == 6 and os.path.exists(path):
            os.truncate(path, rng.randrange(50))
        else:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.write(fd, b'x' * rng.randrange(5000)); os.close(fd)
workers = [Process(target=work, args=(seed,)) for seed in (1, 2)]
for w in workers: w.start()
for w in workers: w.join()
print('exit', [w.exitcode for w in workers])
