"""What the integration tests' Python scripts share.

The tests run every script with this folder on PYTHONPATH and COORDFS_BINARY set to the
coordfs they mount with (Tests/IntegrationTests/Harness.swift, `scriptEnvironment`).

Waits: a script that hands off to another process (it holds a claim, it waits for one, a
presenter was asked) waits for that fact as `coordfs status --json` reports it, never for a
guessed time, so the tests hold on a loaded machine.
"""
import json, os, subprocess, time

# The mount the script runs in: its working directory when it started.
MOUNT = os.getcwd()


def wait_until(what, check, within=20, every=0.02):
    """Calls `check` until it returns something true, and returns that; fails saying `what`
    it waited for (and the last thing `check` returned) after `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f'waited {within} s for {what}; last saw: {result!r}')
        time.sleep(every)


def status():
    """The mount's status: the control protocol's status reply, as a dictionary."""
    reply = subprocess.run([os.environ['COORDFS_BINARY'], 'status', '--json', MOUNT], capture_output=True, check=True)
    return json.loads(reply.stdout)


def wait_for_status(what, fact, within=20):
    """Polls the mount's status until `fact(status)` is true; returns that status."""
    last = {}
    def check():
        nonlocal last
        last = status()
        return last if fact(last) else None
    try:
        return wait_until(what, check, within)
    except AssertionError:
        raise AssertionError(f'waited {within} s for {what}; the last status: {json.dumps(last)}') from None


def waiters(report, path):
    """Who waits for a claim on `path` (mount-relative: '/f')."""
    return [waiter for waiter in report['claims']['waiting'] if path in waiter.get('paths', [])]


def holders(report, path):
    """The claims held on `path`."""
    return [holder for holder in report['claims']['held'] if holder.get('path') == path]


def wait_until_waiting(path, pid=None, count=1):
    """Waits until `count` requests wait for a claim on `path` (one of them by `pid`, when given)."""
    def fact(report):
        found = waiters(report, path)
        return len(found) >= count and (pid is None or any(w['owner']['pid'] == pid for w in found))
    return wait_for_status(f'{count} waiting for {path}' + (f' (pid {pid} among them)' if pid else ''), fact)


def wait_until_released(path):
    """Waits until nobody holds a claim on `path`: a closed writer's last release (which the
    kernel sends after the close or exit returned) has committed and let go."""
    return wait_for_status(f'no claim held on {path}', lambda report: not holders(report, path))


def wait_until_asked(path, pid):
    """Waits until a presenter request about `path` from `pid` is pending."""
    return wait_for_status(f'a presenter asked about {path} for pid {pid}',
                           lambda report: any(r.get('path') == path and r['requester'] == pid for r in report['presenterRequests']))


if __name__ == '__main__':
    # For shell scripts: `python3 -m coordtest waiting PATH [COUNT]`.
    import sys
    if sys.argv[1:2] == ['waiting']:
        wait_until_waiting(sys.argv[2], count=int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    else:
        sys.exit('usage: coordtest waiting PATH [COUNT]')
