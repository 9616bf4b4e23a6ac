"""A connection to a mount's control socket, for blocking and for asyncio code alike.

One thread per connection reads the socket and routes each line: a reply to the request
waiting for it, an event to its subscription, an ask to its presenter. Every call is
thread-safe. Blocking calls wait on the calling thread; the `a…` coroutines and `async with`
/ `async for` wait without blocking the event loop, so one connection serves both kinds of
code.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
import json
import os
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Generator, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, AnyStr, Callable, Generic, Literal, Union

from . import _paths
from ._base import ProtocolError
from ._core import Pending, Scheduler, log, settle, wait_async
from ._locate import Location, locate
from ._paths import PathArg
from .errors import (
    ConnectError,
    ConnectionClosedError,
    CoordFSError,
    NotFoundError,
    NotInMountError,
    ServerError,
    server_error,
)
from .events import Event, Item, Overflow, Resync, parse_event, parse_overflow
from .presenter import AsyncPresenter, Presenter, PresenterRegistration
from .status import Status, _field, parse_status

#: The protocol version this library speaks.
PROTOCOL_VERSION = 1

#: A claim's mode: `read` (nobody else changes the paths) or `write` (nobody else sees or
#: changes them).
ClaimMode = Literal["read", "write"]

#: One path or several, as `open()` takes paths.
Paths = Union[AnyStr, "os.PathLike[AnyStr]", Sequence[Union[AnyStr, "os.PathLike[AnyStr]"]]]


@dataclass(frozen=True)
class ServerInfo:
    """What the server said to `hello`: the protocol version, this connection's session, the
    credentials the kernel gave it (claims are held for the process tree of `pid`) and the
    longest line it takes."""

    version: int
    session: int
    uid: int
    gid: int
    pid: int
    max_line: int


@dataclass(frozen=True)
class BrokenClaim:
    """A claim the mount took away: it kept a process of another user (`by_uid`, `by_pid`)
    waiting for the mount's break time. It is no longer held."""

    claim: int
    read: list[str]
    write: list[str]
    by_uid: int
    by_pid: int
    held: float
    waited: float


def _default_client() -> str:
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"


def _open_socket(path: str) -> socket.socket:
    # Python's sockets are close-on-exec: a program this one runs never inherits the
    # connection, so a claim never outlives the process that took it.
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError as error:
        sock.close()
        reason = ("nobody listens there (is the mount still running?)" if error.errno == errno.ECONNREFUSED
                  else error.strerror or str(error))
        raise ConnectError(path, reason) from None
    return sock


def connect(path: PathArg, *, client: str | None = None) -> Connection:
    """Connects to the mount that holds `path` (any path in it; one that does not exist yet is
    found through its directory), found through its `user.coordfs.control` attribute.
    `client` is the name status shows (default: the program's)."""
    location = locate(path)
    connection = Connection(location.socket, client, location, os.fsencode(path))
    try:
        connection._hello()
    except BaseException:
        connection.close()
        raise
    return connection


async def aconnect(path: PathArg, *, client: str | None = None) -> Connection:
    """`connect`, awaiting the server's hello without blocking the event loop."""
    location = locate(path)
    connection = Connection(location.socket, client, location, os.fsencode(path))
    try:
        await connection._ahello()
    except BaseException:
        connection.close()
        raise
    return connection


def connect_socket(socket_path: str, *, client: str | None = None) -> Connection:
    """Connects to a control socket named directly (paths given to the connection must then
    be in that socket's mount)."""
    connection = Connection(socket_path, client, None, None)
    try:
        connection._hello()
    except BaseException:
        connection.close()
        raise
    return connection


