"""Plumbing shared by the connection and its presenters: requests waiting for their replies,
futures awaited from asyncio, and the deadlines of presenters' asks."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import heapq
import itertools
import logging
import threading
import time
from typing import Any, Callable, TypeVar

log = logging.getLogger("coordfs")

T = TypeVar("T")


def settle(future: concurrent.futures.Future[T], result: T | None = None,
           error: BaseException | None = None) -> None:
    """Completes `future` unless something completed it already."""
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]  # None only where T allows it
    except concurrent.futures.InvalidStateError:
        pass


async def wait_async(future: concurrent.futures.Future[T]) -> T:
    """Awaits a future that another thread completes. Cancelling the await leaves `future`
    alone: what a request given up means is for the caller to decide (a claim granted after
    its waiter went must still be released)."""
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[T] = loop.create_future()

    def copy(done: concurrent.futures.Future[T]) -> None:
        if waiter.done():
            return
        error = done.exception()
        if error is not None:
            waiter.set_exception(error)
        else:
            waiter.set_result(done.result())

    def done_callback(done: concurrent.futures.Future[T]) -> None:
        # (RuntimeError: the loop was closed meanwhile, and nobody is waiting any more.)
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(copy, done)

    future.add_done_callback(done_callback)
    return await waiter


class Pending:
    """A request waiting for its reply. `on_ok` runs on the reader thread as the reply is read,
    before the next line: a subscription's or presenter's pushes are routed from then on."""

    def __init__(self, op: str, on_ok: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.op = op
        self.id = 0
        self.future: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
        self.on_ok = on_ok
        #: For a claim: the caller stopped waiting (interrupted, cancelled), so a grant that
        #: comes anyway is released at once.
        self.abandoned = False


class Scheduler:
    """Calls functions at given times on one thread of its own (started when first needed):
    the deadlines of a connection's presenter asks."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._condition = threading.Condition()
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._counter = itertools.count()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def call_at(self, when: float, function: Callable[[], None]) -> None:
        """Calls `function` at `when` (time.monotonic()), unless stopped first."""
        with self._condition:
            if self._stopped:
                return
            heapq.heappush(self._heap, (when, next(self._counter), function))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._condition.notify()

    def stop(self) -> None:
        with self._condition:
            self._stopped = True
            self._heap.clear()
            self._condition.notify()

    def _run(self) -> None:
        while True:
            with self._condition:
                while not self._stopped and (not self._heap or self._heap[0][0] > time.monotonic()):
                    self._condition.wait(None if not self._heap else self._heap[0][0] - time.monotonic())
                if self._stopped:
                    return
                _, _, function = heapq.heappop(self._heap)
            try:
                function()
            except Exception:
                log.exception("a scheduled call failed")
