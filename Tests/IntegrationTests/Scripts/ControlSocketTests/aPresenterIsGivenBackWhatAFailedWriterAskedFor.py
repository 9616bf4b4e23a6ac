import os, errno, subprocess
holder = subprocess.Popen(['python3', '-c', "import os, sys; fd = os.open('f', os.O_WRONLY); print('held', flush=True); sys.stdin.readline()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
holder.stdout.readline()
try: os.open('f', os.O_WRONLY | os.O_NONBLOCK); print('opened')
except OSError as e: print('nonblock', errno.errorcode[e.errno])
holder.communicate(b'\n')
