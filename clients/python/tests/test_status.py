"""`status()` and errors through the Python client: what status shows of this connection and
of others, and each refusal raised as an exception carrying the protocol's error code."""

from __future__ import annotations

import os
import unittest

import coordfs
from mounts import MountTestCase


class Saver(coordfs.Presenter[str]):
    def save(self, item: coordfs.PresentedItem[str]) -> None:
        pass


class StatusTests(MountTestCase):
    def test_status_shows_connections_subscriptions_presenters_and_claims(self) -> None:
        os.mkdir(self.path("docs"))
        connection = self.connect("status test")
        subscription = connection.events(self.path("docs"))
        registration = connection.present(Saver(), self.path("docs"))
        self.addCleanup(registration.stop)
        with connection.claim(self.path("counter"), "write"):
            waiter = self.child("holder", "read", self.path("counter"))
            status = self.wait_for_status(connection, "the other process waiting", lambda status: bool(status.waiting))
        self.assertGreaterEqual(status.sequence, 1)
        self.assertEqual(status.raw["server"]["name"], "coordfs")
        mine = [c for c in status.connections if c.session == connection.server.session]
        self.assertEqual([(c.client, c.pid, c.uid) for c in mine], [("status test", os.getpid(), os.getuid())])
        self.assertEqual([(s.session, s.subscription, s.path, s.recursive) for s in status.subscribers],
                         [(connection.server.session, subscription.id, "/docs", True)])
        self.assertEqual([(p.presenter, p.path, p.answers, p.pid) for p in status.presenters],
                         [(registration.id, "/docs", ["save"], os.getpid())])
        self.assertEqual([(h.path, h.mode, h.owner.kind, h.owner.session) for h in status.held],
                         [("/counter", "exclusive", "client", connection.server.session)])
        self.assertEqual([(w.paths, w.mode, w.owner.pid) for w in status.waiting], [(["/counter"], "read", waiter.pid)])
        waiter.wait_for_line("held ")
        self.assertEqual([h.owner.pid for h in connection.status().held], [waiter.pid])


class ErrorTests(MountTestCase):
    def test_refusals_raise_with_the_protocols_code(self) -> None:
        """Each refusal is a `ServerError` whose `code` is the protocol's (a subclass for the
        codes programs handle), and the connection lives on."""
        connection = self.connect()
        cases: list[tuple[str, dict[str, object], type[coordfs.ServerError], str]] = [
            ("release", {"claim": 99}, coordfs.NotFoundError, "not-found"),
            ("subscribe", {"path": "/a/../b"}, coordfs.InvalidPathError, "invalid-path"),
            ("subscribe", {"path": "/nope/x"}, coordfs.NoSuchPathError, "no-such-path"),
            ("claim", {"write": ["/x"], "wait": "soon"}, coordfs.ServerError, "bad-request"),
            ("frobnicate", {}, coordfs.ServerError, "unknown-request"),
        ]
        for op, fields, kind, code in cases:
            with self.subTest(op=op, code=code), self.assertRaises(kind) as raised:
                connection.call(op, dict(fields))
            self.assertEqual(raised.exception.code, code)
            self.assertTrue(raised.exception.message)
        # Kinds go as given (a newer mount knows more): one it does not know is the server's to refuse.
        with self.assertRaises(coordfs.ServerError) as unknown:
            connection.events(self.mnt, kinds=["created", "sneezed"])
        self.assertEqual(unknown.exception.code, "bad-request")
        self.assertEqual(coordfs.ErrorCode.NOT_FOUND, "not-found")
        self.assertEqual(connection.status().held, [])


if __name__ == "__main__":
    unittest.main()
