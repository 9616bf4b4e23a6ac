"""A presenter of one path through the library: `presenter.py PATH BEHAVIOUR [CONTENT] [--async]`.

Runs in a process of its own, so that the accesses it is asked about (the test's, and the
programs the test starts) are not its own. Prints `ready` once registered, `ask KIND PATH
REQUESTER` as each ask's method is called and `notify KIND PATH [DESTINATION]` for each
notice. On its standard input, `report` prints the registration's counters and `stop`
unregisters it (`stopped`); the end of its input ends it.

BEHAVIOUR: `save` writes CONTENT to the file through the mount, then returns; `refuse` refuses
deletions; `slow` takes 5 s to relinquish (past any deadline the tests set); `raise` raises a
bug's exception from relinquish; `notices` answers nothing and prints notices. `--async`
uses an `AsyncPresenter` on an event loop instead of a `Presenter`.
"""

from __future__ import annotations

import asyncio
import sys
import time

import coordfs
from coordfs import PresentedItem

arguments = [argument for argument in sys.argv[1:] if argument != "--async"]
path, behaviour = arguments[0], arguments[1]
content = arguments[2] if len(arguments) > 2 else ""
connection = coordfs.connect(path, client=f"presenter {behaviour}")


def asked(item: PresentedItem[str]) -> None:
    print("ask", item.kind, item.path, item.requester, flush=True)


def told(item: PresentedItem[str], destination: str = "") -> None:
    print("notify", item.kind, item.path, destination, flush=True)


def save(item: PresentedItem[str]) -> None:
    with open(connection.local_path(item.presented), "w") as file:
        file.write(content)


class Plain(coordfs.Presenter[str]):
    def did_change(self, item: PresentedItem[str]) -> None:
        told(item)

    def did_move(self, item: PresentedItem[str], destination: str) -> None:
        told(item, destination)

    def did_delete(self, item: PresentedItem[str]) -> None:
        told(item)


class Saver(Plain):
    def save(self, item: PresentedItem[str]) -> None:
        asked(item)
        save(item)


class Refuser(Plain):
    def accommodate_deletion(self, item: PresentedItem[str]) -> None:
        asked(item)
        raise coordfs.Refuse("unsaved changes")


class Slow(Plain):
    def relinquish(self, item: PresentedItem[str]) -> None:
        asked(item)
        time.sleep(5)
        print("slow relinquish returned", flush=True)


class Buggy(Plain):
    def relinquish(self, item: PresentedItem[str]) -> None:
        asked(item)
        raise ValueError("a bug in the presenter")


class AsyncPlain(coordfs.AsyncPresenter[str]):
    async def did_change(self, item: PresentedItem[str]) -> None:
        told(item)

    async def did_move(self, item: PresentedItem[str], destination: str) -> None:
        told(item, destination)

    async def did_delete(self, item: PresentedItem[str]) -> None:
        told(item)


class AsyncSaver(AsyncPlain):
    async def save(self, item: PresentedItem[str]) -> None:
        asked(item)
        await asyncio.sleep(0.05)  # a coroutine that really waits
        save(item)


class AsyncRefuser(AsyncPlain):
    async def accommodate_deletion(self, item: PresentedItem[str]) -> None:
        asked(item)
        raise coordfs.Refuse("unsaved changes")


class AsyncSlow(AsyncPlain):
    async def relinquish(self, item: PresentedItem[str]) -> None:
        asked(item)
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            print("cancelled at the deadline", flush=True)
            raise


class AsyncBuggy(AsyncPlain):
    async def relinquish(self, item: PresentedItem[str]) -> None:
        asked(item)
        raise ValueError("a bug in the presenter")


PLAIN: dict[str, type[coordfs.Presenter[str]]] = {
    "save": Saver, "refuse": Refuser, "slow": Slow, "raise": Buggy, "notices": Plain}
ASYNC: dict[str, type[coordfs.AsyncPresenter[str]]] = {
    "save": AsyncSaver, "refuse": AsyncRefuser, "slow": AsyncSlow, "raise": AsyncBuggy, "notices": AsyncPlain}


def command(line: str, registration: coordfs.PresenterRegistration[str]) -> bool:
    """Acts on one line of input; False once it is time to stop reading."""
    line = line.strip()
    if line == "report":
        print(f"report asked={registration.asked} answered={registration.answered} refused={registration.refused} "
              f"failed={registration.failed} overran={registration.overran} late={registration.late}", flush=True)
        return True
    return line not in ("stop", "")


async def main() -> None:
    registration = await connection.apresent(ASYNC[behaviour](), path)
    print("ready", flush=True)
    loop = asyncio.get_running_loop()
    while command(await loop.run_in_executor(None, sys.stdin.readline), registration):
        pass
    await registration.astop()
    print("stopped", flush=True)
    await loop.run_in_executor(None, sys.stdin.readline)


if "--async" in sys.argv:
    asyncio.run(main())
else:
    presenter: coordfs.Presenter[str] = PLAIN[behaviour]()
    with connection.present(presenter, path) as registration:
        print("ready", flush=True)
        while command(sys.stdin.readline(), registration):
            pass
    print("stopped", flush=True)
    sys.stdin.readline()
