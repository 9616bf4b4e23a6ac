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
/// Names the calling thread (and the threads it starts later) for ps, top and pgrep
/// (prctl(PR_SET_NAME); at most 15 bytes are kept); 0 or -1 with errno.
int csys_set_thread_name(const char *name);
/// A descriptor that turns readable when process `pid` ends (pidfd_open(2), Linux 5.3); -1 with errno.
int csys_pidfd_open(int pid);
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

/// flock(2) with LOCK_EX | LOCK_NB (Swift sees `flock` as the struct of fcntl's locks).
int csys_lock_exclusively_if_free(int fd);

/// Makes `dest_fd` share `src_fd`'s extents (ioctl FICLONE, a reflink); 0 or -1 with errno.
/// A wrapper because ioctl is variadic, which Swift cannot call.
int csys_ficlone(int dest_fd, int src_fd);

/// Gives the calling thread a file creation mask of its own: unshare(2) with CLONE_FS, once
/// per thread (the flag is thread-local, which is why this is C). CLONE_FS also unshares the
/// working and root directory: a later chdir or chroot would not reach threads that ran this.
/// Returns 0, or -1 with errno; after one refusal (a seccomp filter, say) no thread tries
/// again and every call fails with that errno.
int csys_unshare_fs_once(void);

// The watch of the backing: inotify, fanotify with directory-and-name records, and an eventfd
// to wake the thread that reads them. Their records are parsed in Swift from these layouts:
//   inotify_event: i32 wd, u32 mask, u32 cookie, u32 len, then len bytes of NUL-padded name;
//   fanotify_event_metadata: u32 event_len, u8 vers, u8 reserved, u16 metadata_len, u64 mask,
//     i32 fd, i32 pid (24 bytes), then info records: u8 info_type, u8 pad, u16 len, and for the
//     fid kinds an 8-byte fsid, a struct file_handle (u32 handle_bytes, i32 handle_type,
//     handle_bytes bytes) and, for the name kinds, a NUL-terminated name.
enum {
    CSYS_IN_MODIFY = 0x2, CSYS_IN_ATTRIB = 0x4, CSYS_IN_MOVED_FROM = 0x40, CSYS_IN_MOVED_TO = 0x80,
    CSYS_IN_CREATE = 0x100, CSYS_IN_DELETE = 0x200, CSYS_IN_DELETE_SELF = 0x400, CSYS_IN_MOVE_SELF = 0x800,
    CSYS_IN_UNMOUNT = 0x2000, CSYS_IN_Q_OVERFLOW = 0x4000, CSYS_IN_IGNORED = 0x8000,
    CSYS_IN_ONLYDIR = 0x01000000, CSYS_IN_DONT_FOLLOW = 0x02000000, CSYS_IN_EXCL_UNLINK = 0x04000000,
    CSYS_IN_ISDIR = 0x40000000,
    CSYS_IN_CLOEXEC = 02000000, CSYS_IN_NONBLOCK = 04000,
    CSYS_INOTIFY_EVENT_SIZE = 16,

    CSYS_FAN_MODIFY = 0x2, CSYS_FAN_ATTRIB = 0x4, CSYS_FAN_MOVED_FROM = 0x40, CSYS_FAN_MOVED_TO = 0x80,
    CSYS_FAN_CREATE = 0x100, CSYS_FAN_DELETE = 0x200, CSYS_FAN_DELETE_SELF = 0x400, CSYS_FAN_MOVE_SELF = 0x800,
    CSYS_FAN_Q_OVERFLOW = 0x4000, CSYS_FAN_EVENT_ON_CHILD = 0x08000000, CSYS_FAN_RENAME = 0x10000000,
    CSYS_FAN_ONDIR = 0x40000000,
    CSYS_FAN_CLOEXEC = 0x1, CSYS_FAN_NONBLOCK = 0x2, CSYS_FAN_CLASS_NOTIF = 0,
    CSYS_FAN_REPORT_FID = 0x200, CSYS_FAN_REPORT_DIR_FID = 0x400, CSYS_FAN_REPORT_NAME = 0x800,
    CSYS_FAN_REPORT_TARGET_FID = 0x1000,
    CSYS_FAN_MARK_ADD = 0x1, CSYS_FAN_MARK_REMOVE = 0x2, CSYS_FAN_MARK_DONT_FOLLOW = 0x4,
    CSYS_FAN_MARK_ONLYDIR = 0x8, CSYS_FAN_MARK_INODE = 0,
    CSYS_FAN_EVENT_METADATA_LEN = 24, CSYS_FANOTIFY_METADATA_VERSION = 3,
    CSYS_FAN_EVENT_INFO_TYPE_FID = 1, CSYS_FAN_EVENT_INFO_TYPE_DFID_NAME = 2, CSYS_FAN_EVENT_INFO_TYPE_DFID = 3,
    CSYS_FAN_EVENT_INFO_TYPE_OLD_DFID_NAME = 10, CSYS_FAN_EVENT_INFO_TYPE_NEW_DFID_NAME = 12,
    CSYS_MAX_HANDLE_SZ = 128,

    CSYS_EFD_CLOEXEC = 02000000, CSYS_EFD_NONBLOCK = 04000,
};

int csys_inotify_init1(int flags);
int csys_inotify_add_watch(int fd, const char *path, uint32_t mask);
int csys_inotify_rm_watch(int fd, int wd);
int csys_fanotify_init(unsigned int flags, unsigned int event_f_flags);
int csys_fanotify_mark(int fanotify_fd, unsigned int flags, uint64_t mask, int dirfd, const char *path);
/// name_to_handle_at(2): `handle` points to a struct file_handle with room for
/// CSYS_MAX_HANDLE_SZ bytes (8 + 128 bytes in all), its handle_bytes set by the callee.
int csys_name_to_handle_at(int dirfd, const char *path, void *handle, int *mount_id, int flags);
/// open_by_handle_at(2), `handle` laid out as for csys_name_to_handle_at (handle_bytes set).
int csys_open_by_handle_at(int mount_fd, void *handle, int flags);
int csys_eventfd(unsigned int initval, int flags);
/// fstatfs(2)'s f_fsid for `fd`, the filesystem id fanotify's records carry; 0 or -1 with errno.
int csys_filesystem_id(int fd, uint64_t *fsid);

#endif
