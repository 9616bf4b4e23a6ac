# A rename through the mount whose rename in the backing fails: `renameFails.py ERRNO CASE...`,
# CASE: over (onto an existing name), new (to a free name).
from faults import *

MOVING, TARGET = b'moving\n', b'target\n'

for case in CASES:
    folder = start(case, {'from': MOVING} | ({'to': TARGET} if case == 'over' else {}))
    source, destination = os.path.join(folder, 'from'), os.path.join(folder, 'to')
    fail('rename')
    calls = 'rename ' + outcome(os.rename, source, destination)
    report(case, calls, f'from: {held(source, MOVING)}; to: {held(destination, TARGET)}; {names(case)}')
    clear()
    calls = 'rename ' + outcome(os.rename, source, destination)
    print(f'  then {calls}; {sorted(os.listdir(folder))} {content(destination)!r}; {names(case)}', flush=True)
