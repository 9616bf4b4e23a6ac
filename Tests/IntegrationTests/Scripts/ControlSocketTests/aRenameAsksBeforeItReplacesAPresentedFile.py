# A rename onto a presented file: a plain rename must ask accommodate-deletion (the presenter
# refuses: EBUSY); RENAME_NOREPLACE and RENAME_EXCHANGE replace nothing, so they ask nothing.
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
def rename(flags):
    if libc.renameat2(-100, b'g', -100, b'f', flags) == 0: return 'ok'
    return errno.errorcode[ctypes.get_errno()]
print(os.getpid(), 'plain', rename(0), 'noreplace', rename(1), 'exchange', rename(2))
print(open('f').read().strip(), open('g').read().strip())
