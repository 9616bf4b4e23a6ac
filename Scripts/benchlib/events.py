"""The `events` and `exec` workloads of Scripts/bench: close -> event latency, explicit claims,
a stalled subscriber; `coordfs exec` against flock(1). On coordfs targets through the control
socket; on bare, the same figures from inotify and flock(1) as a reference; the peers have
neither and are skipped. What each figure means is in Scripts/bench --help.

`events_workload(path, config)` runs the first and returns its metrics (`EVENT_KEYS`);
`exec_workload(path, config)` the second (`EXEC_KEYS`).
"""
import argparse
import array
import ctypes
import json
import os
import pickle
import select
import shlex
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import time

from benchlib.common import BenchError, rate

CONTROL_ATTRIBUTE = "user.coordfs.control"
EVENT_WARMUP = 200          # paced saves before the measured ones, not counted
EVENT_TIMEOUT = 2.0         # seconds a paced save waits for every subscriber's arrival
EVENT_PAYLOAD = b"saved\n"  # what each events save writes
IN_CLOSE_WRITE = 0x00000008
EVENT_KEYS = ["event_p50_1", "event_p99_1", "event_p50_n", "event_p99_n", "event_p99_n_last",
              "claim_p50", "claim_p99", "stall_none", "stall_stalled", "stall_ratio"]
EXEC_KEYS = ["exec"]


class ControlClient:
    """A blocking newline-JSON connection to a mount's control socket, parsing only replies."""

    def __init__(self, socket_path, client="bench"):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        self.sock.connect(socket_path)
        self.buffer = b""
        self.last_id = 0
        self.request("hello", version=1, client=client)

    def send(self, op, **fields):
        self.last_id += 1
        self.sock.sendall(json.dumps({"id": self.last_id, "op": op, **fields}).encode() + b"\n")
        return self.last_id

    def line(self):
        while b"\n" not in self.buffer:
            data = self.sock.recv(65536)
            if not data:
                raise BenchError("the control socket closed the connection")
            self.buffer += data
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line

    def reply(self, request_id):
        """The reply to request_id; pushes before it are skipped."""
        while True:
            message = json.loads(self.line())
            if message.get("id") == request_id and "push" not in message:
                if "error" in message:
                    error = message["error"]
                    raise BenchError(f"control socket: {error['code']}: {error['message']}")
                return message["ok"]

    def request(self, op, **fields):
        return self.reply(self.send(op, **fields))

    def close(self):
        self.sock.close()


def control_location(path):
    """{"socket", "path"} of a directory in a coordfs mount (None elsewhere)."""
    try:
        return json.loads(os.getxattr(path, CONTROL_ATTRIBUTE))
    except OSError:
        return None


_libc = None


