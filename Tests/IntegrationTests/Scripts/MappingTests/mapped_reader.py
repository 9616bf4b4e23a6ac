"""What the mapping scripts share (`from mapped_reader import *`).

`start_reader(name)` starts a process that opens a file for reading and maps it shared whole
when told `map...`; for each line it prints the line, the distinct bytes its mapping shows (a
torn view shows two letters; SIGBUS ends it), or of its first page only for `...peek`, and the
mapping's length. For `...stat` it stats its handle first: the kernel keeps one size per file,
which every stat sets (mmap itself stats the file).
"""
import mmap, os, subprocess, sys
from coordtest import wait_until, wait_until_released
def start_reader(name):
    code = '\n'.join([
        'import mmap, os, sys',
        'fd = os.open(sys.argv[1], os.O_RDONLY); m = None',
        'for line in sys.stdin:',
        '    if "stat" in line: os.fstat(fd)',
        '    if line.startswith("map"): m = mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ)',
        '    data = bytes(m[:4096] if line.strip().endswith("peek") else m)',
        '    print(line.strip(), bytes(sorted(set(data))).decode(), len(m), flush=True)',
    ])
    return subprocess.Popen([sys.executable, '-c', code, name], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
def ask(reader, step):
    reader.stdin.write(step + '\n'); reader.stdin.flush()
    return reader.stdout.readline().strip() or f'{step}: the reader died ({reader.wait()})'
def save(name, data):
    # Another process saves the file; its close commits before run() returns.
    subprocess.run([sys.executable, '-c', f'f = open({name!r}, "wb"); f.write({data!r}); f.close()'], check=True)
    # Its last release (the kernel sends it after the exit) comes after the commit and the
    # invalidation of the kernel's pages that the commit queued.
    wait_until_released('/' + name)
def a_new_mapping_shows(name, answer):
    """Whether a new reader of `name` that maps it whole answers `answer` ("map LETTERS SIZE").
    A probe may die of SIGBUS (then the answer is no): only the probe goes."""
    probe = start_reader(name)
    line = ask(probe, 'map')
    probe.stdin.close(); probe.wait()
    return line == answer
def cat(name):
    return subprocess.run(['cat', name], capture_output=True).stdout
