from coordtest import *
# A database whose name matches no in-place pattern: SQLite writes its header to the first
# page, and from then on the file is the database's (in place), so a second process connects
# and writes at once while the first keeps its connection open (CPython's test_sqlite3 opens
# such files; before: the second connect waited the claim timeout, then failed).
import multiprocessing, sqlite3
def first(ready, done):
    db = sqlite3.connect('mydata')
    db.execute('create table t(x)'); db.execute("insert into t values ('first')"); db.commit()
    ready.set(); done.wait()
    print('first sees', [r[0] for r in db.execute('select x from t order by x')], flush=True)
    db.close()
ready, done = multiprocessing.Event(), multiprocessing.Event()
p = multiprocessing.Process(target=first, args=(ready, done)); p.start()
ready.wait()
began = time.monotonic()
db = sqlite3.connect('mydata', timeout=5)
db.execute("insert into t values ('second')"); db.commit()
print('second connected and wrote within 5 s', time.monotonic() - began < 5)
print('second sees', [r[0] for r in db.execute('select x from t order by x')])
done.set(); p.join()
db.close()
# Two connections of one process, a backup into a new file without a pattern, and WAL mode.
a = sqlite3.connect('plainname'); b = sqlite3.connect('plainname', timeout=5)
a.execute('create table t(x)'); a.execute('insert into t values (1)'); a.commit()
b.execute('insert into t values (2)'); b.commit()
print('two connections', [r[0] for r in a.execute('select x from t order by x')])
copy = sqlite3.connect('backupcopy'); a.backup(copy); copy.close()
print('backup', [r[0] for r in sqlite3.connect('backupcopy').execute('select x from t order by x')])
a.close(); b.close()
w = sqlite3.connect('walfile'); w.execute('pragma journal_mode=wal'); w.execute('create table t(x)'); w.execute('insert into t values (1)'); w.commit()
r = sqlite3.connect('walfile', timeout=5); r.execute('insert into t values (2)'); r.commit()
print('wal', [row[0] for row in w.execute('select x from t order by x')])
w.close(); r.close()
print('integrity', [sqlite3.connect(n).execute('pragma integrity_check').fetchone()[0] for n in ('mydata', 'plainname', 'backupcopy', 'walfile')])
