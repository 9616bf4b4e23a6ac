# A service manager's view (systemd's Type=notify, played by a datagram socket here): the
# foreground daemon sends READY=1 only once the mount answers, STATUS= lines that follow the
# claims held, and STOPPING=1 when it is unmounted; then it exits 0.
import json, os, socket, subprocess, sys
from system import Scratch, BINARY, mounted

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

def messages(sock):
    while True:
        yield dict(line.split('=', 1) for line in sock.recv(4096).decode().split('\n') if '=' in line)

with Scratch() as s:
    address = os.path.join(s.root, 'notify.sock')
    manager = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    manager.bind(address)
    manager.settimeout(20)
    received = messages(manager)
    daemon = subprocess.Popen([BINARY, 'mount', s.backing, s.mountpoint, '--foreground'],
                              env=dict(os.environ, NOTIFY_SOCKET=address), stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        first = next(received)
        # Whatever the daemon does next, at this moment the mount must already answer.
        answered = mounted(s.mountpoint) and open(os.path.join(s.mountpoint, 'hello'), 'rb').read() == b'hi\n'
        assert first.get('READY') == '1', first
        assert answered, 'READY=1 came before the mount answered'
        assert first.get('MAINPID') == str(daemon.pid), first
        assert '0 claims held' in first.get('STATUS', ''), first
        print('ready:', first['STATUS'])

        # An explicit claim shows in the next status line.
        location = json.loads(os.getxattr(s.mountpoint, 'user.coordfs.control'))
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect(location['socket'])
        client.sendall(b'{"id":1,"op":"hello","version":1,"client":"test"}\n'
                       b'{"id":2,"op":"claim","write":["' + location['path'].rstrip('/').encode() + b'/hello"],"wait":5}\n')
        replies = b''
        while replies.count(b'\n') < 2:
            replies += client.recv(4096)
        assert b'"claim"' in replies, replies
        status = next(received)
        while '1 claims held' not in status.get('STATUS', ''):
            status = next(received)
        print('while a claim is held:', status['STATUS'])
        client.close()

        subprocess.run(['fusermount3', '-u', s.mountpoint], check=True)
        last = next(received)
        while last.get('STOPPING') != '1':
            last = next(received)
        print('stopping:', last)
        assert daemon.wait(timeout=15) == 0, daemon.stderr.read()
        print('daemon exited 0')
    finally:
        if daemon.poll() is None:
            daemon.terminate()
            daemon.wait()
