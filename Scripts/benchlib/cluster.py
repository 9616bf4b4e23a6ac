"""Several hosts in one bench: the private PostgreSQL server behind the `cluster` variant
(coordfs mounted with --cluster) and the `cluster` workload.

The workload runs on every coordfs target and on bare: `inc_one` is read-modify-write
increments of one counter file through one mount (each an open r+, read, rewrite, close: a
write claim and an atomic save). On a --cluster target it also mounts the same backing a second
time with the same options, standing in for a second host, and measures `inc_alt`, the same
increments alternating between the two mounts (the worst case: every increment moves the
grant to the other host and back), and the latency from a save's close() on the first mount to
its event on a subscriber of the second (`xevent_p50`, `xevent_p99`, µs).
"""
import grp
import os
import pwd
import shutil
import subprocess
import tempfile
import time

from benchlib.common import BenchError, log, rate, run_command
from benchlib.events import control_location, event_latency

CLUSTER_KEYS = ["inc_one", "inc_alt", "xevent_p50", "xevent_p99"]
INCREMENT_WARMUP = 20


class PrivatePostgres:
    """initdb and pg_ctl from Debian's postgresql in a temporary folder, a Unix socket only,
    run as the postgres user (initdb refuses root); `stop` removes it.

    The folder is on /dev/shm where there is one: the server stands in for the database
    server of a real cluster, which has its own disk, so its WAL flushes must not queue on the
    backing's disk behind (and ahead of) the saves being measured. Its CPU is still this
    machine's, at the lowest priority (nice 19): the figures of the cluster variant pay for
    the database's work only where a core would otherwise sit idle."""

    def __init__(self):
        versions = [int(v) for v in os.listdir("/usr/lib/postgresql") if v.isdigit()] \
            if os.path.isdir("/usr/lib/postgresql") else []
        if not versions:
            raise BenchError("the cluster variant needs PostgreSQL (apt-get install postgresql)")
        self.bin = f"/usr/lib/postgresql/{max(versions)}/bin"
        self.root = tempfile.mkdtemp(prefix="coordfs-bench-pg.",
                                     dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        user = pwd.getpwnam("postgres")
        os.chown(self.root, user.pw_uid, user.pw_gid)
        os.chmod(self.root, 0o755)
        self.data = os.path.join(self.root, "data")
        self._as_postgres([f"{self.bin}/initdb", "-D", self.data, "--auth=trust", "--username=postgres",
                           "--no-sync", "-E", "UTF8", "--locale=C"], "initdb")
        with open(os.path.join(self.data, "postgresql.conf"), "a") as conf:
            conf.write(f"\nlisten_addresses = ''\nunix_socket_directories = '{self.root}'\n"
                       "max_connections = 60\n")
        # At the lowest priority (the server and every backend inherit it): on this machine the
        # server's CPU competes with the workload being measured, where a real cluster's
        # database runs on a machine of its own.
        self._as_postgres(["nice", "-n", "19", f"{self.bin}/pg_ctl", "-D", self.data, "-l", os.path.join(self.root, "log"),
                           "-w", "-t", "30", "start"], "pg_ctl start", output=os.path.join(self.root, "ctl.out"))
        self.conninfo = f"postgresql:///postgres?host={self.root}&user=postgres"
        self.conninfo_file = os.path.join(self.root, "conninfo")
        with open(self.conninfo_file, "w") as handle:
            handle.write(self.conninfo + "\n")

    def _as_postgres(self, argv, what, output=None):
        argv = ["setpriv", "--reuid=postgres", "--regid=postgres", "--clear-groups"] + argv
        if output is None:
            return run_command(argv, what, cwd="/tmp")
        # pg_ctl leaves the server holding its standard output: a file, never a pipe we wait on.
        with open(output, "w") as sink:
            result = subprocess.run(argv, cwd="/tmp", stdin=subprocess.DEVNULL, stdout=sink, stderr=sink)
        if result.returncode != 0:
            raise BenchError(f"{what} failed: {open(output).read()[-2000:]}")

    def stop(self):
        subprocess.run(["setpriv", "--reuid=postgres", "--regid=postgres", "--clear-groups",
                        f"{self.bin}/pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop"],
                       cwd="/tmp", capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)


def increments(paths, count):
    """count increments of the counter, the i-th through paths[i % len(paths)]; increments/s.
    Checks the result: a lost update fails the figure."""
    for number in range(INCREMENT_WARMUP + count):
        if number == INCREMENT_WARMUP:
            start = time.perf_counter()
        with open(paths[number % len(paths)], "r+b") as counter:
            value = int(counter.read() or b"0")
            counter.seek(0)
            counter.write(b"%d\n" % (value + 1))
            counter.truncate()
    seconds = time.perf_counter() - start
    with open(paths[0], "rb") as counter:
        final = int(counter.read())
    if final != INCREMENT_WARMUP + count:
        raise BenchError(f"increments lost updates: {final} after {INCREMENT_WARMUP + count}")
    return rate(count, seconds)


def cluster_workload(path, config):
    metrics = {}
    counter = os.path.join(path, "counter")
    with open(counter, "wb") as handle:
        handle.write(b"0\n")
    metrics["inc_one"] = increments([counter], config.increments)
    options = config.target_options or []
    if "--cluster" not in options and "--cluster-file" not in options:
        return metrics, {}, {}
    second = os.path.join(os.path.dirname(config.backing), "mnt2")
    os.mkdir(second)
    config.registry.add(second, [[config.target_binary, "unmount", second]])
    run_command([config.target_binary, "mount", config.backing, second] + options, "mounting a second cluster host",
                timeout=120)
    errors = {}
    try:
        with open(counter, "wb") as handle:
            handle.write(b"0\n")
        other = os.path.join(second, "counter")
        metrics["inc_alt"] = increments([counter, other], config.increments)
        location = control_location(second)
        if location is None:
            raise BenchError("the second mount has no control socket")
        watched = os.path.join(path, "shared")
        with open(watched, "wb"):
            pass
        wire = location["path"].rstrip("/") + "/shared"
        try:
            latency = event_latency(watched, [("socket", location["socket"], wire)], config)
            if latency["missing"]:
                raise BenchError(f"{latency['missing']} saves on the first mount never reached the second's subscriber")
            metrics["xevent_p50"], metrics["xevent_p99"] = latency["p50"], latency["p99"]
        except BenchError as error:
            errors["xevent_p50"] = errors["xevent_p99"] = str(error)
    finally:
        config.registry.unmount(second)
        os.rmdir(second)
    return metrics, {}, errors
