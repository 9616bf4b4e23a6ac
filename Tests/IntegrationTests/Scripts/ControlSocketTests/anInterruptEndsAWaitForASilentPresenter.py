import subprocess, signal, time
from coordtest import wait_until_asked
waiter = subprocess.Popen(['python3', '-c', "import os, signal; signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT]); signal.signal(signal.SIGINT, signal.default_int_handler); print('waiting', flush=True); os.open('f', os.O_WRONLY | os.O_TRUNC)"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
waiter.stdout.readline(); wait_until_asked('/f', waiter.pid)
start = time.monotonic(); waiter.send_signal(signal.SIGINT); _, errors = waiter.communicate()
# A behaviour bound: the 30 s presenter timeout did not have to pass.
print('interrupted', b'KeyboardInterrupt' in errors, time.monotonic() - start < 5)
print('content', open('f').read().strip())
