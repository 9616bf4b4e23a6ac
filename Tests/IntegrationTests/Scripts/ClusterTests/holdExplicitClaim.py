"""Holds an explicit write claim on FILE (`coordfs exec --write`) until GOFILE exists, and
two seconds more."""
from coordtest import *

path, go = sys.argv[1], sys.argv[2]
waiter = f'import os, time\nwhile not os.path.exists({go!r}): time.sleep(0.02)\ntime.sleep(2)'
subprocess.run([os.environ['COORDFS_BINARY'], 'exec', '--write', path, '--', sys.executable, '-c', waiter], check=True)
