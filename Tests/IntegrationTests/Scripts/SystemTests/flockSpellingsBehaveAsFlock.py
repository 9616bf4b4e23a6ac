# `coordfs exec` with flock(1)'s spellings behaves as flock does, case by case: the same
# exit status and output for flock on a plain file and for coordfs exec on a file in the
# mount, each against a holder of its own kind (flock's lock, or another exec's claim).
import os, subprocess, time
from system import Scratch, BINARY, unmount

CASES = [
    # (holder's mode or None, arguments after the tool's name; F is the file)
    (None, ['-x', 'F', 'echo', 'hello', '-l']),
    (None, ['F', 'echo', 'plain']),
    (None, ['F', '-c', 'echo one; exit 3']),
    (None, ['-s', 'F', 'true']),
    (None, ['-s', '-x', 'F', 'true']),             # the last mode given counts
    (None, ['-E', '9', 'F', '-c', 'exit 4']),
    ('-x', ['-n', 'F', 'true']),
    ('-x', ['--nb', 'F', 'true']),
    ('-x', ['-n', '-E', '7', 'F', 'true']),
    ('-x', ['--nonblock', '--conflict-exit-code', '75', 'F', 'echo', 'never']),
    ('-x', ['-w', '0.3', 'F', 'true']),
    ('-x', ['--timeout', '0.3', 'F', 'true']),
    ('-s', ['-s', '-n', 'F', 'echo', 'shared']),   # shared with shared: no wait
    ('-s', ['-x', '-n', 'F', 'true']),
    ('-x', ['-w', '3', 'F', 'echo', 'after']),     # waits for the holder, then runs
]

def run_case(tool, directory, holder_mode, arguments):
    """The case's status and output; a holder, when it has one, holds the file from before the
    case starts until 1.5 s later (it says so with a marker file, however slow the machine)."""
    path = os.path.join(directory, 'f')
    marker = os.path.join(os.path.dirname(directory), 'holding')
    holder = None
    if holder_mode:
        if os.path.exists(marker):
            os.unlink(marker)
        holder = subprocess.Popen(tool + [holder_mode, path, 'sh', '-c', f'touch {marker}; sleep 1.5'])
        deadline = time.monotonic() + 20
        while not os.path.exists(marker):
            assert time.monotonic() < deadline and holder.poll() is None, 'the holder never held'
            time.sleep(0.01)
    try:
        result = subprocess.run(tool + [path if a == 'F' else a for a in arguments], capture_output=True, text=True, timeout=30)
    finally:
        if holder:
            holder.wait(timeout=30)
    return result.returncode, result.stdout

with Scratch() as s:
    subprocess.run([BINARY, 'mount', s.backing, s.mountpoint], check=True)
    try:
        plain = os.path.join(s.root, 'plain')
        os.mkdir(plain)
        for directory in (plain, s.mountpoint):
            open(os.path.join(directory, 'f'), 'w').close()
        different = []
        for holder_mode, arguments in CASES:
            expected = run_case(['flock'], plain, holder_mode, arguments)
            got = run_case([BINARY, 'exec'], s.mountpoint, holder_mode, arguments)
            line = f"{holder_mode or '-'} {' '.join(arguments)}: flock {expected}, coordfs exec {got}"
            print(line)
            if expected != got:
                different.append(line)
        assert not different, 'differs from flock:\n' + '\n'.join(different)
        print(f'{len(CASES)} cases as flock')
    finally:
        unmount(s.mountpoint)
