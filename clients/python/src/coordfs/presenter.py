"""Presenters: programs the mount asks before others use their files, as NSFilePresenter on
macOS. Subclass `Presenter` (or `AsyncPresenter`), define the methods for what you answer,
and register it with `Connection.present(presenter, path)`.

The library keeps each ask's deadline and always answers:

- the method returns: `ok`;
- it raises `Refuse(reason)`: `refuse` (only a refused `accommodate_deletion` stops
  anything: the deletion fails with EBUSY);
- it raises anything else: `ok`, and the exception is logged (logger "coordfs"). That is
  what the mount does for a presenter that cannot answer (it goes on without it), given at
  once, without the wait and without marking the presenter unresponsive. An exception is a
  bug, not a decision: a presenter refuses only by saying so, so a bug never becomes a veto;
- it has not returned shortly before the deadline (the ask's `timeout` less a tenth, at
  most 0.25 s): `ok`, then. A coroutine method is cancelled there; a plain method runs on and
  what it returns is ignored.

Methods are called one at a time per registration, in the order the asks and notices came,
on a thread of the registration's own (an `AsyncPresenter`'s coroutines on the event loop
it was registered from, or, without one, each in `asyncio.run` on that thread). An ask whose
deadline passed while it waited for an earlier method is answered `ok` and its method is not
called. The presenter's own process and its children are never asked about their own
accesses: a `save` may write the file through the mount.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import queue
import threading
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, AnyStr, Callable, Generic

from . import _paths
from ._core import log
from .errors import ConnectionClosedError, NotFoundError
from .status import _field

if TYPE_CHECKING:
    from .connection import Connection

#: What a presenter may be asked (Docs/PROTOCOL.md, "Presenters").
ASK_KINDS: tuple[str, ...] = ("save", "relinquish", "accommodate-deletion")
_METHODS = {"save": "save", "relinquish": "relinquish", "accommodate-deletion": "accommodate_deletion"}
_NOTICES = {"did-change": "did_change", "did-move": "did_move", "did-delete": "did_delete", "reacquire": "reacquire"}


@dataclass(frozen=True)
class PresentedItem(Generic[AnyStr]):
    """What an ask or a notice is about. `path` is the item concerned, inside the mount (the
    presented path itself, or an item inside or above it); `presented` is the presenter's own
    path now (it follows moves). For asks: `requester`, the process whose access waits, and
    `deadline`, the `time.monotonic()` by which the library answers for you."""

    kind: str
    path: AnyStr
    presented: AnyStr
    requester: int | None = None
    deadline: float | None = None


class Refuse(Exception):  # noqa: N818  (a verdict, not an error)
    """Raised by a presenter's method to refuse the ask, with a reason for the log and status."""

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason)
        self.reason = reason


class Presenter(Generic[AnyStr]):
    """A presenter whose methods are plain functions. Define those you answer; the others
    are never asked (see `Connection.present`). Every method may take its time up to the
    ask's deadline."""

    def save(self, item: PresentedItem[AnyStr]) -> None:
        """Before another process reads the item: write out unsaved changes, then return."""

    def relinquish(self, item: PresentedItem[AnyStr]) -> None:
        """Before another process writes, moves or deletes the item: stop using it, then return
        (`reacquire` follows when that access is over)."""

    def accommodate_deletion(self, item: PresentedItem[AnyStr]) -> None:
        """Before the item is deleted: return to let it go, raise `Refuse` to keep it."""

    def reacquire(self, item: PresentedItem[AnyStr]) -> None:
        """The access `relinquish` made way for is over."""

    def did_change(self, item: PresentedItem[AnyStr]) -> None:
        """The item changed."""

    def did_move(self, item: PresentedItem[AnyStr], destination: AnyStr) -> None:
        """The item (or a directory above it) moved to `destination`."""

    def did_delete(self, item: PresentedItem[AnyStr]) -> None:
        """The item was deleted."""


