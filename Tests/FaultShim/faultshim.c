// A backing that fails on demand, for FaultTests only: preloaded into the coordfs daemon
// (LD_PRELOAD), it makes chosen system calls on files under COORDFS_FAULT_ROOT fail with a
// chosen errno, as a full disk, an exhausted quota or a failing device would.
//
// COORDFS_FAULT_CONTROL names a file of rules, one per line, read again whenever it changes:
//
//     OP ERRNO SKIP COUNT
//
// OP is write (write, pwrite, writev, pwritev), fsync (fsync, fdatasync), rename (rename,
// renameat, renameat2), link (link, linkat), fallocate, copy (copy_file_range) or truncate
// (ftruncate); ERRNO is EIO, ENOSPC or EDQUOT. The first SKIP matching calls go
// through, the next COUNT fail. An empty file fails nothing. Every call of those families
// on a path outside the root, and every other call, goes through untouched.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

enum operation { OP_WRITE, OP_FSYNC, OP_RENAME, OP_LINK, OP_FALLOCATE, OP_COPY, OP_TRUNCATE, OP_COUNT };
static const char *const operation_names[OP_COUNT] = { "write", "fsync", "rename", "link", "fallocate", "copy", "truncate" };

struct rule { int error; long skip; long count; long seen; };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct rule rules[OP_COUNT];
static struct stat control_seen;

static int errno_named(const char *name) {
    if (strcmp(name, "EIO") == 0) return EIO;
    if (strcmp(name, "ENOSPC") == 0) return ENOSPC;
    if (strcmp(name, "EDQUOT") == 0) return EDQUOT;
    return 0;
}

// Rereads the rules when the control file changed (its inode, size or change time). Under `lock`.
static void reload_rules(void) {
    const char *path = getenv("COORDFS_FAULT_CONTROL");
    struct stat now;
    if (path == NULL || stat(path, &now) != 0) {
        memset(rules, 0, sizeof rules);
        memset(&control_seen, 0, sizeof control_seen);
        return;
    }
    if (now.st_ino == control_seen.st_ino && now.st_size == control_seen.st_size
        && now.st_ctim.tv_sec == control_seen.st_ctim.tv_sec && now.st_ctim.tv_nsec == control_seen.st_ctim.tv_nsec) return;
    control_seen = now;
    memset(rules, 0, sizeof rules);
    FILE *file = fopen(path, "re");
    if (file == NULL) return;
    char name[32], error[32];
    long skip, count;
    while (fscanf(file, "%31s %31s %ld %ld", name, error, &skip, &count) == 4) {
        for (int op = 0; op < OP_COUNT; op++) {
            if (strcmp(name, operation_names[op]) == 0) {
                rules[op] = (struct rule){ .error = errno_named(error), .skip = skip, .count = count, .seen = 0 };
            }
        }
    }
    fclose(file);
}

static int under_root(const char *path) {
    const char *root = getenv("COORDFS_FAULT_ROOT");
    if (root == NULL || path == NULL) return 0;
    size_t length = strlen(root);
    return strncmp(path, root, length) == 0 && (path[length] == '/' || path[length] == '\0');
}

