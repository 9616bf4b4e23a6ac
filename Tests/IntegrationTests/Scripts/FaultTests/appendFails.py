# An append (O_APPEND) that meets a fault once its first write went to the file itself:
# `appendFails.py ERRNO CASE...`, CASE naming the call that fails: write (the second write),
# fsync (the commit's).
from faults import *

COMMITTED = b'line 1\n'

def in_place(path):
    """The first append went to the backing file itself, behind the committed size."""
    def check():
        size = os.stat(os.path.join(BACKING, path)).st_size
        assert size == len(COMMITTED) + 7, f'the append did not go to the file itself: {size} bytes'
    return check

for case in CASES:
    path = os.path.join(start(case, {'log': COMMITTED}), 'log')
    second = [lambda: fail('write'), b'line 3\n'] if case == 'write' else [lambda: fail('fsync')]
    calls = program(path, os.O_WRONLY | os.O_APPEND, [b'line 2\n', in_place(path)] + second)
    settle(path)
    report(case, calls, held(path, COMMITTED) + '; ' + names(case))
    then(case, path, os.O_WRONLY | os.O_APPEND, [b'line 4\n'])
