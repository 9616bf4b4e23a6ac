# One writer appends lines, each append its own open and close, each line written in two
# halves with a pause between, and says which line it is about to commit just before each
# close. Readers of every kind check, all the while, that they never see a byte of what is not
# committed, and whether their size went past the last commit or cut a line. Prints
# "reads N uncommitted [...]", then "past the commit [kinds] torn [kinds]", then whether
# every kind of reader sees the whole file at the end.
from coordtest import *
import mmap
from multiprocessing import Event, Process, Queue, Semaphore, Value

LINE = 64
COMMITTED = 2000
APPENDS = int(sys.argv[1]) if len(sys.argv) > 1 else 300

def line(i):
    head = ('%08d:' % i).encode()
    return head + b'x' * (LINE - len(head) - 1) + b'\n'

def writer(closing):
    for i in range(COMMITTED, COMMITTED + APPENDS):
        whole = line(i)
        f = open('log', 'ab', buffering=0)
        f.write(whole[:LINE // 2])
        time.sleep(0.0005)
        f.write(whole[LINE // 2:])
        closing.value = i
        f.close()

def examine(data, size, closing):
    """(uncommitted, past, torn): uncommitted bytes a reader saw; whether its size or its read
    went past the last commit (zeros there: the kernel's one size per inode); whether a line
    was cut short."""
    # Asked after the read: no line after the one being closed then was committed during it.
    limit = (closing.value + 1) * LINE
    uncommitted = None
    if data[limit:].strip(b'\0'): uncommitted = '%d bytes past the %d committed' % (len(data) - limit, limit)
    whole = min(len(data), limit) - min(len(data), limit) % LINE
    for start in range(max(0, whole - 4 * LINE), whole, LINE):
        seen = data[start:start + LINE]
        if seen != line(start // LINE) and seen.strip(b'\0'):
            uncommitted = uncommitted or 'line %d is %r' % (start // LINE, seen)
    past = size > limit or len(data) > limit
    torn = len(data) % LINE != 0 or size % LINE != 0 or b'\0' in data[-LINE:]
    return uncommitted, past, torn

def reader(kind, held, ready, done, closing, results):
    uncommitted, past, torn, reads = [], 0, 0, 0
    try:
        if kind in ('held-pread', 'held-mmap'):
            # Opened by this reader before the appends begin: it reads through the page cache.
            held = os.open('log', os.O_RDONLY)
            os.pread(held, 1 << 22, 0)
        ready.release()
        while not done.is_set() or reads < 3:
            if kind == 'open-read':
                size = os.stat('log').st_size
                with open('log', 'rb') as f: data = f.read()
            elif kind in ('held-pread', 'creator-held-pread'):
                size = os.fstat(held).st_size
                data = os.pread(held, 1 << 22, 0)
            elif kind == 'mmap':
                fd = os.open('log', os.O_RDONLY)
                size = os.fstat(fd).st_size
                with mmap.mmap(fd, size, prot=mmap.PROT_READ) as m: data = m[:]
                os.close(fd)
            elif kind == 'held-mmap':
                size = os.fstat(held).st_size
                with mmap.mmap(held, size, prot=mmap.PROT_READ) as m: data = m[:]
            found, beyond, cut = examine(data, size, closing)
            if found and len(uncommitted) < 5: uncommitted.append('%s: %s' % (kind, found))
            past += beyond
            torn += cut
            reads += 1
    except Exception as error:
        uncommitted.append('%s: %r' % (kind, error))
        ready.release()
    results.put((kind, reads, uncommitted, past, torn))

with open('log', 'wb') as f:
    for i in range(COMMITTED): f.write(line(i))
time.sleep(0.3)  # the creating save ends at its release, which follows the close
held = os.open('log', os.O_RDONLY)  # the file's creator's: read by 'creator-held-pread'
os.pread(held, 1 << 22, 0)
closing = Value('l', COMMITTED - 1)
ready, done, results = Semaphore(0), Event(), Queue()
kinds = ['open-read', 'mmap', 'held-pread', 'held-mmap', 'creator-held-pread']
readers = [Process(target=reader, args=(kind, held, ready, done, closing, results)) for kind in kinds]
for r in readers: r.start()
for r in readers: ready.acquire()
w = Process(target=writer, args=(closing,))
w.start(); w.join()
done.set()
collected = sorted(results.get(timeout=120) for _ in readers)
for r in readers: r.join()
print('reads', sum(c[1] for c in collected), 'uncommitted', [p for c in collected for p in c[2]])
print('past the commit', [c[0] for c in collected if c[3]], 'torn', [c[0] for c in collected if c[4]])
expected = b''.join(line(i) for i in range(COMMITTED + APPENDS))
with open('log', 'rb') as f: fresh = f.read()
with mmap.mmap(held, os.fstat(held).st_size, prot=mmap.PROT_READ) as m: mapped = m[:]
print('final', fresh == expected, os.pread(held, 1 << 22, 0) == expected, mapped == expected)
