# A save that finds its file changed behind the mount (written directly in the backing while
# the save is open) and meets a fault when it commits: `conflictCopyFails.py ERRNO CASE...`,
# CASE: link (the link that keeps the outside version as a conflict copy fails), commit (the
# copy is made, then the commit's rename fails).
from faults import *

OUTSIDE = b'behind the mount\n'

def change_behind_the_mount(path):
    def change():
        with open(os.path.join(BACKING, path), 'wb') as file:
            file.write(OUTSIDE)
    return change

rule = {'link': lambda: fail('link', count=1), 'commit': lambda: fail('rename')}

for case in CASES:
    path = os.path.join(start(case, {'shared': b'base\n'}), 'shared')
    calls = program(path, os.O_WRONLY | os.O_TRUNC, [b'through the mount\n', change_behind_the_mount(path), rule[case]])
    settle(path)
    # The mount learns of the outside change from its watch of the backing, in its own time.
    wait_until(f'the mount showing the outside version of {path}', lambda: content(path) == OUTSIDE)
    report(case, calls, held(path, OUTSIDE) + '; ' + names(case))
    then(case, path, os.O_WRONLY | os.O_TRUNC, [b'after\n'])