class AsyncPresenter(Generic[AnyStr]):
    """A presenter whose methods are coroutines, run on the event loop it was registered
    from and cancelled at the ask's deadline. As `Presenter` otherwise."""

    async def save(self, item: PresentedItem[AnyStr]) -> None:
        """Before another process reads the item: write out unsaved changes, then return."""

    async def relinquish(self, item: PresentedItem[AnyStr]) -> None:
        """Before another process writes, moves or deletes the item: stop using it, then return."""

    async def accommodate_deletion(self, item: PresentedItem[AnyStr]) -> None:
        """Before the item is deleted: return to let it go, raise `Refuse` to keep it."""

    async def reacquire(self, item: PresentedItem[AnyStr]) -> None:
        """The access `relinquish` made way for is over."""

    async def did_change(self, item: PresentedItem[AnyStr]) -> None:
        """The item changed."""

    async def did_move(self, item: PresentedItem[AnyStr], destination: AnyStr) -> None:
        """The item (or a directory above it) moved to `destination`."""

    async def did_delete(self, item: PresentedItem[AnyStr]) -> None:
        """The item was deleted."""


def answers_of(presenter: Presenter[Any] | AsyncPresenter[Any]) -> list[str]:
    """The asks a presenter answers by default: those whose methods its class defines."""
    base: type[Any] = AsyncPresenter if isinstance(presenter, AsyncPresenter) else Presenter
    return [kind for kind, name in _METHODS.items() if getattr(type(presenter), name) is not getattr(base, name)]


class _Ask(Generic[AnyStr]):
    def __init__(self, request: int, item: PresentedItem[AnyStr]) -> None:
        self.request = request
        self.item: PresentedItem[AnyStr] = item
        self.answered = False
        #: A coroutine method running on the registration's loop, to cancel at the deadline.
        self.running: concurrent.futures.Future[Any] | None = None


class _Notice(Generic[AnyStr]):
    def __init__(self, item: PresentedItem[AnyStr], destination: AnyStr | None) -> None:
        self.item: PresentedItem[AnyStr] = item
        self.destination: AnyStr | None = destination


class _DeadlinePassedError(Exception):
    """A coroutine method cancelled at its deadline."""


