import os, errno, subprocess
from coordtest import wait_until_released
with open('f', 'w') as f: f.write('x')
reader = subprocess.Popen(['python3', '-c', "import sys; f=open('f'); print('reading', flush=True); sys.stdin.readline()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
reader.stdout.readline()
try: os.open('f', os.O_WRONLY | os.O_NONBLOCK); print('writer opened')
except OSError as e: print('writer', errno.errorcode[e.errno])
print('second reader', open('f').read())
reader.communicate(b'\n'); wait_until_released('/f')
os.close(os.open('f', os.O_WRONLY)); print('writer after reader')
