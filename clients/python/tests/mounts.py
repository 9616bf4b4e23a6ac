"""What the Python client's tests share: a real mount per test case, child programs, and
waits for facts rather than for time (Docs/TESTING.md, "Scripts and waits").

Each `MountTestCase` mounts a fresh scratch folder (`backing/` at `mnt/`) with
`coordfs mount --foreground` as a child of the test, as Tests/IntegrationTests/Harness.swift
does, and unmounts it in a cleanup that runs however the test ends: `coordfs unmount`, then
`fusermount3 -u`, then `umount -l`, so no mount survives a failure. The program is
$COORDFS_BINARY (the launcher, `coordfs`), else `coordfs` on the PATH.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from collections.abc import Sequence
from typing import Callable, ClassVar, TypeVar

import coordfs

T = TypeVar("T")

#: The child programs the tests run (a holder of claims, a presenter).
PROGRAMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs")


def coordfs_binary() -> str:
    binary = os.environ.get("COORDFS_BINARY") or shutil.which("coordfs")
    if not binary:
        raise RuntimeError("no coordfs to mount with: set COORDFS_BINARY to the launcher, or put coordfs on the PATH")
    return binary


def is_mounted(path: str) -> bool:
    with open("/proc/self/mountinfo", "rb") as mountinfo:
        return any(line.split(b" ")[4] == os.fsencode(path) for line in mountinfo)


def wait_for(what: str, check: Callable[[], T | None], within: float = 20) -> T:
    """Calls `check` until it returns something true, and returns that; fails naming `what`
    after `within` seconds (generous: a loaded machine is slow, not wrong)."""
    deadline = time.monotonic() + within
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {within} s for {what}; last saw {result!r}")
        time.sleep(0.02)


class Mount:
    """A scratch folder with a backing directory mounted by a foreground daemon."""

    def __init__(self) -> None:
        # Scripts/test names its run, so that its check for mounts left behind sees only its own.
        run = os.environ.get("COORDFS_TEST_RUN")
        self.root = tempfile.mkdtemp(prefix=f"coordfs-test-{run}-py-" if run else "coordfs-test-py-")
        os.chmod(self.root, 0o755)
        self.backing = os.path.join(self.root, "backing")
        self.mountpoint = os.path.join(self.root, "mnt")
        os.mkdir(self.backing)
        os.mkdir(self.mountpoint)
        self.log = os.path.join(self.root, "daemon.log")
        self.daemon: subprocess.Popen[bytes] | None = None

    def start(self, options: Sequence[str] = ()) -> None:
        """Mounts, then waits until the kernel lists the mount and its control socket answers."""
        with open(self.log, "wb") as log:
            self.daemon = subprocess.Popen(
                [coordfs_binary(), "mount", self.backing, self.mountpoint, "--foreground", *options],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + 15
        while not is_mounted(self.mountpoint):
            if self.daemon.poll() is not None:
                raise RuntimeError(f"coordfs exited with {self.daemon.returncode} before mounting: {self.daemon_log()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the mount did not appear within 15 s: {self.daemon_log()}")
            time.sleep(0.01)

        def answers() -> bool:
            try:
                coordfs.connect(self.mountpoint, client="mount check").close()
            except coordfs.CoordFSError:
                return False
            return True

        wait_for("the control socket to answer", answers, within=15)

    def daemon_log(self) -> str:
        with open(self.log, "rb") as log:
            return log.read().decode("utf-8", "replace")

    def unmount(self) -> list[str]:
        """Unmounts with `coordfs unmount` and waits for the daemon to exit; falls back to
        fusermount3 and a lazy umount so nothing stays mounted. Returns what went wrong."""
        problems: list[str] = []
        daemon, self.daemon = self.daemon, None
        if daemon is None:
            return problems
        if daemon.poll() is None:
            result = subprocess.run([coordfs_binary(), "unmount", self.mountpoint], capture_output=True, check=False)
            if result.returncode != 0:
                errors = result.stderr.decode(errors="replace")
                problems.append(f"coordfs unmount exited with {result.returncode}: {errors}")
        try:
            daemon.wait(15)
        except subprocess.TimeoutExpired:
            problems.append("the daemon did not exit after unmount")
            daemon.kill()
            daemon.wait()
        if daemon.returncode != 0:
            problems.append(f"the daemon exited with {daemon.returncode}: {self.daemon_log()[-3000:]}")
        if is_mounted(self.mountpoint):
            problems.append("the mount was left behind")
            subprocess.run(["fusermount3", "-u", self.mountpoint], capture_output=True, check=False)
            if is_mounted(self.mountpoint):
                subprocess.run(["umount", "-l", self.mountpoint], capture_output=True, check=False)
        return problems

    def remove(self) -> None:
        if not is_mounted(self.mountpoint):
            shutil.rmtree(self.root, ignore_errors=True)


class Child:
    """A program the test runs beside itself (not a child of the mount's clients), its
    standard output collected in a file; stopped with SIGKILL at the latest in cleanup."""

    def __init__(self, arguments: Sequence[str], output: str, cwd: str | None = None) -> None:
        self.output_path = output
        with open(output, "wb") as sink:
            self.process = subprocess.Popen(list(arguments), stdin=subprocess.PIPE, stdout=sink,
                                            stderr=subprocess.STDOUT, cwd=cwd)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def output(self) -> str:
        with open(self.output_path, "rb") as output:
            return output.read().decode("utf-8", "replace")

    @property
    def lines(self) -> list[str]:
        return self.output.splitlines()

    def tell(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode() + b"\n")
        self.process.stdin.flush()

    def wait_for_line(self, text: str, within: float = 20) -> str:
        """Waits until the program printed a line beginning with `text`, and returns it."""

        def check() -> str | None:
            found = [line for line in self.lines if line.startswith(text)]
            if found:
                return found[0]
            if self.process.poll() is not None:
                raise AssertionError(f"the program exited with {self.process.returncode}: {self.output}")
            return None

        return wait_for(f"{text!r} from the program; it printed {self.output!r}", check, within)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        if self.process.stdin is not None:
            self.process.stdin.close()


class MountTestCase(unittest.TestCase):
    """A test case on a fresh mount of its own (`self.mount.mountpoint`, also `self.mnt`),
    made with `mount_options`, unmounted however the test ends."""

    mount_options: ClassVar[Sequence[str]] = ()

    def setUp(self) -> None:
        self.mount = Mount()
        self.addCleanup(self.mount.remove)
        self.addCleanup(self._unmount)
        self.mount.start(self.mount_options)
        self.mnt = self.mount.mountpoint

    def _unmount(self) -> None:
        problems = self.mount.unmount()
        if problems:
            raise AssertionError("; ".join(problems))

    def path(self, *names: str) -> str:
        return os.path.join(self.mnt, *names)

    def connect(self, client: str = "python tests") -> coordfs.Connection:
        """A connection found from the mountpoint, closed when the test ends."""
        connection = coordfs.connect(self.mnt, client=client)
        self.addCleanup(connection.close)
        return connection

    def child(self, program: str, *arguments: str, cwd: str | None = None) -> Child:
        """Runs `programs/PROGRAM.py ARGUMENTS…` with this Python (so it imports the same
        coordfs); killed when the test ends, before the unmount."""
        name = f"{program}-{len(os.listdir(self.mount.root))}.out"
        child = Child([sys.executable, os.path.join(PROGRAMS, program + ".py"), *arguments],
                      os.path.join(self.mount.root, name), cwd)
        self.addCleanup(child.kill)
        return child

    def shell(self, script: str, *, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Runs a shell script in the mount."""
        result = subprocess.run(["/bin/sh", "-c", script], cwd=self.mnt, capture_output=True, text=True, check=False,
                                env={**os.environ, "LC_ALL": "C"})
        if check and result.returncode != 0:
            raise AssertionError(f"the script failed with {result.returncode}: {result.stdout}{result.stderr}")
        return result

    def wait_for_status(self, connection: coordfs.Connection, what: str,
                        fact: Callable[[coordfs.Status], bool], within: float = 20) -> coordfs.Status:
        """Polls the mount's status until `fact` holds (a hand-off to another process)."""
        last: list[coordfs.Status] = []

        def check() -> coordfs.Status | None:
            status = connection.status()
            last[:] = [status]
            return status if fact(status) else None

        try:
            return wait_for(what, check, within)
        except AssertionError:
            raise AssertionError(f"waited {within} s for {what}; the last status: {last[0].raw if last else None}") \
                from None