class PresenterRegistration(Generic[AnyStr]):
    """A registered presenter; `stop()` (or leaving `with`/`async with`) unregisters it.

    Counts what happened to its asks: `asked`; answered by the method: `answered` (ok) and
    `refused`; answered for it: `failed` (the method raised), `overran` (the deadline came
    first), `stopped` (it was stopped first); `late`: answers the mount said came too late."""

    def __init__(self, connection: Connection, presenter: Presenter[AnyStr] | AsyncPresenter[AnyStr],
                 path: AnyStr | os.PathLike[AnyStr], answers: Sequence[str] | None) -> None:
        if not isinstance(presenter, (Presenter, AsyncPresenter)):
            raise TypeError("a presenter is a coordfs.Presenter or coordfs.AsyncPresenter")
        self.connection = connection
        self.presenter: Presenter[AnyStr] | AsyncPresenter[AnyStr] = presenter
        self.answers = list(answers) if answers is not None else answers_of(presenter)
        unknown = set(self.answers) - set(ASK_KINDS)
        if unknown:
            raise ValueError(f"not asks a presenter answers: {sorted(unknown)}")
        self._convert: Callable[[bytes], AnyStr] = _paths.converter(path)
        self._mount_path = connection.mount_path(path)
        self._loop: asyncio.AbstractEventLoop | None = None
        with contextlib.suppress(RuntimeError):
            self._loop = asyncio.get_running_loop()
        #: The presenter's number on its connection, and its path as the server understood it.
        self.id = 0
        self.path: AnyStr
        self.asked = self.answered = self.refused = self.failed = self.overran = self.late = 0
        #: Asks answered ok because the presenter stopped before it answered them.
        self.stopped = 0
        self._lock = threading.Lock()
        self._unanswered: dict[int, _Ask[AnyStr]] = {}
        self._queue: queue.SimpleQueue[_Ask[AnyStr] | _Notice[AnyStr] | None] = queue.SimpleQueue()
        self._worker = threading.Thread(target=self._work, daemon=True)
        self._stopped = False

    def __repr__(self) -> str:
        return f"<coordfs.PresenterRegistration {self.id} of {getattr(self, 'path', '?')!r} answering {self.answers}>"

    # Registration (the connection's reader thread calls `_on_ok` and `_receive`).

    def _fields(self) -> dict[str, Any]:
        return {**_paths.encode("path", self._mount_path), "answers": self.answers}

    def _on_ok(self, body: dict[str, Any]) -> None:
        self.id = _field(body, "presenter", int)
        self.path = self._convert(_paths.decode(body, "path"))
        self._worker.name = f"coordfs presenter {self.id}"
        self._worker.start()
        self.connection._register_presenter(self.id, self)

    def _started(self, body: dict[str, Any]) -> None:
        """The registration's reply reached the caller (everything was done in `_on_ok`)."""

    def _receive(self, message: dict[str, Any]) -> None:
        path = self._convert(_paths.decode(message, "path"))
        presented = self._convert(_paths.decode(message, "presented"))
        kind = _field(message, "kind", str)
        if message["push"] == "ask":
            timeout = _field(message, "timeout", float, 0.0)
            deadline = time.monotonic() + max(0.0, timeout - min(0.25, timeout / 10))
            requester = _field(message, "requester", int, 0)
            ask: _Ask[AnyStr] = _Ask(_field(message, "request", int),
                                     PresentedItem(kind, path, presented, requester, deadline))
            with self._lock:
                self.asked += 1
                self._unanswered[ask.request] = ask
                stopped = self._stopped
            if stopped:  # asked as it was leaving
                self._answer(ask, "ok", None, "stopped")
                return
            self.connection._scheduler.call_at(deadline, lambda: self._deadline(ask))
            self._queue.put(ask)
        else:
            destination = _paths.decode_optional(message, "destination")
            self._queue.put(_Notice(PresentedItem(kind, path, presented),
                                    None if destination is None else self._convert(destination)))

    def _finish(self) -> None:
        """The connection ended: nothing more comes."""
        with self._lock:
            self._stopped = True
            self._unanswered.clear()
        self._queue.put(None)

    # Answering.

    def _answer(self, ask: _Ask[AnyStr], verdict: str, reason: str | None, how: str) -> None:
        with self._lock:
            if ask.answered:
                return
            ask.answered = True
            self._unanswered.pop(ask.request, None)
            setattr(self, how, getattr(self, how) + 1)
        fields: dict[str, Any] = {"presenter": self.id, "request": ask.request, "verdict": verdict}
        if reason:
            fields["reason"] = reason
        pending = self.connection._send_quietly("answer", fields)
        if pending is not None:
            pending.future.add_done_callback(self._answered)

    def _answered(self, reply: concurrent.futures.Future[dict[str, Any]]) -> None:
        if reply.exception() is None and reply.result().get("accepted") is False:
            with self._lock:
                self.late += 1

    def _deadline(self, ask: _Ask[AnyStr]) -> None:
        if ask.answered:
            return
        self._answer(ask, "ok", None, "overran")
        if ask.running is not None:
            ask.running.cancel()
        log.warning("coordfs: presenter %d did not answer %s of %r in time; answered ok for it",
                    self.id, ask.item.kind, ask.item.path)

    # The worker.

    def _work(self) -> None:
        while True:
            inbound = self._queue.get()
            if inbound is None:
                return
            if isinstance(inbound, _Ask):
                self._serve(inbound)
            else:
                self._tell(inbound)

    def _run(self, call: Callable[[], Any], deadline: float | None, ask: _Ask[AnyStr] | None) -> None:
        """Runs a method: a coroutine on the registration's loop (or in `asyncio.run` here),
        cancelled at `deadline`."""
        result = call()
        if not isinstance(self.presenter, AsyncPresenter):
            return
        coroutine: Awaitable[Any] = result
        if self._loop is not None and self._loop.is_running():
            future: concurrent.futures.Future[Any] = asyncio.run_coroutine_threadsafe(
                coroutine, self._loop)  # type: ignore[arg-type]
            if ask is not None:
                ask.running = future
                if ask.answered:
                    future.cancel()
            try:
                future.result()
            except concurrent.futures.CancelledError:
                raise _DeadlinePassedError from None
            return
        if deadline is None:
            asyncio.run(coroutine)  # type: ignore[arg-type]
            return
        try:
            asyncio.run(asyncio.wait_for(coroutine, max(0.0, deadline - time.monotonic())))
        except asyncio.TimeoutError:
            raise _DeadlinePassedError from None

    def _serve(self, ask: _Ask[AnyStr]) -> None:
        if ask.answered:
            return  # its deadline came while an earlier method ran: answered ok, not called
        method = getattr(self.presenter, _METHODS[ask.item.kind])
        try:
            self._run(lambda: method(ask.item), ask.item.deadline, ask)
        except Refuse as refusal:
            self._answer(ask, "refuse", refusal.reason or "refused by the presenter", "refused")
        except _DeadlinePassedError:
            self._answer(ask, "ok", None, "overran")
        except Exception:
            log.exception("coordfs: presenter %d's %s of %r raised; answered ok", self.id, ask.item.kind,
                          ask.item.path)
            self._answer(ask, "ok", None, "failed")
        except BaseException:
            self._answer(ask, "ok", None, "failed")
            raise
        else:
            self._answer(ask, "ok", None, "answered")

    def _tell(self, notice: _Notice[AnyStr]) -> None:
        name = _NOTICES.get(notice.item.kind)
        if name is None:
            return  # a notice of a newer server
        method = getattr(self.presenter, name)
        try:
            if name == "did_move":
                destination = notice.destination if notice.destination is not None else notice.item.path
                self._run(lambda: method(notice.item, destination), None, None)
            else:
                self._run(lambda: method(notice.item), None, None)
        except Exception:
            log.exception("coordfs: presenter %d's %s of %r raised", self.id, name, notice.item.path)

    # Stopping.

    def _stopping(self) -> bool:
        with self._lock:
            if self._stopped:
                return False
            self._stopped = True
            waiting = list(self._unanswered.values())
        # Asks still open go on at once: this presenter is leaving.
        for ask in waiting:
            self._answer(ask, "ok", None, "stopped")
        return True

    def _stopped_now(self) -> None:
        self.connection._drop_presenter(self.id)
        self._queue.put(None)

    def stop(self) -> None:
        """Unregisters the presenter; asks still open are answered ok. Waits for the method
        running now, unless called from one (from a coroutine, use `astop`)."""
        if not self._stopping():
            return
        with contextlib.suppress(ConnectionClosedError, NotFoundError):
            self.connection.call("unpresent", {"presenter": self.id})
        self._stopped_now()
        if threading.current_thread() is not self._worker and self._worker.is_alive():
            self._worker.join()

    async def astop(self) -> None:
        """`stop` for asyncio."""
        if not self._stopping():
            return
        with contextlib.suppress(ConnectionClosedError, NotFoundError):
            await self.connection.acall("unpresent", {"presenter": self.id})
        self._stopped_now()
        if threading.current_thread() is not self._worker and self._worker.is_alive():
            await asyncio.get_running_loop().run_in_executor(None, self._worker.join)

    def __enter__(self) -> PresenterRegistration[AnyStr]:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()

    async def __aenter__(self) -> PresenterRegistration[AnyStr]:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await self.astop()
