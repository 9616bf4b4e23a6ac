# A write to a file the in-place policy writes directly (a database by its name) that meets a
# fault: `inPlaceWriteFails.py ERRNO CASE...`, CASE naming the call that fails: write, fsync
# (the program's).
from faults import *

COMMITTED = b'database\n' * 100

steps = {
    'write': [lambda: fail('write'), b'DATABASE\n'],
    'fsync': [lambda: fail('fsync'), 'fsync'],
}

for case in CASES:
    path = os.path.join(start(case, {'data.db': COMMITTED}), 'data.db')
    calls = program(path, os.O_RDWR, steps[case])
    settle(path)
    report(case, calls, held(path, COMMITTED) + '; ' + names(case))
    then(case, path, os.O_RDWR, [b'DATABASE\n', 'fsync'], shown=lambda path: content(path)[:20])
