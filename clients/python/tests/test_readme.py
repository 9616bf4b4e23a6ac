"""The README's Python example ("From Python"), run as written on a real mount: it claims a
counter, presents a file (saving before a read, refusing its deletion) and prints a folder's
events."""

from __future__ import annotations

import os
import re
import sys
import unittest

from mounts import Child, MountTestCase, wait_for

README = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "README.md")


def example() -> str:
    with open(README) as readme:
        text = readme.read()
    section = text[text.index("## From Python"):]
    found = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert found, "no Python example in README's From Python"
    return found.group(1)


@unittest.skipUnless(os.path.exists(README), "the repository's README is not beside the package")
class ReadmeTests(MountTestCase):
    def test_the_readme_example_works(self) -> None:
        os.mkdir(self.path("docs"))
        with open(self.path("notes.txt"), "w") as notes:
            notes.write("notes\n")
        script = os.path.join(self.mount.root, "example.py")
        with open(script, "w") as file:
            file.write(example().replace("/mnt/shared", self.mnt))
        runner = Child([sys.executable, script], os.path.join(self.mount.root, "example.out"))
        self.addCleanup(runner.kill)
        connection = self.connect()
        self.wait_for_status(connection, "the example's subscription", lambda status: bool(status.subscribers))
        with open(self.path("counter")) as counter:
            self.assertEqual(counter.read(), "1\n")
        self.assertEqual(self.shell("cat notes.txt").stdout, "notes\n")
        refused = self.shell("rm notes.txt", check=False)
        self.assertIn("Device or resource busy", refused.stderr)
        self.shell("echo x > docs/a && mv docs/a docs/b")
        wait_for("the example's events", lambda: "moved /docs/a mv" in runner.output)
        lines = runner.lines
        self.assertEqual(lines[0], "saving /notes.txt")
        self.assertEqual([line.split(" ", 1)[1] for line in lines[1:]],
                         ["created /docs/a sh", "changed /docs/a sh", "moved /docs/a mv"])


if __name__ == "__main__":
    unittest.main()
