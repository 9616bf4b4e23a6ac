"""Names as hex: scripts print bytes so that both transcripts are plain text."""
import os
h = lambda b: b.hex()
def listing(directory=b'.'):
    return ' '.join(h(n) for n in sorted(os.listdir(directory)))