def inotify_watch(path, mask):
    """A non-blocking inotify descriptor watching path (ctypes: the stdlib has no inotify)."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.inotify_init1.argtypes = [ctypes.c_int]
        _libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    fd = _libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "inotify_init1")
    if _libc.inotify_add_watch(fd, os.fsencode(path), mask) < 0:
        error = ctypes.get_errno()
        os.close(fd)
        raise OSError(error, f"inotify_add_watch {path}")
    return fd


def count_inotify_events(data):
    """Events in one read from an inotify descriptor (16-byte header + name each)."""
    count, offset = 0, 0
    while offset + 16 <= len(data):
        offset += 16 + int.from_bytes(data[offset + 12:offset + 16], sys.byteorder)
        count += 1
    return count


def open_subscriber(spec):
    """One subscriber: ("socket", socket path, wire path) or ("inotify", path). Returns
    (descriptor, keep-alive object, is_inotify); the socket is non-blocking once subscribed."""
    if spec[0] == "inotify":
        return inotify_watch(spec[1], IN_CLOSE_WRITE), None, True
    client = ControlClient(spec[1], client="bench-subscriber")
    client.request("subscribe", path=spec[2], kinds=["changed"])
    if client.buffer:
        raise BenchError(f"unexpected data after the subscribe reply: {client.buffer[:200]!r}")
    client.sock.setblocking(False)
    return client.sock.fileno(), client, False


def subscriber_process(group, specs, progress_fd, stop_fd, result_fd):
    """Runs in a forked child: opens its subscribers, says so on progress_fd, then stamps every
    arrival with CLOCK_MONOTONIC as soon as epoll returns (before reading or parsing), and
    tells progress_fd how many events every one of its subscribers has received. On EOF of
    stop_fd it sends its arrival times (one per event, per subscriber) to result_fd."""
    opened = [open_subscriber(spec) for spec in specs]
    count = len(opened)
    index = {fd: i for i, (fd, _, _) in enumerate(opened)}
    inotify = [is_inotify for _, _, is_inotify in opened]
    arrivals = [array.array("q") for _ in range(count)]
    received = [0] * count
    event_tokens = 0
    poller = select.epoll()
    for fd, _, _ in opened:
        poller.register(fd, select.EPOLLIN)
    poller.register(stop_fd, select.EPOLLIN)
    os.write(progress_fd, struct.pack("=iq", group, 0))
    clock, read, poll, pack, write = time.monotonic_ns, os.read, poller.poll, struct.pack, os.write
    reported = total = 0
    running = True
    while running:
        ready = poll()
        now = clock()
        for fd, _ in ready:
            if fd == stop_fd:
                running = False
                continue
            i = index[fd]
            try:
                data = read(fd, 65536)
            except BlockingIOError:
                continue
            if not data:
                raise BenchError(f"subscriber {i} of group {group}: the server closed the connection")
            if inotify[i]:
                events = count_inotify_events(data)
            else:
                events = data.count(b"\n")
                event_tokens += data.count(b'"push":"event"')
            arrivals[i].extend([now] * events)
            received[i] += events
            total += events
        if total >= count * (reported + 1):
            least = min(received)
            if least > reported:
                reported = least
                write(progress_fd, pack("=iq", group, least))
    lines = sum(received[i] for i in range(count) if not inotify[i])
    result = {"arrivals": [a.tobytes() for a in arrivals], "other_lines": lines - event_tokens}
    with os.fdopen(result_fd, "wb") as output:
        pickle.dump(result, output)


def fork_subscribers(groups):
    """Forks one process per group of subscriber specs; returns the parent's side."""
    progress_read, progress_write = os.pipe2(os.O_CLOEXEC)
    stop_read, stop_write = os.pipe2(os.O_CLOEXEC)
    children = []
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        for group, specs in enumerate(groups):
            result_read, result_write = os.pipe2(os.O_CLOEXEC)
            pid = os.fork()
            if pid == 0:                                  # child: never returns
                status = 1
                try:
                    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                        signal.signal(sig, signal.SIG_DFL)
                    os.close(progress_read)
                    os.close(stop_write)
                    os.close(result_read)
                    for _, other_read in children:
                        os.close(other_read)
                    subscriber_process(group, specs, progress_write, stop_read, result_write)
                    status = 0
                except BaseException as error:
                    try:
                        os.write(progress_write, struct.pack("=iq", group, -1))
                        with os.fdopen(result_write, "wb") as output:
                            pickle.dump({"error": f"{type(error).__name__}: {error}"}, output)
                    except BaseException:
                        pass
                finally:
                    os._exit(status)
            os.close(result_write)
            children.append((pid, result_read))
    except BaseException:
        for pid, _ in children:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        raise
    finally:
        os.close(progress_write)
        os.close(stop_read)
    return argparse.Namespace(children=children, progress=progress_read, stop=stop_write,
                              seen=[-1] * len(groups), pending=b"", poller=None)


def read_progress(side, target, deadline):
    """Waits until every group has reported `target` events (True) or the deadline passed."""
    if side.poller is None:
        side.poller = select.epoll()
        side.poller.register(side.progress, select.EPOLLIN)
    while min(side.seen) < target:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not side.poller.poll(remaining):
            return False
        chunk = os.read(side.progress, 4096)
        if not chunk:
            raise BenchError("every subscriber process is gone")
        data = side.pending + chunk
        whole = len(data) - len(data) % 12
        side.pending = data[whole:]
        for group, count in struct.iter_unpack("=iq", data[:whole]):
            if count < 0:
                raise BenchError(f"subscriber process {group} failed: {collect_results(side)}")
            side.seen[group] = max(side.seen[group], count)
    return True


def collect_results(side):
    """Stops the subscriber processes and returns their results (or the first error text)."""
    if side.stop is not None:
        os.close(side.stop)
        side.stop = None
    results, errors = [], []
    for pid, result_read in side.children:
        with os.fdopen(result_read, "rb") as stream:
            data = stream.read()
        os.waitpid(pid, 0)
        result = pickle.loads(data) if data else {"error": f"process {pid} sent nothing"}
        if "error" in result:
            errors.append(result["error"])
        results.append(result)
    side.children = []
    close_subscriber_pipes(side)
    if errors:
        return errors[0]
    return results


def close_subscriber_pipes(side):
    if side.poller is not None:
        side.poller.close()
        side.poller = None
    for name in ("progress", "stop"):
        if getattr(side, name) is not None:
            os.close(getattr(side, name))
            setattr(side, name, None)


def end_subscribers(side):
    """After a failure: kills the subscriber processes still there and closes the pipes."""
    for pid, result_read in side.children:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
        os.close(result_read)
    side.children = []
    close_subscriber_pipes(side)


def percentile(ordered, fraction):
    """Nearest-rank percentile of a sorted list."""
    return ordered[min(len(ordered) - 1, max(0, int(round(fraction * len(ordered))) - 1))]


