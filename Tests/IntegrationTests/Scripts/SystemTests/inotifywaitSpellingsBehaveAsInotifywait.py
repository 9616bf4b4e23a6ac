# `coordfs watch` with inotifywait(1)'s spellings prints what inotifywait prints, case by
# case: inotifywait -m on a plain directory and coordfs watch on the mount, each started in
# its directory with the same arguments, then the same changes made in both, and their
# outputs compared line for line. Each case asks for events that a change reports once to
# both (inotify reports a write as MODIFY, CLOSE_WRITE... where coordfs has one commit).
import os, signal, subprocess, time
from system import Scratch, BINARY, unmount

def prepare(d):
    os.makedirs(os.path.join(d, 'sub'))
    for name in ('old', 'keep.txt', 'skip.tmp', 'sub/inner'):
        with open(os.path.join(d, name), 'w') as f:
            f.write('before\n')

def change(d):
    def write(name, text):
        with open(os.path.join(d, name), 'w') as f:
            f.write(text)
    write('new', 'made\n')                      # CREATE
    write('keep.txt', 'after\n')                # CLOSE_WRITE / MODIFY
    write('skip.tmp', 'after\n')
    write('sub/inner', 'after\n')
    os.mkdir(os.path.join(d, 'dir'))            # CREATE,ISDIR
    os.rename(os.path.join(d, 'old'), os.path.join(d, 'renamed'))   # MOVED_FROM, MOVED_TO
    os.chmod(os.path.join(d, 'keep.txt'), 0o600)                   # ATTRIB
    os.unlink(os.path.join(d, 'new'))           # DELETE

CASES = [
    ['-e', 'create', '--format', '%w|%f|%e'],
    ['-e', 'delete', '--format', '%w%f %e'],
    ['-e', 'close_write', '--format', '%w%f %e'],
    ['-e', 'modify', '--format', '%f:%e'],
    ['-e', 'moved_from,moved_to', '--format', '%e %w%f'],
    ['-e', 'moved_to', '--format', '%e %w%f'],
    ['-e', 'attrib', '--format', '%e %f'],
    ['-e', 'create', '-e', 'delete', '--format', '%T %e %f', '--timefmt', '%Y'],
    ['-r', '-e', 'close_write', '--format', '%w%f', '--exclude', r'\.tmp$'],
    ['-r', '-e', 'close_write', '--format', '%w%f', '--include', 'inner|keep'],
    ['-r', '-e', 'close_write', '--format', '%w%f', '--excludei', r'\.TMP$'],
]

def collapsed(lines):
    """Lines with runs of one line made one: inotify merges an event with the same one queued
    right before it only while nobody has read that one yet, so whether a truncating open
    and its write show as one MODIFY or two depends on when inotifywait reads."""
    return [line for index, line in enumerate(lines) if index == 0 or lines[index - 1] != line]

def run(tool, directory, arguments):
    """Starts the watcher, makes the changes, stops it (SIGTERM: the test runner may start us
    with SIGINT ignored, which children inherit) and returns its lines; never leaves it running."""
    watcher = subprocess.Popen(tool + arguments + ['.'], cwd=directory, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        time.sleep(1)  # inotifywait sets its watches, coordfs subscribes
        change(directory)
        time.sleep(1)
        watcher.send_signal(signal.SIGTERM)
        output, errors = watcher.communicate(timeout=10)
        return output.decode().splitlines(), errors.decode()
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()

with Scratch() as s:
    plain = os.path.join(s.root, 'plain')
    subprocess.run([BINARY, 'mount', s.backing, s.mountpoint], check=True)
    try:
        different = []
        for number, arguments in enumerate(CASES):
            for d in (plain, s.mountpoint):
                subprocess.run(['rm', '-rf', d + '/' + str(number)])
                os.makedirs(os.path.join(d, str(number)))
                prepare(os.path.join(d, str(number)))
            expected, _ = run(['inotifywait', '-m', '-q'], os.path.join(plain, str(number)), arguments)
            got, said = run([BINARY, 'watch', '-m', '-q'], os.path.join(s.mountpoint, str(number)), arguments)
            print(' '.join(arguments), '->', expected)
            if collapsed(got) != collapsed(expected):
                different.append(f"{' '.join(arguments)}: inotifywait {expected}, coordfs watch {got} {said}")
        assert not different, 'differs from inotifywait:\n' + '\n'.join(different)
        print(f'{len(CASES)} cases as inotifywait')
        result = subprocess.run([BINARY, 'watch', '-e', 'access', '.'], cwd=s.mountpoint, capture_output=True, text=True)
        assert result.returncode != 0 and 'not reads or opens' in result.stderr, result
        result = subprocess.run([BINARY, 'watch', '--exclude', '(', '.'], cwd=s.mountpoint, capture_output=True, text=True)
        assert result.returncode != 0 and 'regular expression' in result.stderr, result
        print('access and a bad regex refused')
    finally:
        unmount(s.mountpoint)
