"""Holds a claim until told: `holder.py read|write PATH`.

Prints `held CLAIM` once the claim is held, then reads one line: `raise` raises inside the
claim's `with` block (the block's exception is caught outside it, `raised` printed), anything
else leaves it normally. Then prints `out` and stays connected until its standard input ends
or it is killed: a claim still held after `out` was not released by the block. Interrupted
(SIGINT) while it waits for the claim, it prints `interrupted` and stays connected likewise.
"""

import sys

import coordfs

mode, path = sys.argv[1], sys.argv[2]
assert mode in ("read", "write")
connection = coordfs.connect(path, client="holder")
try:
    with connection.claim(path, "read" if mode == "read" else "write") as claim:
        print("held", claim.id, flush=True)
        if sys.stdin.readline().strip() == "raise":
            raise RuntimeError("the work in the block failed")
except RuntimeError as error:
    print("raised", error, flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
print("out", flush=True)
sys.stdin.readline()
