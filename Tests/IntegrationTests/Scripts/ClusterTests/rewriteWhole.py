"""Rewrites FILE whole ROUNDS times, each version 256 KiB of one letter written 16 KiB at a
time (a reader that saw a write in progress, or two versions, would see two letters)."""
from coordtest import *

path, rounds = sys.argv[1], int(sys.argv[2])
for round in range(rounds):
    letter = bytes([ord('a') + round % 26])
    with open(path, 'wb') as f:
        for _ in range(16):
            f.write(letter * 16384)
            f.flush()
print('rewrote', rounds)
