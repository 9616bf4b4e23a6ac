"""The `staleness` workload of Scripts/bench: how long a change made directly in the backing
directory stays invisible through the mount, with the kernel's caches warm. A coordfs mount
that watches its backing drops the cached entry, attributes and pages of what changed; one
that does not (--no-watch-backing) keeps serving them for the cache timeouts (a day), and its
rows fail. On bare the "mount" is the backing itself: the figure is what one poll costs.

`staleness_workload(path, config)` runs it and returns its metrics (`STALE_KEYS`).
"""
import os
import time

from benchlib.common import BenchError
from benchlib.events import percentile

STALE_KEYS = ["stale_write_p50", "stale_write_p99", "stale_create_p50", "stale_create_p99"]
STALE_WARMUP = 10        # changes before the measured ones, not counted
STALE_TIMEOUT = 2.0      # seconds a change may stay invisible before the figure fails


def version(number):
    """The file's contents after the number-th write: 64 bytes, the same size every time, so
    only the contents (not the size) tell the versions apart."""
    return b"%063d\n" % number


def read_whole(path):
    """The file's bytes; None while it is missing."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        return os.read(fd, 4096)
    finally:
        os.close(fd)


def exists(path):
    try:
        os.stat(path)
        return True
    except FileNotFoundError:
        return False


def wait_until_seen(seen, start):
    """Polls seen() in a tight loop; the seconds from start until it held, or None."""
    while True:
        if seen():
            return time.perf_counter() - start
        if time.perf_counter() - start > STALE_TIMEOUT:
            return None


def in_place_writes(inside, behind, samples):
    """Rewrites the backing file in place (open, pwrite at 0, close) and polls open+read of it
    through the mount until the new bytes show; from close() returning. Before each write the
    reader has read the current version three times (its pages, attributes and entry cached)."""
    with open(behind, "wb") as initial:
        initial.write(version(0))
    if wait_until_seen(lambda: read_whole(inside) == version(0), time.perf_counter()) is None:
        raise BenchError("staleness: the file made in the backing never showed through the mount")
    times = []
    for number in range(1, STALE_WARMUP + samples + 1):
        for _ in range(3):
            if read_whole(inside) != version(number - 1):
                raise BenchError("staleness: the mount showed other bytes than the last version")
            os.stat(inside)
        data = version(number)
        fd = os.open(behind, os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.pwrite(fd, data, 0)
        finally:
            os.close(fd)
        elapsed = wait_until_seen(lambda: read_whole(inside) == data, time.perf_counter())
        if elapsed is None:
            return times, f"an in-place write in the backing stayed invisible for {STALE_TIMEOUT:g} s"
        if number > STALE_WARMUP:
            times.append(elapsed)
    return times, None


def creates(inside, behind, samples):
    """Creates a new file in the backing (open O_CREAT|O_EXCL, write, close) and polls stat of
    its name through the mount until it exists; from close() returning. Before each create the
    reader has looked the name up twice (missing), and stated the directory."""
    times = []
    for number in range(STALE_WARMUP + samples):
        name = f"c{number:06d}"
        for _ in range(2):
            if exists(os.path.join(inside, name)):
                raise BenchError(f"staleness: {name} exists through the mount before it was made")
            os.stat(inside)
        fd = os.open(os.path.join(behind, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, b"new\n")
        finally:
            os.close(fd)
        elapsed = wait_until_seen(lambda: exists(os.path.join(inside, name)), time.perf_counter())
        if elapsed is None:
            return times, f"a file created in the backing stayed invisible for {STALE_TIMEOUT:g} s"
        if number >= STALE_WARMUP:
            times.append(elapsed)
    return times, None


def staleness_workload(path, config):
    """bare and coordfs targets (the peers have no watch): p50/p99 in ms of an in-place write
    and of a create in the backing until a reader through the mount sees it."""
    backing = config.target_backing
    if backing is None:
        return {}, {}, {}
    inside, behind = os.path.join(path, "stale"), os.path.join(backing, "stale")
    os.mkdir(inside)
    metrics, errors = {}, {}
    for label, measure, target in (("write", in_place_writes, "f"), ("create", creates, None)):
        times, error = measure(os.path.join(inside, target) if target else inside,
                               os.path.join(behind, target) if target else behind, config.stale_samples)
        if error:
            errors[f"stale_{label}_p50"] = errors[f"stale_{label}_p99"] = error
            continue
        times.sort()
        metrics[f"stale_{label}_p50"] = percentile(times, 0.50) * 1000
        metrics[f"stale_{label}_p99"] = percentile(times, 0.99) * 1000
    for name in os.listdir(behind):
        os.unlink(os.path.join(behind, name))
    os.rmdir(behind)
    return metrics, {}, errors
