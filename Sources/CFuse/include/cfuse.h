// The libfuse shim. Swift cannot expand C macros that select versioned symbols, nor set
// bitfields reliably, so this header pins the API version and wraps what Swift needs; cfuse.c
// holds the INIT patch that lets the kernel map direct-I/O files shared.
#ifndef CFUSE_H
#define CFUSE_H

#define FUSE_USE_VERSION 314

#include <fuse3/fuse_lowlevel.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/// The arrival of the request a thread is serving, for the request-latency metric: a FUSE
/// operation's index and CLOCK_MONOTONIC nanoseconds (0: nothing is being timed). Per thread
/// because a request's callback runs on one thread; a request answered later is carried to
/// the thread that answers it (Sources/CoordFSFuse/RequestMetrics.swift). Swift cannot declare
/// thread-locals, hence here.
struct cfuse_request_timing {
    uint64_t arrival;
    uint32_t operation;
};
extern _Thread_local struct cfuse_request_timing cfuse_current_timing;

static inline uint64_t cfuse_monotonic_nanoseconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

/// Takes this thread's timing, leaving none.
static inline struct cfuse_request_timing cfuse_timing_take(void) {
    struct cfuse_request_timing timing = cfuse_current_timing;
    cfuse_current_timing.arrival = 0;
    return timing;
}

static inline void cfuse_timing_put(struct cfuse_request_timing timing) { cfuse_current_timing = timing; }

/// Runs the multi-threaded loop; `fuse_session_loop_mt` is a macro over a versioned symbol.
static inline int cfuse_session_loop_mt(struct fuse_session *se, int clone_fd, unsigned int max_idle_threads, unsigned int max_threads) {
    struct fuse_loop_config *config = fuse_loop_cfg_create();
    if (config == NULL) return -ENOMEM;
    fuse_loop_cfg_set_clone_fd(config, (unsigned int)clone_fd);
    fuse_loop_cfg_set_idle_threads(config, max_idle_threads);
    fuse_loop_cfg_set_max_threads(config, max_threads);
    int result = fuse_session_loop_mt(se, config);
    fuse_loop_cfg_destroy(config);
    return result;
}

static inline struct fuse_session *cfuse_session_new(struct fuse_args *args, const struct fuse_lowlevel_ops *ops, void *userdata) {
    return fuse_session_new(args, ops, sizeof(struct fuse_lowlevel_ops), userdata);
}

// fuse_file_info bitfields.
static inline void cfuse_fi_set_keep_cache(struct fuse_file_info *fi, int on) { fi->keep_cache = on ? 1 : 0; }
static inline void cfuse_fi_set_direct_io(struct fuse_file_info *fi, int on) { fi->direct_io = on ? 1 : 0; }
static inline void cfuse_fi_set_cache_readdir(struct fuse_file_info *fi, int on) { fi->cache_readdir = on ? 1 : 0; }
static inline void cfuse_fi_set_noflush(struct fuse_file_info *fi, int on) { fi->noflush = on ? 1 : 0; }
static inline int cfuse_fi_writepage(const struct fuse_file_info *fi) { return fi->writepage; }

/// A one-element buffer vector that reads from a file descriptor at an offset (lets libfuse splice).
static inline int cfuse_reply_data_from_fd(fuse_req_t req, int fd, size_t size, off_t offset, int splice) {
    struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);
    buf.buf[0].flags = (enum fuse_buf_flags)(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK);
    buf.buf[0].fd = fd;
    buf.buf[0].pos = offset;
    return fuse_reply_data(req, &buf, splice ? FUSE_BUF_SPLICE_MOVE : FUSE_BUF_NO_SPLICE);
}

/// Installs the session's custom I/O that adds FUSE_DIRECT_IO_ALLOW_MMAP to the INIT reply
/// when the kernel offers it (see cfuse.c). After fuse_session_mount, before the loop starts.
/// Returns 0, or -errno.
int cfuse_session_ask_for_shared_mmap(struct fuse_session *se);
/// 1 when the kernel's INIT offered FUSE_DIRECT_IO_ALLOW_MMAP (known from the init callback on).
int cfuse_kernel_offers_shared_mmap(void);
/// 1 once the INIT reply carrying FUSE_DIRECT_IO_ALLOW_MMAP was written.
int cfuse_shared_mmap_allowed(void);

/// Copies an incoming write buffer to a file descriptor at an offset; returns bytes or -errno.
/// Whether the data of a write starts with `length` bytes equal to `prefix` (only data that
/// came in memory, not spliced through a pipe, is looked at).
static inline int cfuse_bufvec_starts_with(const struct fuse_bufvec *in, const void *prefix, size_t length) {
    if (in->count < 1 || (in->buf[0].flags & FUSE_BUF_IS_FD) || in->buf[0].size < length || in->buf[0].mem == NULL) return 0;
    return memcmp(in->buf[0].mem, prefix, length) == 0;
}

static inline ssize_t cfuse_write_bufvec_to_fd(struct fuse_bufvec *in, int fd, off_t offset) {
    struct fuse_bufvec out = FUSE_BUFVEC_INIT(fuse_buf_size(in));
    out.buf[0].flags = (enum fuse_buf_flags)(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK);
    out.buf[0].fd = fd;
    out.buf[0].pos = offset;
    return fuse_buf_copy(&out, in, (enum fuse_buf_copy_flags)0);
}

#endif
