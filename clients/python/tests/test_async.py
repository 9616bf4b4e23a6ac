"""The Python client from asyncio: `aconnect`, events with `async for` over `aevents` in its
three forms, `aget`, and `astatus` (claims and presenters have their async cases beside
their sync ones)."""

from __future__ import annotations

import asyncio
import unittest

import coordfs
from mounts import MountTestCase


class AsyncEventTests(MountTestCase):
    async def changes(self, script: str) -> None:
        await asyncio.get_running_loop().run_in_executor(None, lambda: self.shell(script))

    def test_async_for_gives_the_events_in_order(self) -> None:
        async def main() -> list[str]:
            connection = await coordfs.aconnect(self.mnt)
            seen = []
            async with connection, connection.aevents(self.mnt) as events:
                await self.changes("echo x > a && mv a b && rm b && mkdir end")
                async for item in events:
                    assert isinstance(item, coordfs.Event)
                    seen.append(f"{item.kind} {item.path}{' ' + item.destination if item.destination else ''}")
                    if item.path == "/end":
                        break
            return seen

        self.assertEqual(asyncio.run(main()), ["created /a", "changed /a", "moved /a /b", "deleted /b", "created /end"])

    def test_awaited_and_directly_iterated_subscriptions(self) -> None:
        async def main() -> None:
            connection = await coordfs.aconnect(self.mnt)
            async with connection:
                events = await connection.aevents(self.mnt)
                with self.assertRaises(TimeoutError):
                    await events.aget(timeout=0.1)
                await self.changes("mkdir one")
                first = await events.aget(timeout=10)
                assert isinstance(first, coordfs.Event)
                self.assertEqual(first.path, "/one")
                await events.aclose()
                self.assertEqual([item async for item in events], [])

                async def first_of(pending: coordfs.PendingSubscription[str]) -> coordfs.Item[str]:
                    async for item in pending:
                        return item
                    raise AssertionError("no event")

                reader = asyncio.ensure_future(first_of(connection.aevents(self.mnt)))
                while not (await connection.astatus()).subscribers:
                    await asyncio.sleep(0.02)
                await self.changes("mkdir two")
                second = await asyncio.wait_for(reader, 10)
                assert isinstance(second, coordfs.Event)
                self.assertEqual(second.path, "/two")

        asyncio.run(main())


if __name__ == "__main__":
    unittest.main()
