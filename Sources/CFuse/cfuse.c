// Most of the shim is static inline in include/cfuse.h. This file holds the one piece that
// needs state and the kernel's wire format: asking for FUSE_DIRECT_IO_ALLOW_MMAP.
//
// Why: a save's handles are opened with FOPEN_DIRECT_IO (others keep reading the committed
// version), and the kernel refuses mmap(MAP_SHARED) of such a handle with ENODEV unless the
// filesystem's INIT reply carried FUSE_DIRECT_IO_ALLOW_MMAP (Linux 6.6+). libfuse 3.14 knows
// no such flag, so the session's custom I/O (fuse_session_custom_io) watches the messages on
// /dev/fuse: `read_request` notes the INIT request (its unique, and whether the kernel offers
// the flag), `write_reply` adds the flag to the reply with that unique. Every other message
// passes through untouched; after INIT the only cost is one atomic load per message.
//
// One session per process: the state below is the process's.
#define _GNU_SOURCE
#include "cfuse.h"

#include <fcntl.h>
#include <linux/fuse.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

// Bit 4 of flags2 (the kernel reads flags2 only when FUSE_INIT_EXT is set in flags). Older
// kernel headers (before 6.6) do not name it.
#ifndef FUSE_DIRECT_IO_ALLOW_MMAP
#define FUSE_DIRECT_IO_ALLOW_MMAP (1ULL << 36)
#endif

enum init_progress { WAITING_FOR_INIT, INIT_READ, INIT_ANSWERED };

static _Atomic int progress = WAITING_FOR_INIT;
// Written by the thread that read INIT before it publishes INIT_READ; read after that.
static uint64_t init_unique;
static bool kernel_offers_allow_mmap;
static _Atomic bool allow_mmap_sent = false;

static ssize_t read_request(int fd, void *buffer, size_t size, void *userdata) {
    (void)userdata;
    ssize_t length = read(fd, buffer, size);
    // Nothing below touches errno: libfuse reads it after we return.
    if (atomic_load_explicit(&progress, memory_order_acquire) != WAITING_FOR_INIT) return length;
    // The kernel sends nothing before INIT is answered, so the first request is INIT. Kernels
    // before 5.17 send the short fuse_init_in, without flags2.
    const size_t header = sizeof(struct fuse_in_header);
    if (length < (ssize_t)(header + offsetof(struct fuse_init_in, flags) + sizeof(uint32_t))) return length;
    const struct fuse_in_header *in = buffer;
    if (in->opcode != FUSE_INIT) return length;
    const struct fuse_init_in *init = (const struct fuse_init_in *)((const char *)buffer + header);
    bool extended = (init->flags & FUSE_INIT_EXT) != 0
        && length >= (ssize_t)(header + offsetof(struct fuse_init_in, flags2) + sizeof(uint32_t));
    init_unique = in->unique;
    kernel_offers_allow_mmap = extended && (init->flags2 & (uint32_t)(FUSE_DIRECT_IO_ALLOW_MMAP >> 32)) != 0;
    atomic_store_explicit(&progress, INIT_READ, memory_order_release);
    return length;
}

static ssize_t write_reply(int fd, struct iovec *iov, int count, void *userdata) {
    (void)userdata;
    if (atomic_load_explicit(&progress, memory_order_acquire) != INIT_READ) return writev(fd, iov, count);
    // libfuse sends the INIT reply as two pieces: the header, then fuse_init_out.
    const struct fuse_out_header *out = iov[0].iov_base;
    if (count != 2 || iov[0].iov_len != sizeof *out || out->unique != init_unique) return writev(fd, iov, count);
    atomic_store_explicit(&progress, INIT_ANSWERED, memory_order_release);
    const size_t needed = offsetof(struct fuse_init_out, flags2) + sizeof(uint32_t);
    if (out->error != 0 || !kernel_offers_allow_mmap || iov[1].iov_len < needed || iov[1].iov_len > sizeof(struct fuse_init_out)) {
        return writev(fd, iov, count);
    }
    // A patched copy: the reply libfuse built stays as it was.
    struct fuse_init_out reply;
    memset(&reply, 0, sizeof reply);
    memcpy(&reply, iov[1].iov_base, iov[1].iov_len);
    reply.flags |= FUSE_INIT_EXT;
    reply.flags2 |= (uint32_t)(FUSE_DIRECT_IO_ALLOW_MMAP >> 32);
    struct iovec patched[2] = { iov[0], { .iov_base = &reply, .iov_len = iov[1].iov_len } };
    ssize_t written = writev(fd, patched, 2);
    if (written >= 0) atomic_store_explicit(&allow_mmap_sent, true, memory_order_release);
    return written;
}

// Given, so that libfuse keeps splicing (without them it turns splice off for the session):
// read replies are spliced from the backing into the kernel, and written data may be too.
static ssize_t splice_reply(int from, off_t *fromOffset, int to, off_t *toOffset, size_t length, unsigned int flags, void *userdata) {
    (void)userdata;
    return splice(from, fromOffset, to, toOffset, length, flags);
}

static ssize_t splice_request(int from, off_t *fromOffset, int to, off_t *toOffset, size_t length, unsigned int flags, void *userdata) {
    (void)userdata;
    return splice(from, fromOffset, to, toOffset, length, flags);
}

int cfuse_session_ask_for_shared_mmap(struct fuse_session *se) {
    static const struct fuse_custom_io io = {
        .writev = write_reply,
        .read = read_request,
        .splice_receive = splice_request,
        .splice_send = splice_reply,
    };
    return fuse_session_custom_io(se, &io, fuse_session_fd(se));
}

int cfuse_kernel_offers_shared_mmap(void) {
    return atomic_load_explicit(&progress, memory_order_acquire) != WAITING_FOR_INIT && kernel_offers_allow_mmap;
}

int cfuse_shared_mmap_allowed(void) {
    return atomic_load_explicit(&allow_mmap_sent, memory_order_acquire);
}

_Thread_local struct cfuse_request_timing cfuse_current_timing;