class Connection:
    """A connection to a mount's control socket; make one with `connect` or `aconnect`.

    Paths given to it are paths as `open()` takes them (str, bytes or path-like), in the
    mount. Paths it gives back (events, presented items, claims) are inside the mount
    ("/docs/a.txt") and of the type given: bytes for bytes, str (decoded as `os.fsdecode`
    does) for str, so names that are not UTF-8 come back as their exact bytes.
    `local_path` turns them into paths under the mountpoint.

    Close it (`close()`, or `with`/`async with`): the server then releases its claims and
    registrations at once, as it does when the process ends.
    """

    def __init__(self, socket_path: str, client: str | None, location: Location | None,
                 origin: bytes | None) -> None:
        self.socket_path = socket_path
        self.client = client if client is not None else _default_client()
        #: Where the connection was found from, when it was found from a path.
        self.location = location
        self._mountpoint = _mountpoint(origin, location)
        self._sock = _open_socket(socket_path)
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._next_id = 1
        self._pending: dict[int, Pending] = {}
        self._subscriptions: dict[int, Subscription[Any]] = {}
        self._presenters: dict[int, PresenterRegistration[Any]] = {}
        self._claims: dict[int, Claim[Any]] = {}
        self._broken: list[BrokenClaim] = []
        self._closed_reason: str | None = None
        self._closed_by_us = False
        self._farewell: str | None = None
        self._same_socket: dict[str, bool] = {socket_path: True}
        self.server: ServerInfo = ServerInfo(0, 0, 0, 0, 0, 0)
        self._scheduler = Scheduler(f"coordfs deadlines {socket_path}")
        self._reader = threading.Thread(target=self._read_loop, name=f"coordfs reader {socket_path}", daemon=True)
        self._reader.start()

    # Opening and closing

    def _hello_request(self) -> Pending:
        def on_ok(body: dict[str, Any]) -> None:
            self.server = ServerInfo(_field(body, "version", int), _field(body, "session", int),
                                     _field(body, "uid", int, 0), _field(body, "gid", int, 0),
                                     _field(body, "pid", int, 0), _field(body, "maxLine", int, 0))

        return self.request("hello", {"version": PROTOCOL_VERSION, "client": self.client}, on_ok=on_ok)

    def _hello(self) -> None:
        self._hello_request().future.result()

    async def _ahello(self) -> None:
        await wait_async(self._hello_request().future)

    def close(self) -> None:
        """Closes the connection: the server releases its claims and registrations at once;
        subscriptions end (their iteration stops), presenters stop. Never blocks for long."""
        with self._lock:
            self._closed_by_us = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        if threading.current_thread() is not self._reader:
            self._reader.join(5)
        self._sock.close()

    @property
    def closed(self) -> bool:
        with self._lock:
            return self._closed_reason is not None

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    async def __aenter__(self) -> Connection:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        self.close()

    # Paths

    @property
    def mountpoint(self) -> str | None:
        """The mount's root here, when the connection was found from a path and the root could
        be told from it (else None)."""
        return None if self._mountpoint is None else os.fsdecode(self._mountpoint)

    def local_path(self, path: AnyStr) -> AnyStr:
        """The path under the mountpoint of `path` inside the mount ("/docs/a.txt"), as `open()`
        takes it, of the same type."""
        if self._mountpoint is None:
            raise CoordFSError("the mountpoint is not known: connect from a path in the mount")
        inside = os.fsencode(path)
        if not inside.startswith(b"/"):
            raise ValueError(f"{path!r} is not a path inside the mount (it begins with '/')")
        local = self._mountpoint if inside == b"/" else self._mountpoint.rstrip(b"/") + inside
        return local if isinstance(path, bytes) else os.fsdecode(local)

    def mount_path(self, path: PathArg) -> bytes:
        """The name inside the mount of a path as `open()` takes it, found as `connect` finds
        the mount; it must be this connection's mount."""
        location = locate(path)
        if not self._is_my_socket(location.socket):
            raise NotInMountError(os.fsencode(path), f"it is in another coordfs mount, served at {location.socket}")
        return location.path

    def _is_my_socket(self, other: str) -> bool:
        known = self._same_socket.get(other)
        if known is None:
            try:
                known = os.path.samefile(other, self.socket_path)
            except OSError:
                known = False
            self._same_socket[other] = known
        return known

    # Requests

    def request(self, op: str, fields: dict[str, Any], *, pending: Pending | None = None,
                on_ok: Callable[[dict[str, Any]], None] | None = None) -> Pending:
        """Sends a request; its reply completes the returned `Pending`'s future. (For what the
        library does not wrap: any `op` of Docs/PROTOCOL.md, paths encoded by the caller.)"""
        pending = pending or Pending(op, on_ok)
        with self._lock:
            if self._closed_reason is not None:
                raise ConnectionClosedError(self._closed_reason)
            pending.id = self._next_id
            self._next_id += 1
            self._pending[pending.id] = pending
        try:
            self._send({"id": pending.id, "op": op, **fields})
        except OSError as error:
            with self._lock:
                self._pending.pop(pending.id, None)
                reason = self._closed_reason or str(error)
            raise ConnectionClosedError(reason) from None
        return pending

    def call(self, op: str, fields: dict[str, Any]) -> dict[str, Any]:
        """Sends a request and waits for its reply's `ok` body; an error reply raises."""
        return self.request(op, fields).future.result()

    async def acall(self, op: str, fields: dict[str, Any]) -> dict[str, Any]:
        return await wait_async(self.request(op, fields).future)

    def _send_quietly(self, op: str, fields: dict[str, Any]) -> Pending | None:
        """Sends a request whose reply nobody waits for; nothing when the connection is gone."""
        try:
            return self.request(op, fields)
        except ConnectionClosedError:
            return None

    def _send(self, message: dict[str, Any]) -> None:
        line = json.dumps(message, separators=(",", ":")).encode("ascii") + b"\n"
        with self._send_lock:
            self._sock.sendall(line)

    # Reading

    def _read_loop(self) -> None:
        buffer = bytearray()
        reason = "the server closed the connection"
        try:
            while True:
                chunk = self._sock.recv(1 << 16)
                if not chunk:
                    break
                buffer += chunk
                start = 0
                while True:
                    end = buffer.find(b"\n", start)
                    if end < 0:
                        break
                    line = bytes(buffer[start:end])
                    start = end + 1
                    if line.strip():
                        self._dispatch(line)
                del buffer[:start]
        except OSError as error:
            reason = error.strerror or str(error)
        except (ProtocolError, ValueError, KeyError, TypeError) as error:
            reason = f"the server sent a line this client cannot read: {error}"
            log.error("coordfs: %s", reason)
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
        finally:
            self._shut_down(reason)

    def _dispatch(self, line: bytes) -> None:
        message = json.loads(line)
        if not isinstance(message, dict):
            raise ProtocolError(f"not a JSON object: {line!r}")
        if "push" in message:
            self._route(message)
            return
        request_id = message.get("id")
        with self._lock:
            pending = self._pending.pop(request_id, None) if isinstance(request_id, int) else None
        if pending is None:
            if "error" in message:
                log.warning("coordfs: an error about no request of ours: %s", message["error"])
            return
        if "error" in message:
            settle(pending.future, error=server_error(message["error"]))
            return
        body = message.get("ok")
        if not isinstance(body, dict):
            raise ProtocolError(f"a reply without its body: {line!r}")
        if pending.on_ok is not None:
            try:
                pending.on_ok(body)
            except Exception as error:
                settle(pending.future, error=ProtocolError(f"a reply this client cannot read: {error}"))
                raise
        if pending.op == "claim":
            with self._lock:
                if not pending.abandoned:
                    settle(pending.future, body)
                    return
            # Its waiter gave up (interrupted, cancelled) as it was granted: let go at once.
            self._release_later(_field(body, "claim", int))
            return
        settle(pending.future, body)

    def _route(self, message: dict[str, Any]) -> None:
        kind = message["push"]
        if kind in ("event", "overflow"):
            with self._lock:
                subscription = self._subscriptions.get(message.get("subscription", -1))
            if subscription is not None:
                if kind == "event":
                    subscription._offer(parse_event(message["event"], subscription._convert))
                else:
                    subscription._offer(parse_overflow(message))
        elif kind in ("ask", "notify"):
            with self._lock:
                presenter = self._presenters.get(message.get("presenter", -1))
            if presenter is not None:
                presenter._receive(message)
        elif kind == "broken":
            broken = BrokenClaim(_field(message, "claim", int),
                                 [os.fsdecode(p) for p in _paths.decode_list(message, "read")],
                                 [os.fsdecode(p) for p in _paths.decode_list(message, "write")],
                                 _field(message, "byUid", int, 0), _field(message, "byPid", int, 0),
                                 _field(message, "held", float, 0.0), _field(message, "waited", float, 0.0))
            with self._lock:
                self._broken.append(broken)
                claim = self._claims.pop(broken.claim, None)
            if claim is not None:
                claim.broken = broken
            log.warning("coordfs: claim %d was broken: it kept uid %d (pid %d) waiting %.1f s",
                        broken.claim, broken.by_uid, broken.by_pid, broken.waited)
        elif kind == "bye":
            reason = message.get("reason")
            with self._lock:
                self._farewell = reason if isinstance(reason, str) else "bye"
        # Unknown pushes are for newer clients.

    def _shut_down(self, reason: str) -> None:
        with self._lock:
            by_us = self._closed_by_us
            if self._closed_reason is None:
                self._closed_reason = ("closed by this client" if by_us
                                       else f"the server said: {self._farewell}" if self._farewell else reason)
            pending = list(self._pending.values())
            subscriptions = list(self._subscriptions.values())
            presenters = list(self._presenters.values())
            self._pending.clear()
            self._subscriptions.clear()
            self._presenters.clear()
            self._claims.clear()
            closed = self._closed_reason
        self._scheduler.stop()
        for request in pending:
            settle(request.future, error=ConnectionClosedError(closed))
        for subscription in subscriptions:
            subscription._finish(None if by_us else ConnectionClosedError(closed))
        for presenter in presenters:
            presenter._finish()

    def _release_later(self, claim: int) -> None:
        # Not from the reader thread itself: a send may wait for the server, which may be
        # waiting for us to read.
        threading.Thread(target=self._send_quietly, args=("release", {"claim": claim}), daemon=True).start()

    # Status

    def status(self) -> Status:
        """Everything going on in the mount, as this connection's user may see it."""
        return parse_status(self.call("status", {}))

    async def astatus(self) -> Status:
        return parse_status(await self.acall("status", {}))

    # Events

    def _subscribe_request(self, path: AnyStr | os.PathLike[AnyStr], recursive: bool, since: int | None,
                           kinds: Sequence[str] | None, buffer_size: int) -> tuple[Subscription[AnyStr], Pending]:
        subscription: Subscription[AnyStr] = Subscription(self, _paths.converter(path), buffer_size, since)
        fields: dict[str, Any] = {**_paths.encode("path", self.mount_path(path)), "recursive": recursive}
        if since is not None:
            fields["since"] = since
        if kinds is not None:
            # As given (a newer mount knows more kinds than EVENT_KINDS): the server refuses
            # what it does not know with `bad-request`.
            if isinstance(kinds, str):
                raise TypeError("kinds is a list of kinds, not one string")
            fields["kinds"] = list(dict.fromkeys(kinds))

        def on_ok(body: dict[str, Any]) -> None:
            subscription._subscribed(body)
            with self._lock:
                self._subscriptions[subscription.id] = subscription

        return subscription, self.request("subscribe", fields, on_ok=on_ok)

    def events(self, path: AnyStr | os.PathLike[AnyStr], recursive: bool = True, since: int | None = None,
               *, kinds: Sequence[str] | None = None, buffer_size: int = 4096) -> Subscription[AnyStr]:
        """Subscribes to the change events of `path`: a file's own, or a directory's and its
        entries' (with `recursive`, everything beneath it). `since` replays first the events
        numbered after it that the mount still keeps (a `Resync` comes first when it keeps
        too few). `kinds` keeps only those kinds.

        Returns once subscribed, so every change made after the call is seen. Iterate the
        result, blocking (`for`) or not (`async for`), for `Event`, `Overflow` and `Resync`
        items; it ends when closed (`close()`, `with`). At most `buffer_size` items wait in
        the library for a reader that falls behind; beyond that they are dropped and an
        `Overflow` says which, as the server does."""
        subscription, pending = self._subscribe_request(path, recursive, since, kinds, buffer_size)
        pending.future.result()
        return subscription

    def aevents(self, path: AnyStr | os.PathLike[AnyStr], recursive: bool = True, since: int | None = None,
                *, kinds: Sequence[str] | None = None, buffer_size: int = 4096) -> PendingSubscription[AnyStr]:
        """`events` for asyncio: `await` it for the subscription, `async with` it (subscribed
        on entry, unsubscribed on exit), or `async for` over it directly (subscribed when the
        loop starts: changes made before that are not seen)."""
        return PendingSubscription(self, path, recursive, since, kinds, buffer_size)

    # Claims

    def claim(self, paths: Paths[AnyStr], mode: ClaimMode = "write", *, wait: float | None = None,
              nonblock: bool = False) -> Claim[AnyStr]:
        """A claim on `paths` (one path or a list, all taken at once or none) for `mode`:
        `read`, nobody else changes them; `write`, nobody else sees or changes them. A claim on
        a directory covers everything beneath it. The claims are held for this process and its
        children; everyone else's accesses wait.

        Take it with `with` or `async with` (released however the block ends), or with
        `acquire()`/`release()`. `wait` is how many seconds to wait for others to let go
        (default: the mount's claim timeout; a wait that runs out raises `ClaimTimeoutError`);
        `nonblock` raises `ConflictError` at once instead."""
        if mode not in ("read", "write"):
            raise ValueError(f"a claim's mode is 'read' or 'write', not {mode!r}")
        items = _path_list(paths)
        return self.claim_all(read=items if mode == "read" else [], write=items if mode == "write" else [],
                              wait=wait, nonblock=nonblock)

    def claim_all(self, read: Sequence[AnyStr | os.PathLike[AnyStr]] = (),
                  write: Sequence[AnyStr | os.PathLike[AnyStr]] = (), *, wait: float | None = None,
                  nonblock: bool = False) -> Claim[AnyStr]:
        """A claim on some paths for reading and others for writing, all taken at once."""
        if not read and not write:
            raise ValueError("a claim needs at least one path")
        convert: Callable[[bytes], AnyStr] = _paths.converter((list(read) + list(write))[0])
        return Claim(self, [self.mount_path(p) for p in read], [self.mount_path(p) for p in write], convert,
                     wait, nonblock)

    def take_broken_claims(self) -> list[BrokenClaim]:
        """The claims the mount broke since the last call (each kept a process of another user
        waiting for the mount's break time, and is no longer held)."""
        with self._lock:
            broken, self._broken = self._broken, []
        return broken

    def _held(self, claim: Claim[Any]) -> None:
        with self._lock:
            self._claims[claim.id] = claim

    def _let_go(self, claim: Claim[Any]) -> bool:
        """Forgets a claim about to be released; False when the mount broke it meanwhile."""
        with self._lock:
            return self._claims.pop(claim.id, None) is not None

    def _abandon(self, pending: Pending) -> None:
        """The caller stopped waiting for a claim (an interrupt, a cancelled task): give up the
        wait, and if it was granted already, let go of it."""
        with self._lock:
            pending.abandoned = True
            granted = pending.future.done() and pending.future.exception() is None
        if granted:
            self._release_later(_field(pending.future.result(), "claim", int))
        else:
            self._send_quietly("cancel", {"request": pending.id})

    # Presenters

    def present(self, presenter: Presenter[AnyStr] | AsyncPresenter[AnyStr],
                path: AnyStr | os.PathLike[AnyStr], *,
                answers: Sequence[str] | None = None) -> PresenterRegistration[AnyStr]:
        """Registers `presenter` for `path` (a file, or a directory and everything in it): the
        mount asks it before others use the item and tells it what happened after (see
        `Presenter`). `answers` are the asks it answers; by default those whose methods the
        presenter's class defines. Ends with the registration's `stop()` (or `with`)."""
        registration: PresenterRegistration[AnyStr] = PresenterRegistration(self, presenter, path, answers)
        registration._started(self.request("present", registration._fields(), on_ok=registration._on_ok)
                              .future.result())
        return registration

    async def apresent(self, presenter: Presenter[AnyStr] | AsyncPresenter[AnyStr],
                       path: AnyStr | os.PathLike[AnyStr], *,
                       answers: Sequence[str] | None = None) -> PresenterRegistration[AnyStr]:
        """`present`, awaiting the registration without blocking the event loop. An
        `AsyncPresenter`'s methods run on this event loop."""
        registration: PresenterRegistration[AnyStr] = PresenterRegistration(self, presenter, path, answers)
        pending = self.request("present", registration._fields(), on_ok=registration._on_ok)
        registration._started(await wait_async(pending.future))
        return registration

    def _register_presenter(self, presenter_id: int, registration: PresenterRegistration[Any]) -> None:
        with self._lock:
            self._presenters[presenter_id] = registration

    def _drop_presenter(self, presenter_id: int) -> None:
        with self._lock:
            self._presenters.pop(presenter_id, None)


