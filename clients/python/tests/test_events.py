"""Events through the Python client: the exact stream of a shell script (the scenario of
ControlSocketTests.eventsOfAShellScriptComeExactlyInOrderWithTheirOrigins), replay with
`since` and the `Resync` marker, the `Overflow` marker of a reader that fell behind, and
the end of a subscription."""

from __future__ import annotations

import os
import threading
import unittest
from typing import Any

import coordfs
from mounts import MountTestCase, wait_for


def describe(event: coordfs.Event[Any]) -> str:
    """An event as one comparable line, as ControlSocketTests.describe writes it."""
    text = f"{event.kind} {os.fsdecode(event.path)}"
    if event.destination is not None:
        text += f" to {os.fsdecode(event.destination)}"
    text += " dir" if event.directory else " file"
    text += f" by {event.origin.process} {event.origin.pid}"
    if event.origin.uid != 0:
        text += f" uid {event.origin.uid}"
    if event.size is not None:
        text += f" size {event.size}"
    return text


def write(path: str, text: str) -> None:
    """One save: an open, a write, a close (one event)."""
    with open(path, "w") as file:
        file.write(text)


def pids(output: str) -> dict[str, int]:
    """The pids a script printed as lines "STEP PID"."""
    found = {}
    for line in output.splitlines():
        words = line.split(" ")
        if len(words) == 2 and words[1].isdigit():
            found[words[0]] = int(words[1])
    return found


def events_until(subscription: coordfs.Subscription[str], last: str, within: float = 10) -> list[coordfs.Event[str]]:
    """The events up to the first whose description begins with `last`; fails on a marker."""
    seen: list[coordfs.Event[str]] = []
    while not seen or not describe(seen[-1]).startswith(last):
        item = subscription.get(timeout=within)
        if not isinstance(item, coordfs.Event):
            raise AssertionError(f"a marker among the events: {item}")
        seen.append(item)
    return seen


