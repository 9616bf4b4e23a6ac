// A backing that fails on demand, for FaultTests only. Preloaded into the coordfs daemon
// (LD_PRELOAD), it makes chosen system calls on files under $COORDFS_FAULT_ROOT fail with a
// chosen errno, as a full disk (ENOSPC), an exhausted quota (EDQUOT) or a failing device (EIO)
// would, before the call reaches the kernel: nothing of a failed call happens.
//
// $COORDFS_FAULT_CONTROL names a file of rules, read again whenever its contents change:
//
//     OP ERRNO SKIP COUNT
//
// The next SKIP calls of OP on the root go through, the COUNT after them fail with ERRNO
// (EIO, ENOSPC or EDQUOT). OP is one of
//
//     write      write, pwrite, writev, pwritev, pwritev2 (on the descriptor)
//     fsync      fsync, fdatasync
//     rename     rename, renameat, renameat2 (on the destination's directory)
//     link       link, linkat (on the new name's directory)
//     fallocate  fallocate
//     copy       copy_file_range (on the destination)
//     truncate   ftruncate
//
// One rule per OP (a later line replaces an earlier one); lines starting with '#' are comments
// (the tests number their rewrites there, so that two rewrites never look alike). Counting
// starts again at every change. A missing or empty file fails nothing. Descriptors and paths
// outside the root (/dev/fuse, sockets, the daemon's log) are never touched. Where a
// descriptor points comes from /proc/self/fd: an unnamed file (O_TMPFILE) shows as
// "DIR/#INODE (deleted)", still under its directory.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

enum family { WRITE, FSYNC, RENAME, LINK, FALLOCATE, COPY, TRUNCATE, FAMILIES };
static const char *const family_names[FAMILIES] = { "write", "fsync", "rename", "link", "fallocate", "copy", "truncate" };

