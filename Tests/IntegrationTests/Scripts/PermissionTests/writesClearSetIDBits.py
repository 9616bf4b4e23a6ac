from coordtest import *
from owners import who
def append(path):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND); os.write(fd, b'more'); os.close(fd)
for name in ('setuid', 'setgid', 'setuid-noexec'):
    append('pub/' + name)
print(who('pub/setuid', 'pub/setgid', 'pub/setuid-noexec'))
touch_open('pub/setuid-trunc', os.O_WRONLY | os.O_TRUNC)
os.truncate('pub/setuid-truncate', 1)
# a query for the mode alone must not be answered from stale cached attributes
print(subprocess.run(['stat', '-c', '%a %n', 'pub/setuid-trunc', 'pub/setuid-truncate'], capture_output=True, text=True).stdout.strip())
print(who('pub/setuid-trunc', 'pub/setuid-truncate'))
t('write a 4755 root file', append, 'pub/root-only')
print(who('pub/root-only'), content('pub/setuid'))