def event_latency(file_path, specs, config):
    """Paced saves of file_path with len(specs) subscribers in config.event_groups processes:
    open(O_WRONLY|O_TRUNC), write, close, then wait for every subscriber to get the event
    (or EVENT_TIMEOUT). Returns latencies in µs from close() returning to each arrival."""
    groups = max(1, min(config.event_groups, len(specs)))
    side = fork_subscribers([specs[g::groups] for g in range(groups)])
    total = EVENT_WARMUP + config.event_saves
    closed = array.array("q", bytes(8 * total))
    before_close = array.array("q", bytes(8 * total))
    late = 0
    try:
        if not read_progress(side, 0, time.monotonic() + 60):
            raise BenchError("the subscribers did not get ready in 60 s")
        flags = os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC
        clock = time.monotonic_ns
        for number in range(total):
            fd = os.open(file_path, flags)
            os.write(fd, EVENT_PAYLOAD)
            before_close[number] = clock()
            os.close(fd)
            closed[number] = clock()
            if not read_progress(side, number + 1, time.monotonic() + EVENT_TIMEOUT):
                late += 1
        read_progress(side, total, time.monotonic() + EVENT_TIMEOUT)
        results = collect_results(side)
    finally:
        end_subscribers(side)
    if isinstance(results, str):
        raise BenchError(f"a subscriber process failed: {results}")
    rows = []
    for result in results:
        for raw in result["arrivals"]:
            rows.append(array.array("q", raw))
    other_lines = sum(r["other_lines"] for r in results)
    missing = sum(max(0, total - len(row)) for row in rows)
    extra = sum(max(0, len(row) - total) for row in rows)
    if extra or other_lines:
        raise BenchError(f"subscribers got {extra} events more than saves and {other_lines} lines "
                         "that were not events")
    all_arrivals, last_arrivals, negative = [], [], 0
    for number in range(EVENT_WARMUP, total):
        end = closed[number]
        latest = None
        for row in rows:
            if number < len(row):
                latency = row[number] - end
                all_arrivals.append(latency)
                latest = latency if latest is None or latency > latest else latest
        if latest is not None:
            last_arrivals.append(latest)
    all_arrivals.sort()
    last_arrivals.sort()
    negative = sum(1 for value in all_arrivals if value < 0)
    close_times = sorted(closed[i] - before_close[i] for i in range(EVENT_WARMUP, total))
    return {
        "p50": percentile(all_arrivals, 0.50) / 1000, "p99": percentile(all_arrivals, 0.99) / 1000,
        "last_p99": percentile(last_arrivals, 0.99) / 1000,
        "max": all_arrivals[-1] / 1000, "missing": missing, "late": late,
        "negative": negative / len(all_arrivals), "close_p50": percentile(close_times, 0.5) / 1000,
        "groups": groups,
    }


def claim_round_trips(location, wire_path, pairs):
    """µs per claim (write, one path) + release, each awaiting its reply, on one connection."""
    client = ControlClient(location["socket"], client="bench-claims")
    try:
        times = []
        clock = time.monotonic_ns
        for number in range(EVENT_WARMUP + pairs):
            start = clock()
            claim = client.request("claim", write=[wire_path], wait=10)["claim"]
            client.request("release", claim=claim)
            if number >= EVENT_WARMUP:
                times.append(clock() - start)
    finally:
        client.close()
    times.sort()
    return percentile(times, 0.50) / 1000, percentile(times, 0.99) / 1000


def command_wall_time(argv, cwd, runs):
    """Median wall time of a short command, in ms (after 10 unmeasured runs)."""
    times = []
    for number in range(10 + runs):
        start = time.perf_counter()
        result = subprocess.run(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, timeout=60)
        seconds = time.perf_counter() - start
        if result.returncode != 0:
            raise BenchError(f"{shlex.join(argv)} exited {result.returncode}: "
                             f"{result.stderr.decode(errors='replace').strip()[-500:]}")
        if number >= 10:
            times.append(seconds)
    return statistics.median(times) * 1000


def unpaced_saves(file_path, count):
    """Seconds for count back-to-back saves: open(O_WRONLY|O_TRUNC), write, close."""
    flags = os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC
    start = time.perf_counter()
    for _ in range(count):
        fd = os.open(file_path, flags)
        os.write(fd, EVENT_PAYLOAD)
        os.close(fd)
    return time.perf_counter() - start


def interleaved_saves(first, second, count):
    """Seconds spent in count saves of each of two files, taking turns save by save (ABBA), so
    that a shared machine's noise (an fsync that waits for someone else's I/O) hits both alike."""
    flags = os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC
    clock = time.perf_counter_ns
    spent = [0, 0]
    for number in range(count):
        for index in ((0, 1) if number % 2 == 0 else (1, 0)):
            start = clock()
            fd = os.open(second if index else first, flags)
            os.write(fd, EVENT_PAYLOAD)
            os.close(fd)
            spent[index] += clock() - start
    return spent[0] / 1e9, spent[1] / 1e9


