# `coordfs status --watch -n 0.2` refreshes like watch(1): a heading and the whole status
# every interval, following what changes (a claim taken by `coordfs exec` shows, then goes),
# until stopped; with --json, one status object per line. (Stopped with SIGTERM: the test
# runner may start scripts with SIGINT ignored, and children inherit that.)
import json, os, signal, subprocess, time
from system import Scratch, BINARY, unmount, wait_until

with Scratch() as s:
    subprocess.run([BINARY, 'mount', s.backing, s.mountpoint], check=True)
    watcher = None
    try:
        watcher = subprocess.Popen([BINARY, 'status', '--watch', '-n', '0.2', s.mountpoint],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(0.7)
        holder = subprocess.Popen([BINARY, 'exec', '--write', os.path.join(s.mountpoint, 'hello'), '--', 'sleep', '1'])
        assert holder.wait(timeout=20) == 0
        time.sleep(0.7)
        watcher.send_signal(signal.SIGTERM)
        output, errors = watcher.communicate(timeout=10)
        text = output.decode()
        screens = text.split('Every 0.2s: coordfs status ')[1:]
        assert len(screens) >= 8, f'{len(screens)} refreshes in 2.4 s: {text[:500]}'
        assert '\x1b[2J' not in text, 'cleared a screen that is not a terminal'
        held = [i for i, screen in enumerate(screens) if 'claims held (1):' in screen and '/hello' in screen]
        assert held and held[0] > 0 and any('claims held: none' in screen for screen in screens[held[-1] + 1:]), \
            'the claim did not come and go: ' + ' | '.join(screen.split('claims held')[1][:30] for screen in screens)
        print(f'{len(screens)} refreshes; the claim shows in {len(held)} of them and then goes')

        watcher = subprocess.Popen([BINARY, 'status', '--watch', '--json', '-n', '0.2', s.mountpoint], stdout=subprocess.PIPE)
        time.sleep(1)
        watcher.send_signal(signal.SIGTERM)
        lines = watcher.communicate(timeout=10)[0].decode().splitlines()
        assert len(lines) >= 3 and all('events' in json.loads(line) for line in lines), lines
        print(f'{len(lines)} JSON lines')
    finally:
        if watcher and watcher.poll() is None:
            watcher.kill()
            watcher.wait()
        unmount(s.mountpoint)
