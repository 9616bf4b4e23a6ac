from coordtest import *
# Rust's NamedTempFile::persist and many loggers: write a new file (here with O_DIRECT, as
# programs that write with io_submit do), rename it over the file it replaces while it is
# still open, close it later. On every disk the name exists the whole time; another process
# that looks in between must find a file there (on the mount, the version committed so far).
import mmap
write('data.bin', 'old contents')
others = 'import os\ntry:\n    os.stat("data.bin"); print("stat ok")\nexcept OSError as e:\n    print("stat", errno.errorcode[e.errno])\ntry:\n    fd = os.open("data.bin", os.O_RDONLY); os.read(fd, 100); os.close(fd); print("open ok")\nexcept OSError as e:\n    print("open", errno.errorcode[e.errno])\n'
def ask_another_process(label):
    # A child that holds no descriptor of the file is anyone else, as on a plain disk.
    for line in subprocess.run([sys.executable, '-c', 'import errno\n' + others], capture_output=True, text=True).stdout.split('\n'):
        if line: print(label, line)
fd = os.open('data.bin.tmp', os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o644)
block = mmap.mmap(-1, 4096)  # page-aligned, as O_DIRECT wants
block.write(b'new contents'.ljust(4096, b'.'))
os.write(fd, block)
ask_another_process('before the rename')
os.rename('data.bin.tmp', 'data.bin')
ask_another_process('renamed over, still open')
ask_another_process('renamed over, asked again')
os.close(fd)
ask_another_process('after the close')
print('after the close', content('data.bin')[:12], len(content('data.bin')))
print('names', sorted(os.listdir('.')))
print('done')
