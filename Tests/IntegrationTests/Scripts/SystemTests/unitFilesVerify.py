# The units in Packaging/systemd pass `systemd-analyze verify` with nothing to say: the
# template as an instance for /srv/data, and the .mount example under its own name.
import os, shutil, subprocess, tempfile
from system import Placed

units = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', '..', 'Packaging', 'systemd')
work = tempfile.mkdtemp(prefix='coordfs-units-')
try:
    for name in os.listdir(units):
        shutil.copy(os.path.join(units, name), work)
    checked = 0
    with Placed('/usr/local/bin/coordfs'):
        for unit in ['coordfs@srv-data.service', 'srv-data.mount']:
            result = subprocess.run(['systemd-analyze', 'verify', os.path.join(work, unit)], capture_output=True, text=True)
            said = (result.stdout + result.stderr).strip()
            assert result.returncode == 0 and not said, f'{unit}: {result.returncode}: {said}'
            checked += 1
    print(f'verified {checked} units')
finally:
    shutil.rmtree(work)
