#define _GNU_SOURCE 1
#include "csystemcalls.h"
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/xattr.h>
#include <sys/file.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <sys/ioctl.h>
#include <linux/fs.h>
#include <stddef.h>
#include <sys/inotify.h>
#include <sys/fanotify.h>
#include <sys/eventfd.h>
#include <sys/vfs.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

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

_Static_assert(CSYS_IN_MODIFY == IN_MODIFY && CSYS_IN_ATTRIB == IN_ATTRIB, "IN_");
_Static_assert(CSYS_IN_MOVED_FROM == IN_MOVED_FROM && CSYS_IN_MOVED_TO == IN_MOVED_TO, "IN_MOVED");
_Static_assert(CSYS_IN_CREATE == IN_CREATE && CSYS_IN_DELETE == IN_DELETE, "IN_");
_Static_assert(CSYS_IN_DELETE_SELF == IN_DELETE_SELF && CSYS_IN_MOVE_SELF == IN_MOVE_SELF, "IN_");
_Static_assert(CSYS_IN_UNMOUNT == IN_UNMOUNT && CSYS_IN_Q_OVERFLOW == IN_Q_OVERFLOW && CSYS_IN_IGNORED == IN_IGNORED, "IN_");
_Static_assert(CSYS_IN_ONLYDIR == IN_ONLYDIR && CSYS_IN_DONT_FOLLOW == IN_DONT_FOLLOW, "IN_");
_Static_assert(CSYS_IN_EXCL_UNLINK == IN_EXCL_UNLINK && CSYS_IN_ISDIR == IN_ISDIR, "IN_");
_Static_assert(CSYS_IN_CLOEXEC == IN_CLOEXEC && CSYS_IN_NONBLOCK == IN_NONBLOCK, "IN_");
_Static_assert(CSYS_INOTIFY_EVENT_SIZE == sizeof(struct inotify_event), "inotify_event");
_Static_assert(offsetof(struct inotify_event, cookie) == 8 && offsetof(struct inotify_event, len) == 12, "inotify_event");
_Static_assert(CSYS_FAN_MODIFY == FAN_MODIFY && CSYS_FAN_ATTRIB == FAN_ATTRIB, "FAN_");
_Static_assert(CSYS_FAN_MOVED_FROM == FAN_MOVED_FROM && CSYS_FAN_MOVED_TO == FAN_MOVED_TO, "FAN_");
_Static_assert(CSYS_FAN_CREATE == FAN_CREATE && CSYS_FAN_DELETE == FAN_DELETE, "FAN_");
_Static_assert(CSYS_FAN_DELETE_SELF == FAN_DELETE_SELF && CSYS_FAN_MOVE_SELF == FAN_MOVE_SELF, "FAN_");
_Static_assert(CSYS_FAN_Q_OVERFLOW == FAN_Q_OVERFLOW && CSYS_FAN_EVENT_ON_CHILD == FAN_EVENT_ON_CHILD, "FAN_");
_Static_assert(CSYS_FAN_RENAME == FAN_RENAME && CSYS_FAN_ONDIR == FAN_ONDIR, "FAN_");
_Static_assert(CSYS_FAN_CLOEXEC == FAN_CLOEXEC && CSYS_FAN_NONBLOCK == FAN_NONBLOCK && CSYS_FAN_CLASS_NOTIF == FAN_CLASS_NOTIF, "FAN_");
_Static_assert(CSYS_FAN_REPORT_FID == FAN_REPORT_FID && CSYS_FAN_REPORT_DIR_FID == FAN_REPORT_DIR_FID, "FAN_");
_Static_assert(CSYS_FAN_REPORT_NAME == FAN_REPORT_NAME && CSYS_FAN_REPORT_TARGET_FID == FAN_REPORT_TARGET_FID, "FAN_");
_Static_assert(CSYS_FAN_MARK_ADD == FAN_MARK_ADD && CSYS_FAN_MARK_REMOVE == FAN_MARK_REMOVE, "FAN_MARK_");
_Static_assert(CSYS_FAN_MARK_DONT_FOLLOW == FAN_MARK_DONT_FOLLOW && CSYS_FAN_MARK_ONLYDIR == FAN_MARK_ONLYDIR, "FAN_MARK_");
_Static_assert(CSYS_FAN_MARK_INODE == FAN_MARK_INODE, "FAN_MARK_INODE");
_Static_assert(CSYS_FAN_EVENT_METADATA_LEN == FAN_EVENT_METADATA_LEN, "fanotify_event_metadata");
_Static_assert(CSYS_FANOTIFY_METADATA_VERSION == FANOTIFY_METADATA_VERSION, "FANOTIFY_METADATA_VERSION");
_Static_assert(offsetof(struct fanotify_event_metadata, mask) == 8 && offsetof(struct fanotify_event_metadata, fd) == 16
               && offsetof(struct fanotify_event_metadata, pid) == 20, "fanotify_event_metadata");
