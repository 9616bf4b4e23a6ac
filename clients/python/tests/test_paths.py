"""Paths through the Python client: found from any path in the mount, as the Swift client
finds them (Sources/CoordFSClient/Locate.swift), and names that are not UTF-8 given back as
their exact bytes (NameBytesTests.eventsWatchAndTheClientLibraryGiveTheBytesBack)."""

from __future__ import annotations

import os
import unittest

import coordfs
from mounts import MountTestCase

#: `d\xFF`, the directory the tests work in, as NameBytesTests names it.
DIRECTORY = b"d\xff"


class NameBytesTests(MountTestCase):
    def test_events_give_the_names_bytes_back(self) -> None:
        """Subscribed with bytes, events carry the exact bytes; subscribed with str, paths
        decoded as `os.fsdecode` does, which `os.fsencode` turns back into the same bytes."""
        directory = os.fsencode(self.mnt) + b"/" + DIRECTORY
        os.mkdir(directory)
        # Found from the directory's own bytes.
        connection = coordfs.connect(directory)
        self.addCleanup(connection.close)
        assert connection.location is not None
        self.assertEqual(connection.location.path, b"/" + DIRECTORY)
        as_bytes = connection.events(directory)
        as_text = connection.events(os.fsdecode(directory))
        self.assertEqual((as_bytes.path, as_text.path), (b"/d\xff", "/d\udcff"))
        self.shell(r"""
            d="$(printf 'd\377')"
            printf hello > "$d/$(printf 'f\376')"
            mv "$d/$(printf 'f\376')" "$d/$(printf 'g\303\050')"
            """)
        file, moved = b"/d\xff/f\xfe", b"/d\xff/g\xc3\x28"
        for subscription in (as_bytes, as_text):
            events = [subscription.get(timeout=10) for _ in range(3)]
            self.assertTrue(all(isinstance(event, coordfs.Event) for event in events))
            seen = [(event.kind, os.fsencode(event.path), event.destination and os.fsencode(event.destination))
                    for event in events if isinstance(event, coordfs.Event)]
            self.assertEqual(seen, [("created", file, None), ("changed", file, None), ("moved", file, moved)])
        # Back to a path under the mountpoint, of the type given.
        local = connection.local_path(moved)
        self.assertEqual(local, os.fsencode(self.mnt) + moved)
        with open(local, "rb") as saved:
            self.assertEqual(saved.read(), b"hello")
        self.assertEqual(connection.local_path(os.fsdecode(moved)), os.fsdecode(local))

    def test_claims_take_the_exact_name_and_its_stand_in_stays_free(self) -> None:
        """A claim on a name that is not UTF-8 holds that name, shown with its bytes; the
        stand-in the wire shows for it (U+FFFD for each bad byte) is another name, free."""
        os.mkdir(os.fsencode(self.mnt) + b"/" + DIRECTORY)
        stand_in = DIRECTORY.decode("utf-8", "replace").encode()
        os.mkdir(os.fsencode(self.mnt) + b"/" + stand_in)
        connection = self.connect()
        name = os.fsencode(self.mnt) + b"/" + DIRECTORY + b"/f\xfe"
        with connection.claim(name, "write") as claim:
            self.assertEqual(claim.write, [b"/d\xff/f\xfe"])
            held = connection.status().held
            self.assertEqual([os.fsencode(holder.path) for holder in held], [b"/d\xff/f\xfe"])
            other = os.fsencode(self.mnt) + b"/" + stand_in + b"/f\xef\xbf\xbd"
            with connection.claim(other, "write", nonblock=True) as free:
                self.assertEqual(free.write, [b"/d\xef\xbf\xbd/f\xef\xbf\xbd"])
            # Another connection's claim of the exact name conflicts, found from the str spelling.
            with self.assertRaises(coordfs.ConflictError) as conflict:
                self.connect().claim(os.fsdecode(name), "write", nonblock=True).acquire()
            self.assertEqual([os.fsencode(b.path) for b in conflict.exception.blockers], [b"/d\xff/f\xfe"])


class LocateTests(MountTestCase):
    def test_any_path_in_the_mount_finds_its_socket_and_name(self) -> None:
        os.makedirs(self.path("d", "e"))
        root = coordfs.locate(self.mnt)
        self.assertEqual(root.path, b"/")
        self.assertTrue(root.socket.startswith("/") and root.socket.endswith(".sock"))
        self.assertEqual(coordfs.locate(self.path("d", "e")), coordfs.Location(root.socket, b"/d/e"))
        self.assertEqual(coordfs.locate(self.path("d", "e") + "/").path, b"/d/e")
        # Not there yet: found through its directory.
        self.assertEqual(coordfs.locate(self.path("d", "new.txt")).path, b"/d/new.txt")
        self.assertEqual(coordfs.locate(os.path.relpath(self.path("d", "new.txt"))).path, b"/d/new.txt")
        connection = coordfs.connect(self.path("d", "new.txt"))
        self.addCleanup(connection.close)
        self.assertEqual(connection.mountpoint, self.mnt)
        self.assertEqual(connection.local_path("/d/e"), self.path("d", "e"))
        self.assertEqual(connection.local_path("/"), self.mnt)

    def test_outside_a_mount_it_says_so(self) -> None:
        plain = os.path.join(self.mount.root, "plain")
        os.mkdir(plain)
        with self.assertRaises(coordfs.NotInMountError) as outside:
            coordfs.connect(plain)
        self.assertEqual(str(outside.exception),
                         f"{plain} is not inside a coordfs mount (it has no user.coordfs.control attribute)")
        with self.assertRaises(coordfs.NotInMountError) as missing:
            coordfs.locate(self.path("nope", "deeper"))
        self.assertIn("neither it nor its directory exists", str(missing.exception))
        connection = self.connect()
        with self.assertRaises(coordfs.NotInMountError):
            connection.claim(os.path.join(plain, "f"), "write")
        with self.assertRaises(coordfs.ConnectError) as nobody:
            coordfs.connect_socket(os.path.join(self.mount.root, "nobody.sock"))
        self.assertIn("No such file", str(nobody.exception))


if __name__ == "__main__":
    unittest.main()
