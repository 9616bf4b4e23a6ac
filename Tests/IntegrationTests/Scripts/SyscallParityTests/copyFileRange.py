from coordtest import *
data = bytes(range(256)) * 400
write('src', data)
s = os.open('src', os.O_RDONLY)
d = os.open('dst', os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
total = 0
while total < 50000:
    n = os.copy_file_range(s, d, 50000 - total, 1000 + total, 10 + total)
    if n == 0: break
    total += n
print(total, os.fstat(d).st_size, os.stat('dst').st_size)
copied = content('dst')
print(copied[:10] == bytes(10), copied[10:] == data[1000:51000])
os.lseek(s, 100, os.SEEK_SET); os.lseek(d, 0, os.SEEK_END)
print('with positions', os.copy_file_range(s, d, 300), os.lseek(s, 0, os.SEEK_CUR), os.lseek(d, 0, os.SEEK_CUR))
print(content('dst')[50010:] == data[100:400], os.stat('dst').st_size)
print('past the end', os.copy_file_range(s, d, 100, 200000, 0))
both = os.open('src', os.O_RDWR)
t('overlapping in one file', os.copy_file_range, both, both, 1000, 0, 500)
t('within one file', os.copy_file_range, both, both, 1000, 0, 2000)
print(content('src')[2000:3000] == data[0:1000], len(content('src')))
t('from a write-only fd', os.copy_file_range, d, both, 10, 0, 0)
t('to a read-only fd', os.copy_file_range, both, s, 10, 0, 0)
for fd in (s, d, both): os.close(fd)
print(subprocess.run(['cp', '--reflink=auto', 'src', 'copy']).returncode, content('copy') == content('src'))
# The writer lists the directory of a file it rewrites: the listing's entries must not set the
# kernel's size of the file back to the committed one under its descriptor (the copy would
# then find nothing to copy, and the file would end at the wrong size).
os.mkdir('x'); write('x/f', b'')
w = os.open('x/f', os.O_RDWR)
os.write(w, b'a' * 5056); os.ftruncate(w, 3000)
os.listdir('x')
t('after a listing, overlapping', os.copy_file_range, w, w, 5000, 0, 100)
print('after a listing', os.copy_file_range(w, w, 5000, 0, 3000), os.lseek(w, 0, os.SEEK_END))
os.close(w)
print(os.stat('x/f').st_size)