_Static_assert(offsetof(struct fanotify_event_info_fid, fsid) == 4 && offsetof(struct fanotify_event_info_fid, handle) == 12, "fanotify_event_info_fid");
_Static_assert(CSYS_FAN_EVENT_INFO_TYPE_FID == FAN_EVENT_INFO_TYPE_FID && CSYS_FAN_EVENT_INFO_TYPE_DFID_NAME == FAN_EVENT_INFO_TYPE_DFID_NAME, "FAN_EVENT_INFO_TYPE_");
_Static_assert(CSYS_FAN_EVENT_INFO_TYPE_DFID == FAN_EVENT_INFO_TYPE_DFID, "FAN_EVENT_INFO_TYPE_DFID");
_Static_assert(CSYS_FAN_EVENT_INFO_TYPE_OLD_DFID_NAME == FAN_EVENT_INFO_TYPE_OLD_DFID_NAME
               && CSYS_FAN_EVENT_INFO_TYPE_NEW_DFID_NAME == FAN_EVENT_INFO_TYPE_NEW_DFID_NAME, "FAN_EVENT_INFO_TYPE_");
_Static_assert(CSYS_MAX_HANDLE_SZ == MAX_HANDLE_SZ, "MAX_HANDLE_SZ");
_Static_assert(sizeof(struct file_handle) == 8, "file_handle");
_Static_assert(CSYS_EFD_CLOEXEC == EFD_CLOEXEC && CSYS_EFD_NONBLOCK == EFD_NONBLOCK, "EFD_");

int csys_inotify_init1(int flags) {
    return inotify_init1(flags);
}

int csys_inotify_add_watch(int fd, const char *path, uint32_t mask) {
    return inotify_add_watch(fd, path, mask);
}

int csys_inotify_rm_watch(int fd, int wd) {
    return inotify_rm_watch(fd, wd);
}

int csys_fanotify_init(unsigned int flags, unsigned int event_f_flags) {
    return fanotify_init(flags, event_f_flags);
}

int csys_fanotify_mark(int fanotify_fd, unsigned int flags, uint64_t mask, int dirfd, const char *path) {
    return fanotify_mark(fanotify_fd, flags, mask, dirfd, path);
}

int csys_name_to_handle_at(int dirfd, const char *path, void *handle, int *mount_id, int flags) {
    ((struct file_handle *)handle)->handle_bytes = MAX_HANDLE_SZ;
    return name_to_handle_at(dirfd, path, handle, mount_id, flags);
}

int csys_open_by_handle_at(int mount_fd, void *handle, int flags) {
    return open_by_handle_at(mount_fd, handle, flags);
}

int csys_eventfd(unsigned int initval, int flags) {
    return eventfd(initval, flags);
}

int csys_filesystem_id(int fd, uint64_t *fsid) {
    struct statfs result;
    if (fstatfs(fd, &result) != 0) return -1;
    _Static_assert(sizeof(result.f_fsid) == sizeof(*fsid), "f_fsid");
    memcpy(fsid, &result.f_fsid, sizeof(*fsid));
    return 0;
}

int csys_close_from(unsigned int first) {
    return close_range(first, ~0U, 0);
}

int csys_pidfd_open(int pid) {
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    return (int)syscall(434, pid, 0); /* the number every architecture shares */
#endif
}

int csys_set_thread_name(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0UL, 0UL, 0UL);
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

int csys_lock_exclusively_if_free(int fd) {
    return flock(fd, LOCK_EX | LOCK_NB);
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
