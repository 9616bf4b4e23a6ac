#define _GNU_SOURCE 1
#include "csystemcalls.h"
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/xattr.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <sys/ioctl.h>
#include <linux/fs.h>

// The header hard-codes Linux ABI values so that Swift can see them; keep them honest.
_Static_assert(CSYS_AT_EMPTY_PATH == AT_EMPTY_PATH, "AT_EMPTY_PATH");
_Static_assert(CSYS_RENAME_NOREPLACE == RENAME_NOREPLACE, "RENAME_NOREPLACE");
_Static_assert(CSYS_RENAME_EXCHANGE == RENAME_EXCHANGE, "RENAME_EXCHANGE");
_Static_assert(CSYS_RENAME_WHITEOUT == RENAME_WHITEOUT, "RENAME_WHITEOUT");
_Static_assert(CSYS_O_PATH == O_PATH, "O_PATH");
_Static_assert(CSYS_O_DIRECT == O_DIRECT, "O_DIRECT");
_Static_assert(CSYS_O_NOATIME == O_NOATIME, "O_NOATIME");
_Static_assert(CSYS_O_TMPFILE == O_TMPFILE, "O_TMPFILE");
_Static_assert(CSYS_FALLOC_FL_KEEP_SIZE == FALLOC_FL_KEEP_SIZE, "FALLOC_FL_KEEP_SIZE");
_Static_assert(CSYS_FALLOC_FL_PUNCH_HOLE == FALLOC_FL_PUNCH_HOLE, "FALLOC_FL_PUNCH_HOLE");
_Static_assert(CSYS_FALLOC_FL_ZERO_RANGE == FALLOC_FL_ZERO_RANGE, "FALLOC_FL_ZERO_RANGE");
_Static_assert(CSYS_SEEK_DATA == SEEK_DATA, "SEEK_DATA");
_Static_assert(CSYS_SEEK_HOLE == SEEK_HOLE, "SEEK_HOLE");
_Static_assert(CSYS_UTIME_NOW == UTIME_NOW, "UTIME_NOW");
_Static_assert(CSYS_UTIME_OMIT == UTIME_OMIT, "UTIME_OMIT");

int csys_close_from(unsigned int first) {
    return close_range(first, ~0U, 0);
}

int csys_renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags) {
    return renameat2(olddirfd, oldpath, newdirfd, newpath, flags);
}

int csys_fallocate(int fd, int mode, off_t offset, off_t length) {
    return fallocate(fd, mode, offset, length);
}

ssize_t csys_copy_file_range(int fd_in, off_t *off_in, int fd_out, off_t *off_out, size_t length, unsigned int flags) {
    return copy_file_range(fd_in, off_in, fd_out, off_out, length, flags);
}

ssize_t csys_getxattr(const char *path, const char *name, void *value, size_t size, int follow) {
    return follow ? getxattr(path, name, value, size) : lgetxattr(path, name, value, size);
}

int csys_setxattr(const char *path, const char *name, const void *value, size_t size, int flags, int follow) {
    return follow ? setxattr(path, name, value, size, flags) : lsetxattr(path, name, value, size, flags);
}

ssize_t csys_listxattr(const char *path, char *list, size_t size, int follow) {
    return follow ? listxattr(path, list, size) : llistxattr(path, list, size);
}

int csys_removexattr(const char *path, const char *name, int follow) {
    return follow ? removexattr(path, name) : lremovexattr(path, name);
}

ssize_t csys_fgetxattr(int fd, const char *name, void *value, size_t size) {
    return fgetxattr(fd, name, value, size);
}

int csys_fsetxattr(int fd, const char *name, const void *value, size_t size, int flags) {
    return fsetxattr(fd, name, value, size, flags);
}

ssize_t csys_flistxattr(int fd, char *list, size_t size) {
    return flistxattr(fd, list, size);
}

int csys_fremovexattr(int fd, const char *name) {
    return fremovexattr(fd, name);
}

int csys_ficlone(int dest_fd, int src_fd) {
    return ioctl(dest_fd, FICLONE, src_fd);
}

int csys_unshare_fs_once(void) {
    static _Thread_local int unshared = 0;
    static _Atomic int refusal = 0; // the errno of the first refusal, for every thread
    if (unshared) return 0;
    int refused = refusal;
    if (refused != 0) {
        errno = refused;
        return -1;
    }
    if (unshare(CLONE_FS) != 0) {
        refusal = errno;
        return -1;
    }
    unshared = 1;
    return 0;
}
