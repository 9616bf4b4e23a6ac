# mount(8) with type fuse.coordfs (libfuse's mount.fuse3 runs `coordfs SOURCE DIR -o OPTIONS`)
# and a temporary fstab, then type coordfs through a mount.coordfs link: each mounts for real,
# with its options applied, and umount(8) unmounts it and ends the daemon. Unknown options fail
# with one line and mount nothing.
import os, subprocess
from system import Scratch, Placed, mounted, daemons, wait_until

def mount(*arguments):
    return subprocess.run(['mount'] + list(arguments), capture_output=True, text=True)

def check_mounted(scratch, expected_options):
    assert mounted(scratch.mountpoint), 'not mounted'
    assert open(os.path.join(scratch.mountpoint, 'hello'), 'rb').read() == b'hi\n'
    lines = daemons(scratch.mountpoint)
    assert len(lines) == 1, lines
    for option in expected_options:
        assert option in lines[0], f'{option} not in the daemon\'s line {lines[0]}'
    print('mounted:', ' '.join(lines[0][lines[0].index('mount') + 3:]))

def check_unmounts(scratch):
    result = subprocess.run(['umount', scratch.mountpoint], capture_output=True, text=True)
    assert result.returncode == 0, result
    wait_until('the daemon to end', lambda: not daemons(scratch.mountpoint), within=10)
    assert not mounted(scratch.mountpoint)
    print('unmounted by umount(8)')

def check_refused(scratch, result, words):
    assert result.returncode != 0, result
    said = result.stderr.strip()
    assert said.count('\n') == 0 and words in said, repr(said)
    assert not mounted(scratch.mountpoint) and not daemons(scratch.mountpoint)
    print('refused:', said)

with Placed('/usr/local/bin/coordfs'):
    with Scratch() as s:
        result = mount('-t', 'fuse.coordfs', s.backing, s.mountpoint,
                       '-o', 'allow_other,claim_timeout=10,in_place=*.db,nofail,_netdev,defaults,x-systemd.automount')
        assert result.returncode == 0, result
        check_mounted(s, ['--allow-other', '--claim-timeout', '10', '--in-place', '*.db'])
        check_unmounts(s)

        check_refused(s, mount('-t', 'fuse.coordfs', s.backing, s.mountpoint, '-o', 'allow_other,bogus_option=3'), 'bogus_option')
        # Read-only, and back: the kernel refuses changes with EROFS; reads, claims for reading
        # and status are served; remount,ro waits for no writer (EBUSY while one is open).
        result = mount('-t', 'fuse.coordfs', s.backing, s.mountpoint, '-o', 'ro')
        assert result.returncode == 0, result
        check_mounted(s, ['--read-only'])
        hello = os.path.join(s.mountpoint, 'hello')
        written = os.path.join(s.mountpoint, 'written')
        def write_error():
            try:
                with open(written, 'a') as f: f.write('more\n')
                return 'written'
            except OSError as e:
                return os.strerror(e.errno)
        print('read-only:', write_error(), ','.join(sorted(subprocess.run(['findmnt', '-no', 'OPTIONS', s.mountpoint], capture_output=True, text=True).stdout.strip().split(',')[:1])))
        claimed = subprocess.run(['/usr/local/bin/coordfs', 'exec', '--read', hello, '--', 'cat', hello], capture_output=True, text=True)
        assert claimed.returncode == 0 and claimed.stdout == 'hi\n', claimed
        result = mount('-o', 'remount,rw', s.mountpoint)
        assert result.returncode == 0, result
        print('remounted read-write:', write_error())
        writer = open(written, 'a')
        busy = mount('-o', 'remount,ro', s.mountpoint)
        print('remount,ro with a writer open fails', busy.returncode != 0, busy.stderr.strip().count('\n') == 0)
        writer.close()
        result = mount('-o', 'remount,ro', s.mountpoint)
        assert result.returncode == 0, result
        print('remounted read-only:', write_error(), open(written).read().count('more'))
        check_unmounts(s)
        check_refused(s, mount('-t', 'fuse.coordfs', s.backing, s.mountpoint, '-o', 'durability=sometimes'), 'durability')

        fstab = os.path.join(s.root, 'fstab')
        with open(fstab, 'w') as f:
            f.write(f'# a test fstab\n{s.backing} {s.mountpoint} fuse.coordfs '
                    'allow_other,nofail,_netdev,noauto,x-systemd.requires=network-online.target,presenter_timeout=2,no_watch_backing 0 0\n')
        result = mount('--fstab', fstab, s.mountpoint)
        assert result.returncode == 0, result
        check_mounted(s, ['--allow-other', '--presenter-timeout', '2', '--no-watch-backing'])
        check_unmounts(s)

    with Scratch() as s, Placed('/usr/sbin/mount.coordfs'):
        result = mount('-t', 'coordfs', s.backing, s.mountpoint, '-o', 'claim_timeout=7,nofail')
        assert result.returncode == 0, result
        check_mounted(s, ['--claim-timeout', '7'])
        check_unmounts(s)
        check_refused(s, mount('-t', 'coordfs', s.backing, s.mountpoint, '-o', 'claim_timeout=7,weird'), 'weird')
        # Sloppy (-s): mount(8) asks the helper to skip what it does not know.
        result = mount('-s', '-t', 'coordfs', s.backing, s.mountpoint, '-o', 'claim_timeout=7,weird')
        assert result.returncode == 0, result
        check_mounted(s, ['--claim-timeout', '7'])
        check_unmounts(s)
