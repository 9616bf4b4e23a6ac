import os
for i in range(8):
    data = open('f%d' % i, 'rb').read()
    lines = set(data.splitlines())
    print(i, len(lines), len(data) % 16 == 0)
print(sorted(n for n in os.listdir('.') if n.startswith('.coordfs')))
