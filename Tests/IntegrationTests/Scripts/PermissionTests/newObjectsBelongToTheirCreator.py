from coordtest import *
from owners import who
write('shared/file', 'mine', 0o640)
os.mkdir('shared/dir', 0o750)
os.symlink('file', 'shared/link')
os.mkfifo('shared/fifo', 0o600)
import socket; sock = socket.socket(socket.AF_UNIX); sock.bind('shared/sock'); sock.close()
fd = os.open('shared/excl', os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o4777); os.close(fd) # umask 022 applies
os.mkdir('shared/dir/nested')
write('shared/dir/nested/deep', 'deep')
print(who('shared/file', 'shared/dir', 'shared/link', 'shared/fifo', 'shared/sock', 'shared/excl', 'shared/dir/nested', 'shared/dir/nested/deep'))
os.link('shared/file', 'shared/hard'); print(who('shared/hard'), links('shared/file'))
# in a setgid directory: the directory's group, and subdirectories stay setgid
write('g/file', 'x')
os.mkdir('g/sub'); os.mkdir('g/sub/deeper'); os.symlink('file', 'g/link'); os.mkfifo('g/fifo')
write('g/sub/deeper/file', 'y')
print(who('g/file', 'g/sub', 'g/sub/deeper', 'g/link', 'g/fifo', 'g/sub/deeper/file', 'g/rootmade', 'g/rootdir'))
# a setgid bit nobody may not hold (group 100 is not its group) is dropped
fd = os.open('g/sgid-file', os.O_CREAT | os.O_WRONLY, 0o2755); os.close(fd)
t('chmod g+s on a file of group 100', os.chmod, 'g/file', 0o2755)
t('chmod g+s in own group', os.chmod, 'shared/file', 0o2750)
print(who('g/sgid-file', 'g/file', 'shared/file'))
t('chgrp to own group', os.chown, 'g/file', -1, 65534)
print(who('g/file'))