// Where `descriptor` points (an unnamed file shows as "DIR/#INODE (deleted)"; still under DIR).
static int descriptor_under_root(int descriptor) {
    char link[64], target[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", descriptor);
    ssize_t length = readlink(link, target, sizeof target - 1);
    if (length < 0) return 0;
    target[length] = '\0';
    return under_root(target);
}

// `name` relative to `directory` (AT_FDCWD: the working directory), as an absolute path.
static int at_path_under_root(int directory, const char *name) {
    if (name != NULL && name[0] == '/') return under_root(name);
    if (directory == AT_FDCWD) {
        char cwd[PATH_MAX];
        return getcwd(cwd, sizeof cwd) != NULL && under_root(cwd);
    }
    return descriptor_under_root(directory);
}

// Whether this call (already known to touch the root) fails, and with what.
static int should_fail(enum operation op) {
    pthread_mutex_lock(&lock);
    reload_rules();
    struct rule *rule = &rules[op];
    int error = 0;
    if (rule->error != 0) {
        rule->seen += 1;
        if (rule->seen > rule->skip && rule->seen <= rule->skip + rule->count) error = rule->error;
    }
    pthread_mutex_unlock(&lock);
    return error;
}

#define REAL(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))
#define FAIL_IF(op, touches) do { if (touches) { int failure = should_fail(op); if (failure) { errno = failure; return -1; } } } while (0)

ssize_t write(int fd, const void *buffer, size_t count) {
    FAIL_IF(OP_WRITE, descriptor_under_root(fd));
    return REAL(write)(fd, buffer, count);
}
ssize_t pwrite(int fd, const void *buffer, size_t count, off_t offset) {
    FAIL_IF(OP_WRITE, descriptor_under_root(fd));
    return REAL(pwrite)(fd, buffer, count, offset);
}
ssize_t pwrite64(int fd, const void *buffer, size_t count, off_t offset) {
    FAIL_IF(OP_WRITE, descriptor_under_root(fd));
    return REAL(pwrite64)(fd, buffer, count, offset);
}
ssize_t writev(int fd, const struct iovec *vector, int count) {
    FAIL_IF(OP_WRITE, descriptor_under_root(fd));
    return REAL(writev)(fd, vector, count);
}
ssize_t pwritev(int fd, const struct iovec *vector, int count, off_t offset) {
    FAIL_IF(OP_WRITE, descriptor_under_root(fd));
    return REAL(pwritev)(fd, vector, count, offset);
}
ssize_t pwritev2(int fd, const struct iovec *vector, int count, off_t offset, int flags) {
    FAIL_IF(OP_WRITE, descriptor_under_root(fd));
    return REAL(pwritev2)(fd, vector, count, offset, flags);
}
int fsync(int fd) {
    FAIL_IF(OP_FSYNC, descriptor_under_root(fd));
    return REAL(fsync)(fd);
}
int fdatasync(int fd) {
    FAIL_IF(OP_FSYNC, descriptor_under_root(fd));
    return REAL(fdatasync)(fd);
}
int rename(const char *from, const char *to) {
    FAIL_IF(OP_RENAME, at_path_under_root(AT_FDCWD, to));
    return REAL(rename)(from, to);
}
int renameat(int from_directory, const char *from, int to_directory, const char *to) {
    FAIL_IF(OP_RENAME, at_path_under_root(to_directory, to));
    return REAL(renameat)(from_directory, from, to_directory, to);
}
int renameat2(int from_directory, const char *from, int to_directory, const char *to, unsigned int flags) {
    FAIL_IF(OP_RENAME, at_path_under_root(to_directory, to));
    return REAL(renameat2)(from_directory, from, to_directory, to, flags);
}
int link(const char *from, const char *to) {
    FAIL_IF(OP_LINK, at_path_under_root(AT_FDCWD, to));
    return REAL(link)(from, to);
}
int linkat(int from_directory, const char *from, int to_directory, const char *to, int flags) {
    FAIL_IF(OP_LINK, at_path_under_root(to_directory, to));
    return REAL(linkat)(from_directory, from, to_directory, to, flags);
}
int fallocate(int fd, int mode, off_t offset, off_t length) {
    FAIL_IF(OP_FALLOCATE, descriptor_under_root(fd));
    return REAL(fallocate)(fd, mode, offset, length);
}
int fallocate64(int fd, int mode, off_t offset, off_t length) {
    FAIL_IF(OP_FALLOCATE, descriptor_under_root(fd));
    return REAL(fallocate64)(fd, mode, offset, length);
}
ssize_t copy_file_range(int in, off_t *in_offset, int out, off_t *out_offset, size_t length, unsigned int flags) {
    FAIL_IF(OP_COPY, descriptor_under_root(out));
    return REAL(copy_file_range)(in, in_offset, out, out_offset, length, flags);
}
int ftruncate(int fd, off_t length) {
    FAIL_IF(OP_TRUNCATE, descriptor_under_root(fd));
    return REAL(ftruncate)(fd, length);
}
int ftruncate64(int fd, off_t length) {
    FAIL_IF(OP_TRUNCATE, descriptor_under_root(fd));
    return REAL(ftruncate64)(fd, length);
}