def _path_list(paths: Paths[AnyStr]) -> list[AnyStr | os.PathLike[AnyStr]]:
    if isinstance(paths, (str, bytes, os.PathLike)):
        return [paths]
    return list(paths)


def _mountpoint(origin: bytes | None, location: Location | None) -> bytes | None:
    """The mount's root, told from the path a connection was found from and that path's name
    inside the mount; checked by asking the root itself."""
    if origin is None or location is None:
        return None
    real = os.path.realpath(origin)
    inside = location.path.rstrip(b"/")
    if inside and not real.endswith(inside):
        return None
    root = real[: len(real) - len(inside)] or b"/"
    try:
        if locate(root) != Location(location.socket, b"/", location.version):
            return None
    except CoordFSError:
        return None
    return root


class Subscription(Generic[AnyStr]):
    """A subscription's items in commit order: `Event`s, and the `Overflow` and `Resync`
    markers that say to rescan. Iterate it with `for` (blocking) or `async for`, or take one
    item with `get(timeout)`. Iteration ends once the subscription is closed by this side
    (`close()`, leaving `with`, closing the connection); when the connection ends otherwise
    it raises `ConnectionClosedError`. One consumer at a time."""

    def __init__(self, connection: Connection, convert: Callable[[bytes], AnyStr], buffer_size: int,
                 since: int | None) -> None:
        self.connection = connection
        self._convert: Callable[[bytes], AnyStr] = convert
        self._capacity = max(1, buffer_size)
        self._since = since
        #: The subscription's number on its connection.
        self.id = 0
        #: The subscribed path as the server understood it (inside the mount).
        self.path: AnyStr
        #: The last sequence number before the first event this subscription delivers.
        self.sequence = 0
        #: How many events from history come first (with `since`).
        self.replayed = 0
        #: Whether `since` reached further back than the mount's history (a `Resync` comes first).
        self.resync = False
        self._condition = threading.Condition()
        self._buffer: deque[Item[AnyStr]] = deque()
        self._overflow: Overflow | None = None
        self._waiters: list[concurrent.futures.Future[None]] = []
        self._finished = False
        self._failure: ConnectionClosedError | None = None

    def __repr__(self) -> str:
        return f"<coordfs.Subscription {self.id} of {getattr(self, 'path', '?')!r}>"

    # Fed by the reader thread.

    def _subscribed(self, body: dict[str, Any]) -> None:
        self.id = _field(body, "subscription", int)
        self.path = self._convert(_paths.decode(body, "path"))
        self.sequence = _field(body, "sequence", int, 0)
        self.replayed = _field(body, "replayed", int, 0)
        self.resync = body.get("resync") is True
        if self.resync:
            self._buffer.append(Resync(self._since or 0, self.sequence))

    def _offer(self, item: Item[AnyStr]) -> None:
        with self._condition:
            if self._finished:
                return
            if self._overflow is not None:
                self._overflow = self._overflow.merged(_range(item))
            elif len(self._buffer) >= self._capacity:
                self._overflow = _range(item)
            else:
                self._buffer.append(item)
            self._wake()

    def _finish(self, failure: ConnectionClosedError | None) -> None:
        with self._condition:
            if self._finished:
                return
            self._finished = True
            self._failure = failure
            self._wake()

    def _wake(self) -> None:
        self._condition.notify_all()
        for waiter in self._waiters:
            settle(waiter, None)
        self._waiters.clear()

    def _pop(self) -> Item[AnyStr] | None:
        if self._buffer:
            return self._buffer.popleft()
        if self._overflow is not None:
            overflow, self._overflow = self._overflow, None
            return overflow
        return None

    def _ended(self) -> ConnectionClosedError:
        return ConnectionClosedError(self._failure.reason) if self._failure is not None else ConnectionClosedError(
            f"subscription {self.id} was closed")

    # Taking items.

    def get(self, timeout: float | None = None) -> Item[AnyStr]:
        """The next item; waits at most `timeout` seconds (then raises `TimeoutError`).
        Raises `ConnectionClosedError` once the subscription has ended."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._condition:
            while True:
                item = self._pop()
                if item is not None:
                    return item
                if self._finished:
                    raise self._ended()
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(f"no event within {timeout} s")
                self._condition.wait(remaining)

    async def aget(self, timeout: float | None = None) -> Item[AnyStr]:
        """`get` for asyncio."""
        if timeout is None:
            return await self._anext_item()
        try:
            return await asyncio.wait_for(self._anext_item(), timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(f"no event within {timeout} s") from None

    async def _anext_item(self) -> Item[AnyStr]:
        while True:
            with self._condition:
                item = self._pop()
                if item is not None:
                    return item
                if self._finished:
                    raise self._ended()
                waiter: concurrent.futures.Future[None] = concurrent.futures.Future()
                self._waiters.append(waiter)
            try:
                await wait_async(waiter)
            finally:
                with self._condition:
                    if waiter in self._waiters:
                        self._waiters.remove(waiter)

    def __iter__(self) -> Iterator[Item[AnyStr]]:
        return self

    def __next__(self) -> Item[AnyStr]:
        try:
            return self.get()
        except ConnectionClosedError:
            with self._condition:
                if self._failure is None:
                    raise StopIteration from None
            raise

    def __aiter__(self) -> AsyncIterator[Item[AnyStr]]:
        return self

    async def __anext__(self) -> Item[AnyStr]:
        try:
            return await self._anext_item()
        except ConnectionClosedError:
            with self._condition:
                if self._failure is None:
                    raise StopAsyncIteration from None
            raise

    # Ending.

    def _end_locally(self) -> bool:
        with self.connection._lock:
            self.connection._subscriptions.pop(self.id, None)
        with self._condition:
            was = self._finished
        self._finish(None)
        return not was

    def close(self) -> None:
        """Unsubscribes; iteration ends after what was already received. Idempotent."""
        with self._condition:
            if self._finished:
                return
        with contextlib.suppress(ConnectionClosedError, NotFoundError):
            self.connection.call("unsubscribe", {"subscription": self.id})
        self._end_locally()

    async def aclose(self) -> None:
        with self._condition:
            if self._finished:
                return
        with contextlib.suppress(ConnectionClosedError, NotFoundError):
            await self.connection.acall("unsubscribe", {"subscription": self.id})
        self._end_locally()

    def __enter__(self) -> Subscription[AnyStr]:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    async def __aenter__(self) -> Subscription[AnyStr]:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await self.aclose()


def _range(item: Item[Any]) -> Overflow:
    if isinstance(item, Event):
        return Overflow(1, item.sequence, item.sequence)
    if isinstance(item, Overflow):
        return item
    return Overflow(0, item.sequence + 1, item.sequence)


class PendingSubscription(Generic[AnyStr]):
    """What `Connection.aevents` returns: awaitable, an async context manager and an async
    iterator, each subscribing first."""

    def __init__(self, connection: Connection, path: AnyStr | os.PathLike[AnyStr], recursive: bool,
                 since: int | None, kinds: Sequence[str] | None, buffer_size: int) -> None:
        self._connection = connection
        self._arguments: tuple[AnyStr | os.PathLike[AnyStr], bool, int | None, Sequence[str] | None, int] = (
            path, recursive, since, kinds, buffer_size)
        self._subscription: Subscription[AnyStr] | None = None

    async def subscribe(self) -> Subscription[AnyStr]:
        if self._subscription is None:
            subscription, pending = self._connection._subscribe_request(*self._arguments)
            await wait_async(pending.future)
            self._subscription = subscription
        return self._subscription

    def __await__(self) -> Generator[Any, None, Subscription[AnyStr]]:
        return self.subscribe().__await__()

    async def __aenter__(self) -> Subscription[AnyStr]:
        return await self.subscribe()

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        if self._subscription is not None:
            await self._subscription.aclose()

    def __aiter__(self) -> AsyncIterator[Item[AnyStr]]:
        return self

    async def __anext__(self) -> Item[AnyStr]:
        return await (await self.subscribe()).__anext__()


class Claim(Generic[AnyStr]):
    """Claims on paths, taken by `acquire()` (or `with`, `async with`) and let go by
    `release()` (or leaving the block, however it is left). A claim the process does not
    release goes when its connection closes: at `close()`, or when the process ends, killed
    or not, as the kernel closes its socket.

    Once held: `id`, the paths as granted (`read`, `write`, inside the mount), and `waited`,
    the seconds it waited. `broken` is set when the mount took it away (it kept a process of
    another user waiting for the break time)."""

    def __init__(self, connection: Connection, read: list[bytes], write: list[bytes],
                 convert: Callable[[bytes], AnyStr], wait: float | None, nonblock: bool) -> None:
        self.connection = connection
        self._fields: dict[str, Any] = {}
        if read:
            self._fields.update(_paths.encode_list("read", read))
        if write:
            self._fields.update(_paths.encode_list("write", write))
        if nonblock:
            self._fields["nonblock"] = True
        elif wait is not None:
            self._fields["wait"] = max(0.0, float(wait))
        self._convert: Callable[[bytes], AnyStr] = convert
        self.id = 0
        self.read: list[AnyStr] = []
        self.write: list[AnyStr] = []
        self.waited = 0.0
        self.broken: BrokenClaim | None = None
        self._held = False

    def __repr__(self) -> str:
        state = "held" if self._held else "broken" if self.broken else "not held"
        return f"<coordfs.Claim {self.id} {state} read={self.read!r} write={self.write!r}>"

    @property
    def held(self) -> bool:
        return self._held and self.broken is None

    def _granted(self, body: dict[str, Any]) -> None:
        self.id = _field(body, "claim", int)
        self.read = [self._convert(p) for p in _paths.decode_list(body, "read")]
        self.write = [self._convert(p) for p in _paths.decode_list(body, "write")]
        self.waited = _field(body, "waited", float, 0.0)
        self.broken = None
        self._held = True
        self.connection._held(self)

    def acquire(self) -> Claim[AnyStr]:
        """Takes the claim, waiting as the claim says; raises `ConflictError`,
        `ClaimTimeoutError` and the like when it cannot. An interrupt (Ctrl-C) while waiting
        gives the wait up."""
        if self._held:
            raise CoordFSError(f"claim {self.id} is held already")
        pending = self.connection.request("claim", self._fields, pending=Pending("claim"))
        try:
            body = pending.future.result()
        except (ServerError, ConnectionClosedError):
            raise
        except BaseException:
            self.connection._abandon(pending)
            raise
        self._granted(body)
        return self

    async def aacquire(self) -> Claim[AnyStr]:
        """`acquire` for asyncio; cancelling the task gives the wait up."""
        if self._held:
            raise CoordFSError(f"claim {self.id} is held already")
        pending = self.connection.request("claim", self._fields, pending=Pending("claim"))
        try:
            body = await wait_async(pending.future)
        except (ServerError, ConnectionClosedError):
            raise
        except BaseException:
            self.connection._abandon(pending)
            raise
        self._granted(body)
        return self

    def _releasing(self) -> bool:
        if not self._held:
            return False
        self._held = False
        return self.connection._let_go(self)

    def release(self) -> None:
        """Lets go of the claim. Nothing to do when it is not held (never taken, released,
        broken, or its connection closed: the mount has let go already)."""
        if self._releasing():
            with contextlib.suppress(ConnectionClosedError, NotFoundError):
                self.connection.call("release", {"claim": self.id})

    async def arelease(self) -> None:
        if self._releasing():
            with contextlib.suppress(ConnectionClosedError, NotFoundError):
                await self.connection.acall("release", {"claim": self.id})

    def __enter__(self) -> Claim[AnyStr]:
        return self.acquire()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.release()

    async def __aenter__(self) -> Claim[AnyStr]:
        return await self.aacquire()

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await self.arelease()
