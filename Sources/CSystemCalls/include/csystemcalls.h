// Linux system calls and constants that Swift's Glibc module leaves out (they sit behind
// _GNU_SOURCE). The wrappers are compiled in csystemcalls.c, where _GNU_SOURCE is defined,
// and declared here with plain types only.
#ifndef CSYSTEMCALLS_H
#define CSYSTEMCALLS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum {
    CSYS_AT_EMPTY_PATH = 0x1000,
    CSYS_RENAME_NOREPLACE = 1,
    CSYS_RENAME_EXCHANGE = 2,
    CSYS_RENAME_WHITEOUT = 4,
    CSYS_O_PATH = 010000000,
    CSYS_O_DIRECT = 040000,
    CSYS_O_NOATIME = 01000000,
    CSYS_O_TMPFILE = 020200000,
    CSYS_FALLOC_FL_KEEP_SIZE = 1,
    CSYS_FALLOC_FL_PUNCH_HOLE = 2,
    CSYS_FALLOC_FL_ZERO_RANGE = 0x10,
    CSYS_SEEK_DATA = 3,
    CSYS_SEEK_HOLE = 4,
};
#define CSYS_UTIME_NOW 1073741823L
#define CSYS_UTIME_OMIT 1073741822L

/// Closes every descriptor from `first` on (close_range(2)); 0 or -1 with errno.
int csys_close_from(unsigned int first);
int csys_renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags);
int csys_fallocate(int fd, int mode, off_t offset, off_t length);
ssize_t csys_copy_file_range(int fd_in, off_t *off_in, int fd_out, off_t *off_out, size_t length, unsigned int flags);

ssize_t csys_getxattr(const char *path, const char *name, void *value, size_t size, int follow);
int csys_setxattr(const char *path, const char *name, const void *value, size_t size, int flags, int follow);
ssize_t csys_listxattr(const char *path, char *list, size_t size, int follow);
int csys_removexattr(const char *path, const char *name, int follow);

// The same on an open descriptor (not O_PATH: those carry no extended attributes).
ssize_t csys_fgetxattr(int fd, const char *name, void *value, size_t size);
int csys_fsetxattr(int fd, const char *name, const void *value, size_t size, int flags);
ssize_t csys_flistxattr(int fd, char *list, size_t size);
int csys_fremovexattr(int fd, const char *name);

/// Makes `dest_fd` share `src_fd`'s extents (ioctl FICLONE, a reflink); 0 or -1 with errno.
/// A wrapper because ioctl is variadic, which Swift cannot call.
int csys_ficlone(int dest_fd, int src_fd);

/// Gives the calling thread a file creation mask of its own: unshare(2) with CLONE_FS, once
/// per thread (the flag is thread-local, which is why this is C). CLONE_FS also unshares the
/// working and root directory: a later chdir or chroot would not reach threads that ran this.
/// Returns 0, or -1 with errno; after one refusal (a seccomp filter, say) no thread tries
/// again and every call fails with that errno.
int csys_unshare_fs_once(void);

#endif
