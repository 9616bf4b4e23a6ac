import os
from multiprocessing import Process, Queue
SIZE = 16 << 20
def writer():
    for version in range(200):
        with open('big', 'wb') as f:
            chunk = bytes([version % 251 + 1]) * (1 << 20)
            for _ in range(16): f.write(chunk)
def reader(results):
    reads = torn = 0
    while not os.path.exists('done'):
        with open('big', 'rb') as f: data = f.read()
        reads += 1
        if len(data) != SIZE or data.count(data[:1]) != SIZE: torn += 1
    results.put((reads, torn))
with open('big', 'wb') as f: f.write(b'\x01' * SIZE)
results = Queue()
readers = [Process(target=reader, args=(results,)) for _ in range(4)]
for r in readers: r.start()
w = Process(target=writer); w.start(); w.join()
open('done', 'w').close()
totals = [results.get() for _ in readers]
for r in readers: r.join()
print(sum(t[0] for t in totals), sum(t[1] for t in totals))