struct rule {
    int error; // 0: no rule
    long skip, count;
    long calls; // matching calls since the rule was read
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct rule rules[FAMILIES];
static char control_text[4096]; // the control file's contents when last read

static int error_named(const char *name) {
    if (strcmp(name, "EIO") == 0) return EIO;
    if (strcmp(name, "ENOSPC") == 0) return ENOSPC;
    if (strcmp(name, "EDQUOT") == 0) return EDQUOT;
    return 0;
}

// Reads the control file and, when its contents changed, takes its rules. Under `lock`. A
// file of a few lines costs an open and a read per call on the root: nothing, for tests.
static void read_rules(void) {
    char text[sizeof control_text] = "";
    const char *path = getenv("COORDFS_FAULT_CONTROL");
    int descriptor = path == NULL ? -1 : open(path, O_RDONLY | O_CLOEXEC);
    if (descriptor >= 0) {
        ssize_t length = read(descriptor, text, sizeof text - 1);
        text[length > 0 ? length : 0] = '\0';
        close(descriptor);
    }
    if (strcmp(text, control_text) == 0) return;
    strcpy(control_text, text);
    memset(rules, 0, sizeof rules);
    char *rest = NULL;
    for (char *line = strtok_r(text, "\n", &rest); line != NULL; line = strtok_r(NULL, "\n", &rest)) {
        char name[32], error[32];
        long skip, count;
        if (line[0] == '#' || sscanf(line, "%31s %31s %ld %ld", name, error, &skip, &count) != 4) continue;
        for (int family = 0; family < FAMILIES; family++) {
            if (strcmp(name, family_names[family]) == 0) {
                rules[family] = (struct rule){ .error = error_named(error), .skip = skip, .count = count };
            }
        }
    }
}

static int is_under_root(const char *path) {
    const char *root = getenv("COORDFS_FAULT_ROOT");
    if (root == NULL || root[0] == '\0') return 0;
    size_t length = strlen(root);
    return strncmp(path, root, length) == 0 && (path[length] == '/' || path[length] == '\0');
}

static int descriptor_under_root(int descriptor) {
    char link[64], target[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", descriptor);
    ssize_t length = readlink(link, target, sizeof target - 1);
    if (length < 0) return 0;
    target[length] = '\0';
    return is_under_root(target);
}

// Whether `name` relative to `directory` (a descriptor, or AT_FDCWD) lies under the root.
static int name_under_root(int directory, const char *name) {
    if (name[0] == '/') return is_under_root(name);
    if (directory != AT_FDCWD) return descriptor_under_root(directory);
    char cwd[PATH_MAX];
    return getcwd(cwd, sizeof cwd) != NULL && is_under_root(cwd);
}

// The errno this call of `family` on the root fails with, or 0 when it goes through.
static int failure(enum family family) {
    pthread_mutex_lock(&lock);
    read_rules();
    struct rule *rule = &rules[family];
    int error = 0;
    if (rule->error != 0) {
        rule->calls += 1;
        if (rule->calls > rule->skip && rule->calls <= rule->skip + rule->count) error = rule->error;
    }
    pthread_mutex_unlock(&lock);
    return error;
}

// Fails the call with the rule's errno when `on_root` and the rule says so, else calls libc's.
#define PASS_OR_FAIL(family, on_root, function, ...)                                       \
    do {                                                                                   \
        int error = (on_root) ? failure(family) : 0;                                       \
        if (error != 0) {                                                                  \
            errno = error;                                                                 \
            return -1;                                                                     \
        }                                                                                  \
        static __typeof__(&function) real;                                                 \
        if (real == NULL) real = (__typeof__(&function))dlsym(RTLD_NEXT, #function);       \
        return real(__VA_ARGS__);                                                          \
    } while (0)

ssize_t write(int fd, const void *buffer, size_t size) {
    PASS_OR_FAIL(WRITE, descriptor_under_root(fd), write, fd, buffer, size);
}
ssize_t pwrite(int fd, const void *buffer, size_t size, off_t offset) {
    PASS_OR_FAIL(WRITE, descriptor_under_root(fd), pwrite, fd, buffer, size, offset);
}
ssize_t pwrite64(int fd, const void *buffer, size_t size, off_t offset) {
    PASS_OR_FAIL(WRITE, descriptor_under_root(fd), pwrite64, fd, buffer, size, offset);
}
ssize_t writev(int fd, const struct iovec *vector, int count) {
    PASS_OR_FAIL(WRITE, descriptor_under_root(fd), writev, fd, vector, count);
}
ssize_t pwritev(int fd, const struct iovec *vector, int count, off_t offset) {
    PASS_OR_FAIL(WRITE, descriptor_under_root(fd), pwritev, fd, vector, count, offset);
}
ssize_t pwritev2(int fd, const struct iovec *vector, int count, off_t offset, int flags) {
    PASS_OR_FAIL(WRITE, descriptor_under_root(fd), pwritev2, fd, vector, count, offset, flags);
}
int fsync(int fd) {
    PASS_OR_FAIL(FSYNC, descriptor_under_root(fd), fsync, fd);
}
int fdatasync(int fd) {
    PASS_OR_FAIL(FSYNC, descriptor_under_root(fd), fdatasync, fd);
}
int rename(const char *from, const char *to) {
    PASS_OR_FAIL(RENAME, name_under_root(AT_FDCWD, to), rename, from, to);
}
int renameat(int from_directory, const char *from, int to_directory, const char *to) {
    PASS_OR_FAIL(RENAME, name_under_root(to_directory, to), renameat, from_directory, from, to_directory, to);
}
int renameat2(int from_directory, const char *from, int to_directory, const char *to, unsigned int flags) {
    PASS_OR_FAIL(RENAME, name_under_root(to_directory, to), renameat2, from_directory, from, to_directory, to, flags);
}
int link(const char *from, const char *to) {
    PASS_OR_FAIL(LINK, name_under_root(AT_FDCWD, to), link, from, to);
}
int linkat(int from_directory, const char *from, int to_directory, const char *to, int flags) {
    PASS_OR_FAIL(LINK, name_under_root(to_directory, to), linkat, from_directory, from, to_directory, to, flags);
}
int fallocate(int fd, int mode, off_t offset, off_t length) {
    PASS_OR_FAIL(FALLOCATE, descriptor_under_root(fd), fallocate, fd, mode, offset, length);
}
int fallocate64(int fd, int mode, off_t offset, off_t length) {
    PASS_OR_FAIL(FALLOCATE, descriptor_under_root(fd), fallocate64, fd, mode, offset, length);
}
ssize_t copy_file_range(int in, off_t *in_offset, int out, off_t *out_offset, size_t length, unsigned int flags) {
    PASS_OR_FAIL(COPY, descriptor_under_root(out), copy_file_range, in, in_offset, out, out_offset, length, flags);
}
int ftruncate(int fd, off_t length) {
    PASS_OR_FAIL(TRUNCATE, descriptor_under_root(fd), ftruncate, fd, length);
}
int ftruncate64(int fd, off_t length) {
    PASS_OR_FAIL(TRUNCATE, descriptor_under_root(fd), ftruncate64, fd, length);
}
