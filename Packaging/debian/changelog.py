#!/usr/bin/env python3
"""CHANGELOG.md in the form of a Debian changelog (deb-changelog(5)), for Scripts/package.

    changelog.py CHANGELOG.md VERSION MAINTAINER

Each `## VERSION (YYYY-MM-DD)` heading becomes an entry; its paragraphs and `- ` items
become `*` items wrapped at 78 columns. Exits 1 when the newest entry is not VERSION, so a
package never carries a version its changelog does not describe.
"""

import datetime
import re
import sys
import textwrap

HEADING = re.compile(r"^## (\S+) \((\d{4}-\d{2}-\d{2})\)\s*$")


def entries(markdown: str) -> list[tuple[str, datetime.date, list[str]]]:
    """(version, date, items) per release, newest first, as the file lists them."""
    found: list[tuple[str, datetime.date, list[str]]] = []
    item: list[str] = []

    def close_item() -> None:
        if item and found:
            found[-1][2].append(" ".join(item))
        item.clear()

    for line in markdown.splitlines():
        heading = HEADING.match(line)
        if heading:
            close_item()
            found.append((heading[1], datetime.date.fromisoformat(heading[2]), []))
        elif not found:
            continue
        elif not line.strip():
            close_item()
        elif line.startswith("- "):
            close_item()
            item.append(line[2:].strip())
        else:
            item.append(line.strip())
    close_item()
    return found


def main() -> int:
    path, version, maintainer = sys.argv[1:4]
    with open(path, encoding="utf-8") as file:
        releases = entries(file.read())
    if not releases or releases[0][0] != version:
        newest = releases[0][0] if releases else "none"
        print(f"changelog.py: the program says {version}, but the newest entry of {path} is {newest}: "
              f"add a '## {version} (YYYY-MM-DD)' entry", file=sys.stderr)
        return 1
    out = []
    for number, date, items in releases:
        out.append(f"coordfs ({number}) unstable; urgency=medium\n")
        for text in items:
            out.append(textwrap.fill(text.replace("`", ""), width=78, initial_indent="  * ",
                                     subsequent_indent="    ", break_on_hyphens=False))
        stamp = datetime.datetime.combine(date, datetime.time(12), datetime.timezone.utc)
        out.append(f"\n -- {maintainer}  {stamp.strftime('%a, %d %b %Y %H:%M:%S %z')}\n")
    sys.stdout.write("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
