"""Reads FILE whole until STOPFILE exists; every read must be one complete version (256 KiB
of one letter). Prints the reads, the versions seen and the torn reads, as JSON."""
from coordtest import *

path, stop = sys.argv[1], sys.argv[2]
reads, torn, seen = 0, [], set()
while not os.path.exists(stop) or reads == 0:
    data = content(path)
    reads += 1
    letters = set(data)
    if len(data) != 262144 or len(letters) != 1:
        torn.append({'size': len(data), 'letters': ''.join(sorted(chr(c) for c in letters))})
    else:
        seen.add(chr(data[0]))
print(json.dumps({'reads': reads, 'versions': len(seen), 'torn': torn[:5], 'tornCount': len(torn)}))
