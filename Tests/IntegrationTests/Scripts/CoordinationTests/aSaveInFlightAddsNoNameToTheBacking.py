import os, sys
saving = os.open('d/existing', os.O_WRONLY | os.O_TRUNC)
os.write(saving, b'uncommitted')
creating = os.open('d/new', os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.write(creating, b'not there yet')
print('in flight', flush=True)
sys.stdin.readline()
os.close(saving); os.close(creating)
print('closed')
