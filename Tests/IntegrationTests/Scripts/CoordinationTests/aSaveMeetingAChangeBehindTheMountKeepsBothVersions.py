import os, sys
# The mount's writer: a save in flight while the test changes the file in the backing.
saving = os.open('notes.txt', os.O_WRONLY | os.O_TRUNC)
os.write(saving, b'mount writer \xff\x00\n')
print('in flight', flush=True)
sys.stdin.readline()
os.close(saving)
print('closed')