def dropped_events(location):
    """Events the mount's subscribers have lost to overflow, from a status request."""
    observer = ControlClient(location["socket"], client="bench-status")
    try:
        return sum(s["dropped"] for s in observer.request("status")["subscribers"])
    finally:
        observer.close()


def stalled_subscriber_saves(directory, location, config):
    """saves/s of a file nobody follows and of one followed by a subscriber that subscribed and
    never reads, whose queue on the server has overflowed before the timing starts (bare: an
    inotify watch never read). The two files sit in sibling directories, the subscriber follows
    one of them; the timed saves alternate between the two save by save."""
    files = {}
    for kind in ("quiet", "stalled"):
        os.mkdir(os.path.join(directory, kind))
        files[kind] = os.path.join(directory, kind, "f")
        with open(files[kind], "wb") as initial:
            initial.write(EVENT_PAYLOAD)
    if location is None:
        watch = inotify_watch(os.path.dirname(files["stalled"]), IN_CLOSE_WRITE)
        stop_watching = lambda: os.close(watch)
    else:
        watcher = ControlClient(location["socket"], client="bench-stalled")
        stop_watching = watcher.close
    try:
        if location is not None:
            watcher.request("subscribe", path=location["path"].rstrip("/") + "/stalled")
            for _ in range(40):                      # until its queue has overflowed
                unpaced_saves(files["stalled"], 500)
                if dropped_events(location):
                    break
            else:
                raise BenchError("a subscriber that never reads never overflowed")
        seconds = interleaved_saves(files["quiet"], files["stalled"], config.event_saves)
        dropped = dropped_events(location) if location is not None else None
    finally:
        stop_watching()
    return rate(config.event_saves, seconds[0]), rate(config.event_saves, seconds[1]), dropped


def events_workload(path, config):
    """coordfs: event latency over the control socket (1 and N subscribers), claim+release
    round trips, saves with a stalled subscriber. bare: inotify."""
    kind = config.target_events
    if kind is None:
        return {}, {}, {}
    directory = os.path.join(path, "events")
    os.mkdir(directory)
    file_path = os.path.join(directory, "f")
    with open(file_path, "wb") as initial:
        initial.write(EVENT_PAYLOAD)
    location = wire_file = None
    if kind == "socket":
        location = control_location(directory)
        if location is None:
            raise BenchError(f"{directory} has no {CONTROL_ATTRIBUTE} attribute")
        wire_directory = location["path"]
        wire_file = wire_directory.rstrip("/") + "/f"
        # Alternately the file and its directory, as subscribers of a document would.
        make_spec = lambda i: ("socket", location["socket"], wire_directory if i % 2 else wire_file)
    else:
        make_spec = lambda i: ("inotify", directory if i % 2 else file_path)
    metrics, info = {}, {}
    n = config.event_subscribers
    one = event_latency(file_path, [make_spec(0)], config)
    many = event_latency(file_path, [make_spec(i) for i in range(n)], config)
    metrics.update(event_p50_1=one["p50"], event_p99_1=one["p99"], event_p50_n=many["p50"],
                   event_p99_n=many["p99"], event_p99_n_last=many["last_p99"])
    for label, result in (("1", one), ("n", many)):
        for key in ("max", "missing", "late", "negative", "close_p50", "groups"):
            info[f"event_{label}_{key}"] = result[key]
    if location is not None:
        metrics["claim_p50"], metrics["claim_p99"] = claim_round_trips(location, wire_file,
                                                                       config.event_saves)
    none, stalled, dropped = stalled_subscriber_saves(directory, location, config)
    metrics.update(stall_none=none, stall_stalled=stalled, stall_ratio=stalled / none)
    info["stall_dropped"] = dropped
    shutil.rmtree(directory)
    return metrics, info, {}


def exec_workload(path, config):
    """coordfs: wall time of `coordfs exec --write f -- true` (the command's whole life: start,
    claim, run `true`, end). bare: `flock f true`, the reference it is compared with."""
    kind = config.target_events
    if kind is None:
        return {}, {}, {}
    directory = os.path.join(path, "exec")
    os.mkdir(directory)
    with open(os.path.join(directory, "f"), "wb") as initial:
        initial.write(EVENT_PAYLOAD)
    if kind == "socket":
        command = [config.target_binary, "exec", "--write", "f", "--", "true"]
    else:
        command = ["flock", "f", "true"]
    milliseconds = command_wall_time(command, directory, config.exec_runs)
    shutil.rmtree(directory)
    return {"exec": milliseconds}, {}, {}
