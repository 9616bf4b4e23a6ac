"""Holds an explicit write claim on FILE (`coordfs exec --write`) until GOFILE exists (at most a
minute), and two seconds more."""
from coordtest import *

path, go = sys.argv[1], sys.argv[2]
# At most a minute: a test that failed before making GOFILE must not hang on it.
waiter = f'import os, time\nend = time.monotonic() + 60\nwhile not os.path.exists({go!r}) and time.monotonic() < end: time.sleep(0.02)\ntime.sleep(2)'
subprocess.run([os.environ['COORDFS_BINARY'], 'exec', '--write', path, '--', sys.executable, '-c', waiter], check=True)
