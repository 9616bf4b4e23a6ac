"""The `rewrite` workload of Scripts/bench: 4 KiB rewrites in the middle of a big file (open
without O_TRUNC, pwrite 4 KiB at the middle, close), the edit a program makes to one record of a
big file. coordfs stages each such open as an atomic save: a reflink of the file where the
backing has them (XFS, btrfs), a whole copy where it has not (ext4), unless the file is above
the in-place threshold there. The figure is what a save costs the machine, writeback included:
the timed loop ends with a syncfs of the scratch filesystem, so a copy's data written to disk
counts.

The same rows on an XFS image with reflinks when the bench can make one (root, mkfs.xfs, loop
devices): `XFSScratch` makes it once for the whole bench, and every target is mounted over a
fresh directory on it for this workload alone.

`rewrite_workload(path, config)` runs it and returns `{key: rewrites/s}`.
"""
import ctypes
import os
import shutil
import subprocess
import time

from benchlib.common import BenchError, log, rate, run_command

REWRITE_SECONDS = 2.0    # the timed loop runs this long, and at least
REWRITE_MIN = 3          # this many rewrites
REWRITE_BYTES = 4096
LIBC = ctypes.CDLL(None, use_errno=True)


def syncfs(path):
    """Writes back the filesystem of path, only it (a machine-wide sync waits for others' writes)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if LIBC.syncfs(fd) != 0:
            error = ctypes.get_errno()
            raise OSError(error, os.strerror(error))
    finally:
        os.close(fd)


def rewrite_workload(path, config, key="rewrite"):
    """Writes a config.rewrite_mib file (untimed, then written back), then times 4 KiB rewrites
    in its middle, each its own open and close, for REWRITE_SECONDS or more, and a syncfs of
    the target's backing directory (config.backing) at the end. Checks the file afterwards."""
    size = config.rewrite_mib * 1024 * 1024
    middle = size // 2
    name = os.path.join(path, "rewrite.bin")
    block = os.urandom(1024 * 1024)
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        for offset in range(0, size, len(block)):
            os.pwrite(fd, block, offset)
    finally:
        os.close(fd)
    syncfs(config.backing)
    count = 0
    start = time.perf_counter()
    while True:
        data = (b"%08d" % count) * (REWRITE_BYTES // 8)
        fd = os.open(name, os.O_WRONLY | os.O_CLOEXEC)
        try:
            if os.pwrite(fd, data, middle) != REWRITE_BYTES:
                raise BenchError(f"rewrite: short write to {name}")
        finally:
            os.close(fd)
        count += 1
        elapsed = time.perf_counter() - start
        if count >= REWRITE_MIN and elapsed >= REWRITE_SECONDS:
            break
    syncfs(config.backing)
    seconds = time.perf_counter() - start
    with open(name, "rb") as check:
        check.seek(middle - REWRITE_BYTES)
        around = check.read(3 * REWRITE_BYTES)
        if around != block[-REWRITE_BYTES:] + data + block[REWRITE_BYTES:2 * REWRITE_BYTES] \
                or os.fstat(check.fileno()).st_size != size:
            raise BenchError("rewrite: the file does not hold its last rewrite (or its size changed)")
    os.unlink(name)
    return {key: rate(count, seconds)}, {key + "_count": count}, {}


class XFSScratch:
    """An XFS filesystem with reflinks on a loop device over a sparse image in work_dir, mounted
    at work_dir/xfs; `make` returns None (and says why) where it cannot be made."""

    def __init__(self, work_dir, size_gib):
        self.work_dir = work_dir
        self.image = os.path.join(work_dir, "xfs.img")
        self.mountpoint = os.path.join(work_dir, "xfs")
        self.size_gib = size_gib
        self.device = None
        self.mounted = False

    def make(self):
        if os.geteuid() != 0 or not shutil.which("mkfs.xfs") or not os.path.exists("/dev/loop-control"):
            log("rewrite: no XFS rows (they need root, mkfs.xfs from xfsprogs and /dev/loop-control)")
            return None
        try:
            with open(self.image, "wb") as image:
                image.truncate(self.size_gib << 30)
            run_command(["mkfs.xfs", "-q", "-m", "reflink=1", self.image], "mkfs.xfs")
            self.device = run_command(["losetup", "--find", "--show", self.image], "losetup").stdout.strip()
            os.mkdir(self.mountpoint)
            run_command(["mount", "-t", "xfs", self.device, self.mountpoint], "mounting the XFS image")
            self.mounted = True
        except (BenchError, OSError) as error:
            log(f"rewrite: no XFS rows: {error}")
            self.remove()
            return None
        return self.mountpoint

    def remove(self):
        """Unmounts (lazily if it must), detaches the loop device, deletes the image."""
        if self.mounted:
            if subprocess.run(["umount", self.mountpoint], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", self.mountpoint], capture_output=True)
            self.mounted = False
        if self.device:
            subprocess.run(["losetup", "-d", self.device], capture_output=True)
            self.device = None
        if os.path.exists(self.image):
            os.unlink(self.image)
