"""Claims through the Python client: held across processes (another process's claim and open
fail or wait), released however the `with` block is left, and gone with a holder killed by
SIGKILL (ControlSocketTests.aKilledExecReleasesItsClaimAtOnce, with the library as the
holder); a wait given up by an interrupted task leaves nothing held."""

from __future__ import annotations

import asyncio
import errno
import os
import signal
import time
import unittest

import coordfs
from mounts import Child, MountTestCase, wait_for


def try_to_open_for_writing(path: str) -> str:
    """What a plain writer meets: `ok`, or the errno's name."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    except OSError as error:
        return errno.errorcode.get(error.errno or 0, str(error))
    return "ok"


class ClaimTests(MountTestCase):
    def hold(self, mode: str, name: str) -> Child:
        holder = self.child("holder", mode, self.path(name))
        holder.wait_for_line("held ")
        return holder

    def held_by(self, connection: coordfs.Connection, pid: int) -> list[coordfs.ClaimHolder]:
        return [holder for holder in connection.status().held if holder.owner.pid == pid]

    def test_a_claim_holds_other_processes_back(self) -> None:
        """A write claim held by another process: a `nonblock` claim fails with `conflict`
        naming the holder, a claim that waits 0.5 s fails with `timeout`, and a plain writer
        with O_NONBLOCK gets EAGAIN. When the holder's block raises, its claim goes, though
        the holder lives on."""
        with open(self.path("f"), "w") as file:
            file.write("0\n")
        holder = self.hold("write", "f")
        connection = self.connect()

        with self.assertRaises(coordfs.ConflictError) as conflict:
            connection.claim(self.path("f"), "write", nonblock=True).acquire()
        self.assertEqual(conflict.exception.code, "conflict")
        self.assertEqual(conflict.exception.code, coordfs.ErrorCode.CONFLICT)
        self.assertIn("/f is held (exclusive)", conflict.exception.message)
        self.assertEqual([(b.path, b.mode, b.owner.kind, b.owner.pid) for b in conflict.exception.blockers],
                         [("/f", "exclusive", "client", holder.pid)])

        started = time.monotonic()
        with self.assertRaises(coordfs.ClaimTimeoutError) as timeout:
            connection.claim(self.path("f"), "read", wait=0.5).acquire()
        self.assertEqual(timeout.exception.code, "timeout")
        self.assertGreaterEqual(time.monotonic() - started, 0.45)
        self.assertEqual(try_to_open_for_writing(self.path("f")), "EAGAIN")

        holder.tell("raise")
        holder.wait_for_line("out")
        self.assertIn("raised the work in the block failed", holder.lines)
        with connection.claim(self.path("f"), "write", nonblock=True) as mine:
            self.assertEqual(mine.write, ["/f"])
        self.assertIsNone(holder.process.poll(), "the holder lives on: the block let go, not the process's end")

    def test_readers_share_and_a_writer_waits_for_them(self) -> None:
        self.shell("echo 0 > f")
        holder = self.hold("read", "f")
        connection = self.connect()
        with connection.claim(self.path("f"), "read", nonblock=True) as reading:
            self.assertTrue(reading.held)
        with self.assertRaises(coordfs.ConflictError):
            connection.claim(self.path("f"), "write", nonblock=True).acquire()
        self.assertEqual(self.shell("cat f").stdout, "0\n", "readers read")
        holder.tell("done")
        holder.wait_for_line("out")
        with connection.claim(self.path("f"), "write", wait=5):
            pass

    def test_a_killed_holders_claim_goes_at_once(self) -> None:
        """SIGKILL the holder and the kernel closes its socket: the claim goes at once."""
        self.shell("echo 0 > f")
        holder = self.hold("write", "f")
        connection = self.connect()
        self.assertEqual(len(self.held_by(connection, holder.pid)), 1)
        os.kill(holder.pid, signal.SIGKILL)
        killed = time.monotonic()

        def free() -> bool:
            try:
                connection.claim(self.path("f"), "write", nonblock=True).acquire().release()
            except coordfs.ConflictError:
                return False
            return True

        wait_for("the killed holder's claim to go", free, within=2)
        self.assertLess(time.monotonic() - killed, 2)
        self.assertEqual(try_to_open_for_writing(self.path("f")), "ok")

    def test_a_block_that_raises_releases_its_claim(self) -> None:
        connection = self.connect()
        with self.assertRaises(RuntimeError), connection.claim(self.path("f"), "write") as claim:
            self.assertEqual([(h.path, h.mode) for h in connection.status().held], [("/f", "exclusive")])
            raise RuntimeError("the work failed")
        self.assertFalse(claim.held)
        self.assertEqual(connection.status().held, [])

    def test_the_claimers_own_children_pass_through(self) -> None:
        """Claims are held for the process tree of the process that connected: its children
        write, everyone else waits."""
        connection = self.connect()
        with connection.claim_all(read=[self.path("config")], write=[self.path("counter")]) as claim:
            self.assertEqual((claim.read, claim.write), (["/config"], ["/counter"]))
            self.shell("echo 1 > counter")
        self.assertEqual(self.shell("cat counter").stdout, "1\n")

    def test_an_interrupted_wait_leaves_nothing_held(self) -> None:
        """A task cancelled while its claim waits gives the wait up (`cancel`); nothing of it
        is held afterwards, whether the grant would have come or not."""
        self.shell("echo 0 > f")
        holder = self.hold("write", "f")
        connection = self.connect()

        async def wait_and_cancel() -> None:
            task = asyncio.ensure_future(connection.claim(self.path("f"), "write", wait=60).aacquire())
            await asyncio.get_running_loop().run_in_executor(None, lambda: self.wait_for_status(
                connection, "our claim waiting", lambda status: len(status.waiting) == 1))
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task

        asyncio.run(wait_and_cancel())
        self.wait_for_status(connection, "no waiter left", lambda status: not status.waiting)
        holder.tell("done")
        holder.wait_for_line("out")
        self.wait_for_status(connection, "nothing held", lambda status: not status.held)
        time.sleep(0.2)  # a grant that came anyway would show by now
        self.assertEqual(connection.status().held, [])
        self.assertEqual(try_to_open_for_writing(self.path("f")), "ok")


    def test_an_interrupt_gives_up_a_blocking_wait(self) -> None:
        """Ctrl-C in a process whose `with` waits for a claim gives the wait up; the process
        lives on and never gets the claim when the holder lets go."""
        self.shell("echo 0 > f")
        holder = self.hold("write", "f")
        waiter = self.child("holder", "write", self.path("f"))
        connection = self.connect()
        self.wait_for_status(connection, "the second process waiting",
                             lambda status: [w.owner.pid for w in status.waiting] == [waiter.pid])
        os.kill(waiter.pid, signal.SIGINT)
        waiter.wait_for_line("out")
        self.assertIn("interrupted", waiter.lines)
        self.wait_for_status(connection, "no waiter left", lambda status: not status.waiting)
        holder.tell("done")
        holder.wait_for_line("out")
        self.wait_for_status(connection, "nothing held", lambda status: not status.held)
        time.sleep(0.2)  # a grant that came anyway would show by now
        self.assertEqual(connection.status().held, [])
        self.assertIsNone(waiter.process.poll())


class AsyncClaimTests(MountTestCase):
    def test_async_with_holds_and_releases_on_every_way_out(self) -> None:
        async def main() -> None:
            connection = await coordfs.aconnect(self.mnt, client="async claims")
            async with connection:
                async with connection.claim(self.path("f"), "write") as claim:
                    status = await connection.astatus()
                    self.assertEqual([(h.path, h.owner.session) for h in status.held],
                                     [("/f", connection.server.session)])
                    self.assertTrue(claim.held)
                self.assertEqual((await connection.astatus()).held, [])
                with self.assertRaises(ValueError):
                    async with connection.claim([self.path("a"), self.path("b")], "read"):
                        self.assertEqual(len((await connection.astatus()).held), 2)
                        raise ValueError("the work failed")
                self.assertEqual((await connection.astatus()).held, [])

        asyncio.run(main())


if __name__ == "__main__":
    unittest.main()
