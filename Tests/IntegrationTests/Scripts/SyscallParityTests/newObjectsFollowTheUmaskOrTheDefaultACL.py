from coordtest import *
os.umask(0o027)
os.mkdir('plain'); os.mkdir('acl')
if subprocess.call(['setfacl', '-d', '-m', 'u::rwx,g::rwx,o::-,u:65534:rw', 'acl']) != 0: sys.exit(1)
def modes(directory):
    touch_open(directory + '/file', os.O_WRONLY | os.O_CREAT, 0o666)
    touch_open(directory + '/exclusive', os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o4777)
    touch_open(directory + '/in-place.log', os.O_WRONLY | os.O_CREAT, 0o666)
    os.mkdir(directory + '/dir', 0o777)
    os.mkfifo(directory + '/fifo', 0o666)
    names = ['file', 'exclusive', 'in-place.log', 'dir', 'fifo']
    print(directory, ' '.join('%s=%o' % (n, stat.S_IMODE(os.lstat(directory + '/' + n).st_mode)) for n in names))
modes('plain')
modes('acl')
