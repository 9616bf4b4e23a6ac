from coordtest import *
# An open file belongs to every process that holds its descriptor: a child given one
# (pass_fds, CPython's test_subprocess) fstats and reads what the parent wrote through it,
# for a new file, an existing one being rewritten, and a TemporaryFile.
import tempfile
child = 'import os, sys\nfd = int(sys.argv[1])\ntry:\n    print(os.fstat(fd).st_size, os.pread(fd, 10, 0))\nexcept OSError as e:\n    print(e.strerror)\n'
def ask_child(fd):
    return subprocess.run([sys.executable, '-c', child, str(fd)], pass_fds=(fd,), capture_output=True, text=True).stdout.strip()
fd = os.open('new', os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644); os.write(fd, b'abc')
print('new file', ask_child(fd))
write('existing', '')
fd2 = os.open('existing', os.O_RDWR); os.write(fd2, b'abc')
print('existing file', ask_child(fd2))
with tempfile.TemporaryFile(dir='.') as t:
    t.write(b'temp'); t.flush()
    print('temporary file', ask_child(t.fileno()))
print('child holding it opens the new file by name', subprocess.run(['cat', 'new'], pass_fds=(fd,), capture_output=True, text=True).stdout)
os.close(fd); os.close(fd2)
print('after close', content('new'), content('existing'))
