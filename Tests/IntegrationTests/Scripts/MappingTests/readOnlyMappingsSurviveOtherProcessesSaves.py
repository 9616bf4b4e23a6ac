from mapped_reader import *
with open('f', 'wb') as f: f.write(b'A' * 8192)
reader = start_reader('f')
print(ask(reader, 'map'))
save('f', b'B' * 4096)
print(ask(reader, 'shorter'))
save('f', b'C' * 16384)
print(ask(reader, 'longer'))
print('others read', set(cat('f')), len(cat('f')))
late = start_reader('f')
print('late', ask(late, 'map peek'))
reader.stdin.close(); reader.wait()
# The last older reader's release (the kernel sends it after its exit) drops the kernel's
# pages. Until then the late reader's mapping ends where the older version does (a page
# filled short sets the kernel's one size), and a look past that end would kill it: new
# readers, which may die, look first.
wait_until("the older reader's release", lambda: a_new_mapping_shows('f', 'map C 16384'))
print('late', ask(late, 'alone stat'))
late.stdin.close(); late.wait()
# A reader opened while a save is pending maps the file.
writer = subprocess.Popen([sys.executable, '-c', "import os, sys; fd = os.open('f', os.O_WRONLY | os.O_TRUNC); os.write(fd, b'D' * 8192); print(flush=True); sys.stdin.readline(); os.close(fd)"],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
writer.stdout.readline()
during = start_reader('f')
print('during', ask(during, 'map'))
writer.stdin.write('\n'); writer.stdin.flush(); writer.wait()
wait_until_released('/f')
print('during', ask(during, 'committed'))
during.stdin.close(); during.wait()
print('others read', set(cat('f')), len(cat('f')))
# The kernel keeps one size per file, which a stat sets: after a save that made the
# file shorter, a stat cuts an older reader's mapping there.
reader = start_reader('f')
print(ask(reader, 'map'))
save('f', b'E' * 4096)
print(ask(reader, 'shorter'))
subprocess.run(['stat', 'f'], capture_output=True)
print(ask(reader, 'stat'))
