# Two processes append lines to one file, each line its own open, write and close: every
# line lands once, whole. Prints "lines N missing M doubled D torn T".
from coordtest import *
from multiprocessing import Process
COUNT = 200
def append(tag):
    for i in range(COUNT):
        with open('shared.log', 'a') as f: f.write('%s %04d %s\n' % (tag, i, 'y' * 40))
open('shared.log', 'w').write('header\n')
procs = [Process(target=append, args=(tag,)) for tag in 'AB']
for p in procs: p.start()
for p in procs: p.join()
lines = open('shared.log').read().split('\n')
assert lines[-1] == ''
lines = lines[1:-1]
expected = {'%s %04d %s' % (tag, i, 'y' * 40) for tag in 'AB' for i in range(COUNT)}
torn = [l for l in lines if l not in expected]
print('lines', len(lines), 'missing', len(expected - set(lines)), 'doubled', len(lines) - len(set(lines)), 'torn', len(torn))
