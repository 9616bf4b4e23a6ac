# A first save (the file is created through the mount) that meets a fault:
# `firstSaveFails.py ERRNO CASE...`, CASE naming the call that fails: write, fsync (the
# commit's), link (the commit's link of an unnamed temp to its name), rename (the commit's
# rename of a named temp).
from faults import *

CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL

steps = {
    'write': [lambda: fail('write'), b'never\n'],
    'fsync': [b'never\n', lambda: fail('fsync')],
    'link': [b'never\n', lambda: fail('link')],
    'rename': [b'never\n', lambda: fail('rename')],
}

for case in CASES:
    path = os.path.join(start(case, {}), 'new')
    calls = program(path, CREATE, steps[case])
    settle(path)
    shown = sorted(os.listdir(case))
    report(case, calls, f'{held(path, b"")}; listed {shown}; {names(case)}')
    then(case, path, CREATE, [b'after\n'])
