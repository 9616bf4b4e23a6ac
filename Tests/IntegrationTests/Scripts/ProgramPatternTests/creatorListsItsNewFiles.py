from coordtest import *
# A file's creator lists it from its creation on (before its close), as on a plain disk:
# os.listdir, scandir (with inode numbers that stat agrees with), a directory opened before
# the create and read again through a new descriptor, a child holding its descriptor; and
# shutil.rmtree with the file still open (CPython's test_tempfile cleanup).
import multiprocessing
os.mkdir('d')
f = open('d/a.txt', 'w'); f.write('x')
print('listdir while open', sorted(os.listdir('d')))
for entry in os.scandir('d'):
    print('scandir', entry.name, entry.is_file(), entry.inode() == os.stat(entry.path).st_ino)
os.mkdir('e')
before = os.open('e', os.O_RDONLY | os.O_DIRECTORY)
print('listdir e before', os.listdir('e'))
g = open('e/b.txt', 'w')
print('listdir e through a new descriptor', os.listdir('e'))
os.close(before)
print('child holding the descriptor lists', subprocess.run(['ls', 'd'], pass_fds=(f.fileno(),), capture_output=True, text=True).stdout.split())
shutil.rmtree('d', ignore_errors=True)
print('rmtree with the file open leaves', os.path.exists('d'))
f.close()
print('after close', os.path.exists('d'))
g.close()
print('listdir e after close', os.listdir('e'))
# Another process's file: once its creator closed it, a listing in a new process shows it,
# whatever was listed (and cached) while it was being written.
def creator(created, close):
    h = open('k/a.txt', 'w'); h.write('k'); created.set(); close.wait(); h.close()
os.mkdir('k')
created, close = multiprocessing.Event(), multiprocessing.Event()
p = multiprocessing.Process(target=creator, args=(created, close)); p.start()
created.wait()
os.listdir('k'); subprocess.run(['ls', 'k'], capture_output=True)
close.set(); p.join()
print('new process lists k', subprocess.run(['ls', 'k'], capture_output=True, text=True).stdout.split())
print('ls -i agrees with stat', subprocess.run(['ls', '-i', 'k'], capture_output=True, text=True).stdout.split()[0] == str(os.stat('k/a.txt').st_ino))