class EventTests(MountTestCase):
    def test_events_of_a_shell_script_come_exactly_in_order_with_their_origins(self) -> None:
        """One `sh` changes things with builtins and with tools it runs, printing each tool's
        pid: every event names the process that made the change, in order, with consecutive
        sequence numbers and the sizes of the Swift test."""
        connection = self.connect()
        with connection.events(self.mnt) as subscription:
            self.assertEqual(subscription.path, "/")
            start = subscription.sequence
            result = self.shell("""
                set -e
                echo "sh $$"
                echo one > a
                echo more >> a
                mv a b & echo "mv $!"; wait $!
                mkdir d & echo "mkdir $!"; wait $!
                echo x > d/f
                mv d e & echo "mv-dir $!"; wait $!
                chmod 600 b & echo "chmod $!"; wait $!
                : > b
                rm b & echo "rm $!"; wait $!
                rm e/f & echo "rm-inner $!"; wait $!
                rmdir e & echo "rmdir $!"; wait $!
                mkdir end & echo "mkdir-end $!"; wait $!
                """)
            self.assertEqual(result.stderr, "")
            steps = pids(result.stdout)
            sh = steps["sh"]
            expected = [
                f"created /a file by sh {sh} size 0",
                f"changed /a file by sh {sh} size 4",
                f"changed /a file by sh {sh} size 9",
                f"moved /a to /b file by mv {steps['mv']} size 9",
                f"created /d dir by mkdir {steps['mkdir']}",
                f"created /d/f file by sh {sh} size 0",
                f"changed /d/f file by sh {sh} size 2",
                f"moved /d to /e dir by mv {steps['mv-dir']}",
                f"attributes /b file by chmod {steps['chmod']} size 9",
                f"changed /b file by sh {sh} size 0",
                f"deleted /b file by rm {steps['rm']}",
                f"deleted /e/f file by rm {steps['rm-inner']}",
                f"deleted /e dir by rmdir {steps['rmdir']}",
                f"created /end dir by mkdir {steps['mkdir-end']}",
            ]
            seen = events_until(subscription, "created /end ")
            self.assertEqual([describe(event) for event in seen], expected)
            self.assertEqual([event.sequence for event in seen], list(range(start + 1, start + 1 + len(expected))))
            self.assertTrue(all(event.time > 0 and not event.origin.outside for event in seen))

    def test_a_file_subscription_and_a_kind_filter(self) -> None:
        """A subscription to one file sees only that file; one with `kinds` only those kinds;
        a directory's subscription without `recursive` sees its entries, not deeper ones."""
        os.makedirs(self.path("d", "sub"))
        for name in ("f", "g"):
            write(self.path("d", name), "1")
        connection = self.connect()
        only_f = connection.events(self.path("d", "f"))
        created = connection.events(self.path("d"), kinds=["created"])
        shallow = connection.events(self.path("d"), recursive=False)
        for name in ("g", "sub/deep", "new", "f"):
            write(self.path("d", name), "2")
        self.assertEqual([f"{e.kind} {e.path}" for e in events_until(only_f, "changed /d/f")], ["changed /d/f"])
        self.assertEqual([f"{e.kind} {e.path}" for e in events_until(created, "created /d/new")],
                         ["created /d/sub/deep", "created /d/new"])
        self.assertEqual([f"{e.kind} {e.path}" for e in events_until(shallow, "changed /d/f")],
                         ["changed /d/g", "created /d/new", "changed /d/f"])
        for subscription in (only_f, created, shallow):
            subscription.close()
            with self.assertRaises(StopIteration):
                next(subscription)

    def test_a_reader_that_falls_behind_gets_one_overflow_with_the_exact_range(self) -> None:
        """At most `buffer_size` items wait in the library; the rest are dropped and one
        `Overflow` says which, after what was kept; live events follow it."""
        connection = self.connect()
        subscription = connection.events(self.mnt, buffer_size=4)
        start = subscription.sequence
        self.shell("for i in $(seq 1 20); do mkdir d$i; done")
        self.wait_for_status(connection, "all 20 events delivered to this connection",
                             lambda status: status.subscribers[0].delivered == 20)
        items = [subscription.get(timeout=10) for _ in range(5)]
        kept = [item.sequence for item in items[:4] if isinstance(item, coordfs.Event)]
        self.assertEqual(kept, list(range(start + 1, start + 5)))
        self.assertEqual(items[4], coordfs.Overflow(dropped=16, first=start + 5, last=start + 20))
        self.shell("mkdir after")
        after = subscription.get(timeout=10)
        self.assertIsInstance(after, coordfs.Event)
        assert isinstance(after, coordfs.Event)
        self.assertEqual((after.sequence, after.path), (start + 21, "/after"))

    def test_iteration_ends_when_the_subscription_is_closed_from_another_thread(self) -> None:
        connection = self.connect()
        subscription = connection.events(self.mnt)
        seen: list[coordfs.Item[str]] = []
        reader = threading.Thread(target=lambda: seen.extend(subscription))
        reader.start()
        self.shell("mkdir one")
        wait_for("the reader to get the event", lambda: seen)
        subscription.close()
        reader.join(10)
        self.assertFalse(reader.is_alive())
        self.assertEqual([f"{item.kind} {item.path}" for item in seen if isinstance(item, coordfs.Event)],
                         ["created /one"])

    def test_the_end_of_the_mount_ends_subscriptions_with_an_error(self) -> None:
        """When the mount stops, iteration raises `ConnectionClosedError` saying why, and
        requests on the connection raise it too."""
        connection = self.connect()
        subscription = connection.events(self.mnt)
        problems = self.mount.unmount()
        self.assertEqual(problems, [])
        with self.assertRaises(coordfs.ConnectionClosedError) as ended:
            next(subscription)
        self.assertIn("stopping", str(ended.exception))
        with self.assertRaises(coordfs.ConnectionClosedError):
            connection.status()
        self.assertTrue(connection.closed)


class ReplayTests(MountTestCase):
    mount_options = ("--event-history", "4")

    def test_since_replays_what_was_missed_and_a_resync_says_when_it_cannot(self) -> None:
        connection = self.connect()
        first = connection.status().sequence
        self.shell("for i in 1 2 3 4 5 6; do mkdir d$i; done")
        # The history keeps the last 4: after first + 3 it still reaches back.
        replay = connection.events(self.mnt, since=first + 3)
        self.assertFalse(replay.resync)
        self.assertEqual(replay.replayed, 3)
        self.assertEqual([f"{e.kind} {e.path}" for e in events_until(replay, "created /d6")],
                         ["created /d4", "created /d5", "created /d6"])
        # From the first it does not: a Resync first, then live events.
        late = connection.events(self.mnt, since=first)
        self.assertTrue(late.resync)
        self.assertEqual(late.get(timeout=5), coordfs.Resync(since=first, sequence=first + 6))
        self.shell("mkdir live")
        item = late.get(timeout=10)
        assert isinstance(item, coordfs.Event)
        self.assertEqual((item.sequence, item.path), (first + 7, "/live"))
        # A number from an earlier run of the mount is just as much a resync.
        future = connection.events(self.mnt, since=first + 1000)
        self.assertTrue(future.resync)


if __name__ == "__main__":
    unittest.main()
