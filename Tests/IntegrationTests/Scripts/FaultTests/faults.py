"""The FaultTests scripts' helpers: `from faults import *`.

Each script runs in the mount, with the fault shim's control file in $COORDFS_FAULT_CONTROL
and the backing in $COORDFS_FAULT_ROOT (see Tests/FaultShim/faultshim.c), the errno name to
fail with as its first argument and the cases to run after it. Each case works in a folder of
its own, named by the case: it sets up its files, runs a program (`program`) that meets the
fault, waits until the daemon is done with the program's file (`settle`) and prints one line
while the fault still lasts, `report`: what each of the program's calls got, what the mount
and the backing hold, and every name in the backing. Then it clears the fault, runs the
program again (nothing may be stuck) and prints what that got.
"""
from coordtest import *

CONTROL = os.environ['COORDFS_FAULT_CONTROL']
BACKING = os.environ['COORDFS_FAULT_ROOT']
ERROR = sys.argv[1]
CASES = sys.argv[2:]
_rewrites = 0


def rules(*lines):
    """Replaces the shim's rules ('OP ERRNO SKIP COUNT'; none clears them). The file is
    replaced whole by a rename, and starts with a line numbering the rewrite, so the shim never
    reads half a file and never takes one rewrite for the one before."""
    global _rewrites
    _rewrites += 1
    with open(CONTROL + '.new', 'w') as file:
        file.write(f'# {os.getpid()} {_rewrites}\n' + ''.join(line + '\n' for line in lines))
    os.rename(CONTROL + '.new', CONTROL)


def fail(operation, skip=0, count=1_000_000):
    """From now on, calls of `operation` on the backing fail with ERROR (after `skip` more pass)."""
    rules(f'{operation} {ERROR} {skip} {count}')


def clear():
    rules()


def outcome(call, *arguments):
    """'ok', or the errno name `call` failed with."""
    try:
        call(*arguments)
        return 'ok'
    except OSError as error:
        return errno.errorcode[error.errno]


def program(path, flags, steps):
    """What a program does with `path`: opens it with `flags`, then takes `steps` in order
    until a call fails (bytes: a write; 'fsync'; a function: something the test does
    meanwhile, not a call of the program's), and closes it whatever happened. Returns what
    each call got: 'write ok, write ENOSPC, close ENOSPC'."""
    descriptor = os.open(path, flags, 0o644)
    got = []
    for step in steps:
        if callable(step):
            step()
            continue
        name, result = ('fsync', outcome(os.fsync, descriptor)) if step == 'fsync' else ('write', outcome(os.write, descriptor, step))
        got.append(f'{name} {result}')
        if result != 'ok':
            break
    got.append(f'close {outcome(os.close, descriptor)}')  # the descriptor is closed even when close fails
    return ', '.join(got)


def settle(path):
    """Waits until the last release of `path` reached the daemon, which commits or throws the
    save away before it lets the claim go: what the backing holds after is what stays."""
    wait_until_released('/' + path)


def held(path, expected):
    """What `path` holds in the mount and in the backing: 'as before' when that is `expected`."""
    def verdict(where):
        try:
            data = content(where)
        except OSError as error:
            return errno.errorcode[error.errno]
        return 'as before' if data == expected else f'{len(data)} bytes {data[:24]!r}'
    return f'mount {verdict(path)}; backing {verdict(os.path.join(BACKING, path))}'


def names(folder):
    """Every name in `folder` of the backing, and in the backing's root every name that is not a
    case's folder (where the append journal would be)."""
    root = sorted(name for name in os.listdir(BACKING) if name not in CASES)
    return f'names {sorted(os.listdir(os.path.join(BACKING, folder)))}' + (f'; root {root}' if root else '')


def report(case, calls, details):
    print(f'{case}: {calls}; {details}', flush=True)


def then(case, path, flags, steps, shown=content):
    """Clears the fault and runs the program again; prints what its calls got, what `shown`
    makes of the file then, and the names in the backing."""
    clear()
    calls = program(path, flags, steps)
    settle(path)
    print(f'  then {calls}; {shown(path)!r}; {names(case)}', flush=True)


def start(case, files):
    """Makes the case's folder with `files` (name: bytes) through the mount; returns the folder.
    Each file is committed before this returns: a close hands its release to the daemon
    without waiting, and a program that opened the file before that release arrived would
    join the setup's save (the same process) rather than meet the committed file."""
    os.mkdir(case)
    for name, data in files.items():
        write(os.path.join(case, name), data)
        settle(os.path.join(case, name))
    return case
