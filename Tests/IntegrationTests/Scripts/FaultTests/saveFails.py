# A save of an existing file that meets a fault: `saveFails.py ERRNO CASE...`, CASE naming the
# call that fails: write (the second of two), copy (the staging's copy, for a write inside the
# file), fsync (the commit's), fsync-by-program (the program's own fsync, once), link (the
# commit's link of an unnamed temp), rename (the commit's rename).
from faults import *

COMMITTED = bytes(range(256)) * 48  # 12 KiB: a torn or shortened version shows
NEW = b'n' * 4096
TRUNCATE = os.O_WRONLY | os.O_TRUNC

steps = {
    'write': (TRUNCATE, [NEW, lambda: fail('write'), NEW]),
    'copy': (os.O_WRONLY, [lambda: fail('copy'), NEW]),
    'fsync': (TRUNCATE, [NEW, NEW, lambda: fail('fsync')]),
    'fsync-by-program': (TRUNCATE, [NEW, lambda: fail('fsync', count=1), 'fsync', NEW]),
    'link': (TRUNCATE, [NEW, NEW, lambda: fail('link')]),
    'rename': (TRUNCATE, [NEW, NEW, lambda: fail('rename')]),
}

for case in CASES:
    path = os.path.join(start(case, {'file': COMMITTED}), 'file')
    flags, program_steps = steps[case]
    calls = program(path, flags, program_steps)
    settle(path)
    report(case, calls, held(path, COMMITTED) + '; ' + names(case))
    then(case, path, TRUNCATE, [b'after\n'])
