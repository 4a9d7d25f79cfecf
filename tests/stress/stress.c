/* hakmem-stress: a randomized, multi-threaded stress program for hakmem.
 *
 * Linked against libhakmem.so, so every allocation in the process goes through
 * hakmem.  N worker threads each keep a pool of live blocks and, op after op,
 * replace a random one:
 *
 *  - sizes with a realistic skew: mostly 16..256 B, some up to 64 KiB, rare
 *    ones up to 1 MiB (hakmem's large path), a few 1..15 B and a few sizes on
 *    power-of-two class boundaries (2^k - 1, 2^k, 2^k + 1);
 *  - malloc, calloc (memory checked to be zero), posix_memalign / aligned_alloc /
 *    memalign (alignment checked), realloc of live blocks (grow, shrink, random;
 *    the old contents must survive), realloc(NULL, n);
 *  - random lifetimes (random replacement in the pool, a long-lived part of the
 *    pool replaced less often, and occasional bursts that free most of the pool);
 *  - a shared exchange (a mutex-protected array) through which blocks move
 *    between threads, so many frees and reallocs are cross-thread;
 *  - thread churn: a worker thread retires after a random number of ops and a
 *    new thread takes over its pool, so blocks outlive the thread that allocated
 *    them and are freed by others (abandoned heaps).
 *
 * Every block carries a checksum: its first word is hash(seed, size) and the
 * rest is derived from the seed.  Each block is verified before it is freed or
 * reallocated (and its prefix after realloc); a mismatch prints the block, the
 * offset and the expected/actual bytes and exits 1.  Also exit 1 on: a NULL
 * from the allocator, a misaligned pointer, malloc_usable_size() < size, a
 * "hakmem:" line on stderr (fd 2 is captured into a temporary file and echoed
 * at exit or on a fatal signal), a thread making no progress for --hang
 * seconds (default 30 x CK_TIMEOUT_MULTIPLIER), or a final RSS above 64 MiB + 2 x the maximum live bytes.
 *
 * At the end everything is freed and one summary line is printed on stdout:
 *
 *   stress: PASS threads=2 seed=0x... time=8.0s ops=... allocated=... verified=...
 *           max_live=... peak_rss=... final_rss=... ...
 *
 * Usage: hakmem-stress [--threads N] [--seconds S | --ops N] [--seed X]
 *                      [--pool N] [--exchange N] [--max-size N] [--report S] [--hang S]
 *                      [--no-churn] [--no-capture] [--any-malloc] [--trim]
 *                      [--inject corrupt|double-free]
 *   --ops N       total allocator calls over all threads (instead of --seconds)
 *   --max-size N  cap block sizes at N bytes (default and maximum 1 MiB)
 *   --report S    also print a progress line every S seconds (for long runs)
 *   --any-malloc  do not require malloc to come from libhakmem (to run the same
 *                 program under LD_PRELOAD of another allocator)
 *   --trim        the monitor calls malloc_trim(0) every 20 ms: hakmem visits every
 *                 worker's heap while it works (src/cold/visit.c)
 *   --inject K    self-test: worker 0 corrupts a live block (must fail with a
 *                 checksum mismatch) or double-frees one (must fail on the
 *                 "hakmem:" report) after 10000 ops
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include "testrand.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define MAX_SIZE MiB
#define MAX_THREADS 256

/* ---------------------------------------------------------------- options */

static struct {
    int      threads;
    double   seconds;
    uint64_t ops;          /* 0: run for `seconds` */
    uint64_t seed;
    size_t   pool;         /* live-block slots per thread */
    size_t   exchange;     /* slots in the shared exchange */
    size_t   max_size;     /* cap on block sizes (default 1 MiB) */
    double   report;       /* progress line period, 0 = none */
    double   hang;         /* no progress for this long = hang */
    bool     churn;
    bool     capture;
    bool     any_malloc;
    bool     trim;
    int      inject;       /* self-test of the checks: 1 corrupt a block, 2 double free */
} opt = {
    .threads = 2, .seconds = 8, .ops = 0, .seed = 0, .pool = 4096, .exchange = 1024, .max_size = MAX_SIZE,
    .report = 0, .hang = 30, .churn = true, .capture = true, .any_malloc = false,
};

/* ---------------------------------------------------------------- helpers */

static double now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static size_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, res = 0;
    if (f == NULL)
        return 0;
    if (fscanf(f, "%lu %lu", &size, &res) != 2)
        res = 0;
    fclose(f);
    return (size_t)res * (size_t)sysconf(_SC_PAGESIZE);
}

static double mib(double bytes) { return bytes / (double)MiB; }

/* ------------------------------------------------- stderr capture (fd 2) */

static int real_err = 2;      /* the original stderr once fd 2 is captured */
static int cap_fd = -1;

static void cap_start(void)
{
    const char *dir = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/hakmem-stress-XXXXXX", dir && *dir ? dir : "/tmp");
    fflush(stderr);
    cap_fd = mkstemp(path);
    if (cap_fd < 0) {
        fprintf(stderr, "stress: mkstemp(%s): %s (stderr not captured)\n", path, strerror(errno));
        return;
    }
    unlink(path);
    real_err = dup(2);
    dup2(cap_fd, 2);
}

/* Echoes what was written to fd 2 so far to the real stderr and returns the
 * number of lines starting with "hakmem:".  Async-signal-safe. */
static long cap_dump(void)
{
    static const char pfx[] = "hakmem:";
    char buf[4096];
    off_t off = 0;
    ssize_t n;
    long hits = 0;
    size_t col = 0;
    bool match = true;
    if (cap_fd < 0)
        return 0;
    while ((n = pread(cap_fd, buf, sizeof buf, off)) > 0) {
        off += n;
        for (ssize_t w = 0; w < n;) {
            ssize_t k = write(real_err, buf + w, (size_t)(n - w));
            if (k <= 0)
                break;
            w += k;
        }
        for (ssize_t i = 0; i < n; i++) {
            char c = buf[i];
            if (c == '\n') {
                col = 0;
                match = true;
                continue;
            }
            if (match && col < 7) {
                if (c != pfx[col])
                    match = false;
                else if (col == 6)
                    hits++;
            }
            col++;
        }
    }
    return hits;
}

/* Report on the real stderr (our own diagnostics are never captured). */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof line)
        n = sizeof line - 1;
    ssize_t k = write(real_err, line, (size_t)n);
    (void)k;
}

static pthread_mutex_t fail_mu = PTHREAD_MUTEX_INITIALIZER;

/* Print a failure (once, whichever thread finds it first), echo the captured
 * stderr and exit 1 without running exit handlers (other threads keep going). */
static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
    char line[4096];
    va_list ap;
    pthread_mutex_lock(&fail_mu);
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fflush(stdout);
    long hits = cap_dump();
    say("stress: FAIL: %s\n", line);
    say("stress: seed=0x%" PRIx64 " threads=%d pool=%zu exchange=%zu%s; %ld \"hakmem:\" line(s) on stderr\n",
        opt.seed, opt.threads, opt.pool, opt.exchange, opt.churn ? "" : " no-churn", hits);
    _exit(1);
}

static void fatal_signal(int sig)
{
    static const char m1[] = "stress: FAIL: fatal signal ";
    char num[8];
    int n = 0, s = sig;
    cap_dump();
    do
        num[sizeof num - 1 - n++] = (char)('0' + s % 10);
    while ((s /= 10) != 0 && n < 7);
    ssize_t k = write(real_err, m1, sizeof m1 - 1);
    k = write(real_err, num + sizeof num - n, (size_t)n);
    k = write(real_err, "\n", 1);
    (void)k;
    signal(sig, SIG_DFL);
    raise(sig);
}

/* ------------------------------------------------------- block checksums */

enum kind { K_MALLOC, K_CALLOC, K_MEMALIGN, K_REALLOC, K_REALLOC_NULL };
static const char *const kind_name[] = {
    "malloc", "calloc", "memalign", "realloc", "realloc(NULL)",
};

struct blk {
    unsigned char *p;      /* NULL: empty slot */
    uint64_t seed;
    uint64_t born;         /* the owner's op count when it was (re)allocated */
    uint32_t size;
    uint16_t owner;        /* worker that allocated (or last reallocated) it */
    uint8_t  kind;
    uint8_t  align_log2;   /* requested alignment (memalign), else 0 */
};

/* Word i of a block's contents: word 0 is hash(seed, size), the rest derive
 * from the seed.  A partial last word holds the low bytes (little endian). */
static inline uint64_t hdr_word(uint64_t seed, size_t size)
{
    return mix64(seed ^ ((uint64_t)size * 0xD6E8FEB86659FD93ULL));
}

static inline uint64_t body_word(uint64_t seed, size_t i)
{
    return (seed + i * 0x9E3779B97F4A7C15ULL) ^ (i << 29);
}

static inline uint8_t pat_byte(uint64_t seed, size_t size, size_t off)
{
    size_t i = off / 8;
    uint64_t w = i == 0 ? hdr_word(seed, size) : body_word(seed, i);
    return (uint8_t)(w >> ((off % 8) * 8));
}

static void pat_fill(unsigned char *p, size_t size, uint64_t seed)
{
    uint64_t w = hdr_word(seed, size);
    if (size < 8) {
        memcpy(p, &w, size);
        return;
    }
    memcpy(p, &w, 8);
    size_t nw = size / 8, i;
    for (i = 1; i < nw; i++) {
        w = body_word(seed, i);
        memcpy(p + i * 8, &w, 8);
    }
    w = body_word(seed, i);
    memcpy(p + nw * 8, &w, size - nw * 8);
}

/* Checks the first n bytes of a block filled with pat_fill(p, size, seed);
 * returns the offset of the first wrong byte, or SIZE_MAX. */
static size_t pat_check(const unsigned char *p, size_t n, size_t size, uint64_t seed)
{
    size_t nw = n / 8, i;
    uint64_t w;
    for (i = 0; i < nw; i++) {
        memcpy(&w, p + i * 8, 8);
        if (w != (i == 0 ? hdr_word(seed, size) : body_word(seed, i)))
            break;
    }
    for (size_t off = i * 8; off < n; off++)   /* the wrong word, or the tail */
        if (p[off] != pat_byte(seed, size, off))
            return off;
    return SIZE_MAX;
}

static void hexdump(char *out, size_t cap, const unsigned char *p, size_t n)
{
    size_t k = 0;
    out[0] = 0;
    for (size_t i = 0; i < n && k + 4 < cap; i++)
        k += (size_t)snprintf(out + k, cap - k, "%02x%s", p[i], (i % 8) == 7 ? " " : "");
}

static void corrupt(const struct blk *b, size_t bad, size_t checked, int who,
                    const char *when, const char *what)
{
    unsigned char exp[32];
    char hx_exp[128], hx_act[128];
    size_t from = bad & ~(size_t)15, n = checked - from < 32 ? checked - from : 32;
    size_t nbad = 0;
    for (size_t i = 0; i < n; i++)
        exp[i] = pat_byte(b->seed, b->size, from + i);
    for (size_t i = bad; i < checked; i++)
        nbad += b->p[i] != pat_byte(b->seed, b->size, i);
    char how[48] = "";
    if (b->align_log2)
        snprintf(how, sizeof how, "(%u)", 1u << b->align_log2);
    hexdump(hx_exp, sizeof hx_exp, exp, n);
    hexdump(hx_act, sizeof hx_act, b->p + from, n);
    fail("%s: worker %d %s: block %p size %" PRIu32 " from %s%s by worker %d at its op %"
         PRIu64 ", seed 0x%016" PRIx64 ": first wrong byte at offset %zu of %zu checked, %zu wrong byte(s)\n"
         "  expected @%zu: %s\n  actual   @%zu: %s",
         what, who, when, (void *)b->p, b->size, kind_name[b->kind],
         how, (int)b->owner, b->born,
         b->seed, bad, checked, nbad, from, hx_exp, from, hx_act);
}

/* ------------------------------------------------------------ shared state */

static struct {
    pthread_mutex_t mu;
    struct blk *slot;
} xchg = { .mu = PTHREAD_MUTEX_INITIALIZER };

static _Atomic int64_t live_bytes, max_live;
static atomic_bool stop_flag;

static inline void live_add(int64_t d)
{
    int64_t v = atomic_fetch_add_explicit(&live_bytes, d, memory_order_relaxed) + d;
    if (d > 0) {
        int64_t m = atomic_load_explicit(&max_live, memory_order_relaxed);
        while (v > m && !atomic_compare_exchange_weak_explicit(&max_live, &m, v,
                                                               memory_order_relaxed,
                                                               memory_order_relaxed))
            ;
    }
}

enum op { OP_IDLE, OP_MALLOC, OP_CALLOC, OP_MEMALIGN, OP_REALLOC, OP_FREE, OP_XCHG, OP_EXIT };
static const char *const op_name[] = {
    "none", "malloc", "calloc", "memalign", "realloc", "free", "exchange lock", "thread exit",
};

struct worker {
    int id;
    pthread_t th;
    uint64_t rng;
    struct blk *pool;
    uint64_t quota;             /* --ops: this worker's share, else UINT64_MAX */
    uint64_t life_end;          /* retire (churn) when ops reaches this */
    /* statistics (written by the worker's current thread only) */
    uint64_t ops, n_malloc, n_calloc, n_memalign, n_realloc, n_free, n_cross, n_xchg;
    uint64_t n_bursts, generations, bytes_alloc, bytes_verified;
    bool injected;
    /* shared with the monitor */
    _Atomic uint64_t progress;
    _Atomic int cur_op;
    _Atomic size_t cur_size;
    _Atomic int state;          /* 0 running, 1 retired (wants a successor), 2 done */
} __attribute__((aligned(64)));

static struct worker *workers;
static pthread_mutex_t mon_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t mon_cv = PTHREAD_COND_INITIALIZER;

/* ---------------------------------------------------------------- sizes */

static size_t pick_size_1(uint64_t *rng)
{
    uint64_t r = rng_next(rng);
    unsigned b = (unsigned)(r % 10000);
    r >>= 16;
    if (b < 300)                       /*  3%: 1..15 B */
        return 1 + r % 15;
    if (b < 5000)                      /* 47%: 16..64 B */
        return 16 + r % 49;
    if (b < 8000)                      /* 30%: 65..256 B */
        return 65 + r % 192;
    if (b < 8200) {                    /*  2%: class boundaries 2^k - 1, 2^k, 2^k + 1 */
        size_t k = 3 + r % 16;         /* 8 B .. 256 KiB (+1: the large path) */
        size_t s = ((size_t)1 << k) + (size_t)((r >> 8) % 3) - 1;
        return s > MAX_SIZE ? MAX_SIZE : s;
    }
    if (b < 9500)                      /* 13%: 257 B .. 4 KiB */
        return 257 + r % (4096 - 256);
    if (b < 9990)                      /* 4.9%: 4 KiB .. 64 KiB */
        return 4097 + r % (65536 - 4096);
    return 65537 + r % (MAX_SIZE - 65536);   /* 0.1%: 64 KiB .. 1 MiB */
}

static size_t pick_size(uint64_t *rng)
{
    size_t s = pick_size_1(rng);
    return s > opt.max_size ? opt.max_size : s;
}

/* ------------------------------------------------------------- the worker */

static inline void set_op(struct worker *w, int op, size_t size)
{
    atomic_store_explicit(&w->cur_size, size, memory_order_relaxed);
    atomic_store_explicit(&w->cur_op, op, memory_order_relaxed);
}

static inline void tick(struct worker *w)
{
    w->ops++;
    if ((w->ops & 63) == 0)
        atomic_store_explicit(&w->progress, w->ops, memory_order_relaxed);
}

static void check_new(struct worker *w, const void *p, size_t size, size_t align, const char *fn)
{
    if (p == NULL)
        fail("worker %d: %s(%zu) returned NULL (errno %d: %s)", w->id, fn, size, errno, strerror(errno));
    size_t need = align ? align : size >= 16 ? 16 : size >= 8 ? 8 : 1;
    if ((uintptr_t)p % need != 0)
        fail("worker %d: %s(%zu) returned %p, not %zu-byte aligned", w->id, fn, size, p, need);
    size_t us = malloc_usable_size((void *)p);
    if (us < size)
        fail("worker %d: %s(%zu) returned %p with malloc_usable_size %zu < %zu", w->id, fn, size, p,
             us, size);
}

static void verify(struct worker *w, const struct blk *b, const char *when)
{
    size_t bad = pat_check(b->p, b->size, b->size, b->seed);
    w->bytes_verified += b->size;
    if (bad != SIZE_MAX)
        corrupt(b, bad, b->size, w->id, when, "CHECKSUM MISMATCH");
}

static void blk_free(struct worker *w, struct blk *b, const char *when)
{
    verify(w, b, when);
    set_op(w, OP_FREE, b->size);
    free(b->p);
    set_op(w, OP_IDLE, 0);
    live_add(-(int64_t)b->size);
    w->n_free++;
    if (b->owner != w->id)
        w->n_cross++;
    b->p = NULL;
    tick(w);
}

static void blk_alloc(struct worker *w, struct blk *b)
{
    uint64_t r = rng_next(&w->rng);
    size_t size = pick_size(&w->rng);
    unsigned c = (unsigned)(r % 100);
    unsigned char *p;
    b->align_log2 = 0;
    if (c < 80) {
        set_op(w, OP_MALLOC, size);
        p = malloc(size);
        check_new(w, p, size, 0, "malloc");
        b->kind = K_MALLOC;
        w->n_malloc++;
    } else if (c < 93) {
        size_t nmemb = 1, each = size;
        if ((r >> 8) & 1) {              /* calloc(n, m) with n > 1 where possible */
            static const size_t el[] = { 16, 8, 4, 2 };
            for (unsigned i = 0; i < 4; i++)
                if (size % el[i] == 0) {
                    nmemb = size / el[i];
                    each = el[i];
                    break;
                }
        }
        set_op(w, OP_CALLOC, size);
        p = calloc(nmemb, each);
        check_new(w, p, size, 0, "calloc");
        for (size_t i = 0; i < size; i++)
            if (p[i] != 0) {
                size_t nz = 0;
                for (size_t j = i; j < size; j++)
                    nz += p[j] != 0;
                fail("worker %d: calloc(%zu, %zu) = %p (usable %zu): byte %zu is 0x%02x, not zero "
                     "(%zu non-zero byte(s))", w->id, nmemb, each, (void *)p, malloc_usable_size(p),
                     i, p[i], nz);
            }
        w->bytes_verified += size;
        b->kind = K_CALLOC;
        w->n_calloc++;
    } else if (c < 98) {
        unsigned lg = 4 + (unsigned)((r >> 8) % 9);   /* 16 .. 4096 */
        size_t align = (size_t)1 << lg;
        const char *fn;
        set_op(w, OP_MEMALIGN, size);
        switch ((r >> 16) % 3) {
        case 0: {
            void *q = NULL;
            int e = posix_memalign(&q, align, size);
            if (e != 0)
                fail("worker %d: posix_memalign(%zu, %zu) failed: %s", w->id, align, size, strerror(e));
            p = q;
            fn = "posix_memalign";
            break;
        }
        case 1:
            size = (size + align - 1) & ~(align - 1);   /* C11: a multiple of the alignment */
            if (size > opt.max_size)
                size = opt.max_size & ~(align - 1) ? opt.max_size & ~(align - 1) : align;
            p = aligned_alloc(align, size);
            fn = "aligned_alloc";
            break;
        default:
            p = memalign(align, size);
            fn = "memalign";
            break;
        }
        check_new(w, p, size, align, fn);
        b->kind = K_MEMALIGN;
        b->align_log2 = (uint8_t)lg;
        w->n_memalign++;
    } else {
        set_op(w, OP_REALLOC, size);
        p = realloc(NULL, size);
        check_new(w, p, size, 0, "realloc(NULL, n)");
        b->kind = K_REALLOC_NULL;
        w->n_malloc++;
    }
    set_op(w, OP_IDLE, 0);
    b->p = p;
    b->size = (uint32_t)size;
    b->seed = rng_next(&w->rng);
    b->owner = (uint16_t)w->id;
    b->born = w->ops;
    pat_fill(p, size, b->seed);
    w->bytes_alloc += size;
    live_add((int64_t)size);
    tick(w);
}

static void blk_realloc(struct worker *w, struct blk *b)
{
    uint64_t r = rng_next(&w->rng);
    size_t old = b->size, size;
    switch (r % 3) {
    case 0:  size = pick_size(&w->rng); break;
    case 1:  size = old * 2 + (size_t)((r >> 8) % 64); break;     /* grow */
    default: size = old / 2 + (size_t)((r >> 8) % 8); break;      /* shrink */
    }
    if (size == 0)
        size = 1;
    if (size > opt.max_size)
        size = opt.max_size;
    verify(w, b, "before realloc");
    set_op(w, OP_REALLOC, size);
    unsigned char *p = realloc(b->p, size);
    set_op(w, OP_IDLE, 0);
    check_new(w, p, size, 0, "realloc");
    struct blk nb = *b;
    nb.p = p;
    size_t keep = old < size ? old : size;
    size_t bad = pat_check(p, keep, old, b->seed);
    w->bytes_verified += keep;
    if (bad != SIZE_MAX) {
        char when[160];
        snprintf(when, sizeof when, "after realloc(%p, %zu) = %p", (void *)b->p, size, (void *)p);
        corrupt(&nb, bad, keep, w->id, when, "CONTENTS NOT PRESERVED");
    }
    if (b->owner != w->id)
        w->n_cross++;
    b->p = p;
    b->size = (uint32_t)size;
    b->seed = rng_next(&w->rng);
    b->owner = (uint16_t)w->id;
    b->kind = K_REALLOC;
    b->align_log2 = 0;
    b->born = w->ops;
    pat_fill(p, size, b->seed);
    w->bytes_alloc += size > old ? size - old : 0;
    live_add((int64_t)size - (int64_t)old);
    w->n_realloc++;
    tick(w);
}

/* Swap a pool slot with a random exchange slot; sometimes free what came back. */
static void blk_exchange(struct worker *w, struct blk *b)
{
    uint64_t r = rng_next(&w->rng);
    size_t j = (size_t)(r % opt.exchange);
    set_op(w, OP_XCHG, 0);
    pthread_mutex_lock(&xchg.mu);
    struct blk t = xchg.slot[j];
    xchg.slot[j] = *b;
    pthread_mutex_unlock(&xchg.mu);
    set_op(w, OP_IDLE, 0);
    *b = t;
    w->n_xchg++;
    if (b->p != NULL && ((r >> 32) & 1))
        blk_free(w, b, "before free (block from the exchange)");
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    size_t np = opt.pool, hot = np - np / 8;   /* pool[0 .. np/8) is long-lived */
    w->generations++;
    if (opt.churn)
        w->life_end = w->ops + 20000 + rng_next(&w->rng) % 400000;
    else
        w->life_end = UINT64_MAX;
    for (;;) {
        if (w->ops >= w->quota)
            break;
        if ((w->ops & 63) == 0 && atomic_load_explicit(&stop_flag, memory_order_relaxed))
            break;
        if (w->ops >= w->life_end) {        /* retire: a new thread takes the pool */
            atomic_store_explicit(&w->progress, w->ops, memory_order_relaxed);
            set_op(w, OP_EXIT, 0);
            pthread_mutex_lock(&mon_mu);
            atomic_store(&w->state, 1);
            pthread_cond_signal(&mon_cv);
            pthread_mutex_unlock(&mon_mu);
            return NULL;
        }
        if (opt.inject && w->id == 0 && w->ops >= 10000 && !w->injected) {
            w->injected = true;
            for (size_t i = 0; i < np; i++) {
                struct blk *b = &w->pool[i];
                if (b->p == NULL || b->size < 32)
                    continue;
                if (opt.inject == 1) {
                    b->p[b->size / 2] ^= 0x40;
                } else {
                    free(b->p);      /* freed behind the pool's back: the real free is a double free */
                    w->ops++;
                }
                break;
            }
        }
        uint64_t r = rng_next(&w->rng);
        if (r % 2000000 == 0) {             /* burst: free most of the pool */
            for (size_t i = np / 8; i < np; i++)
                if (w->pool[i].p != NULL && (rng_next(&w->rng) & 3) != 0)
                    blk_free(w, &w->pool[i], "before free (burst)");
            w->n_bursts++;
            continue;
        }
        r >>= 20;
        size_t i = (r % 10 == 0) ? (size_t)((r >> 4) % np) : np / 8 + (size_t)((r >> 4) % hot);
        struct blk *b = &w->pool[i];
        if (b->p == NULL) {
            blk_alloc(w, b);
            continue;
        }
        unsigned c = (unsigned)(rng_next(&w->rng) % 100);
        if (c < 60) {
            blk_free(w, b, "before free");
            blk_alloc(w, b);
        } else if (c < 72) {
            blk_realloc(w, b);
        } else if (c < 92) {
            blk_exchange(w, b);
        } else {
            blk_free(w, b, "before free");
        }
    }
    /* The end: free the pool (blocks of every thread). */
    for (size_t i = 0; i < np; i++)
        if (w->pool[i].p != NULL)
            blk_free(w, &w->pool[i], "before final free");
    atomic_store_explicit(&w->progress, w->ops, memory_order_relaxed);
    set_op(w, OP_EXIT, 0);
    pthread_mutex_lock(&mon_mu);
    atomic_store(&w->state, 2);
    pthread_cond_signal(&mon_cv);
    pthread_mutex_unlock(&mon_mu);
    return NULL;
}

/* ------------------------------------------------------------------ main */

static void usage(FILE *f)
{
    fprintf(f,
        "usage: hakmem-stress [--threads N] [--seconds S | --ops N] [--seed X] [--pool N]\n"
        "                     [--exchange N] [--max-size N] [--report S] [--hang S] [--no-churn]\n"
        "                     [--no-capture] [--any-malloc] [--trim] [--inject corrupt|double-free]\n");
}

static uint64_t parse_u64(const char *name, const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno != 0 || end == s || *end != 0) {
        fprintf(stderr, "stress: bad value for %s: %s\n", name, s);
        exit(2);
    }
    return v;
}

static double parse_dbl(const char *name, const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end != 0 || v < 0) {
        fprintf(stderr, "stress: bad value for %s: %s\n", name, s);
        exit(2);
    }
    return v;
}

static void parse_args(int argc, char **argv)
{
    static const struct option lo[] = {
        { "threads", required_argument, 0, 't' }, { "seconds", required_argument, 0, 's' },
        { "ops", required_argument, 0, 'n' },     { "seed", required_argument, 0, 'S' },
        { "pool", required_argument, 0, 'p' },    { "exchange", required_argument, 0, 'x' },
        { "report", required_argument, 0, 'r' },  { "hang", required_argument, 0, 'H' },
        { "no-churn", no_argument, 0, 'C' },      { "no-capture", no_argument, 0, 'c' },
        { "any-malloc", no_argument, 0, 'a' },    { "help", no_argument, 0, 'h' },
        { "inject", required_argument, 0, 'I' },  { "max-size", required_argument, 0, 'm' },
        { "trim", no_argument, 0, 'T' },
        { 0, 0, 0, 0 },
    };
    bool seeded = false;
    int c;
    while ((c = getopt_long(argc, argv, "t:s:n:S:p:x:m:r:H:CcahTI:", lo, NULL)) != -1) {
        switch (c) {
        case 't': opt.threads = (int)parse_u64("--threads", optarg); break;
        case 's': opt.seconds = parse_dbl("--seconds", optarg); break;
        case 'n': opt.ops = parse_u64("--ops", optarg); break;
        case 'S': opt.seed = parse_u64("--seed", optarg); seeded = true; break;
        case 'p': opt.pool = (size_t)parse_u64("--pool", optarg); break;
        case 'x': opt.exchange = (size_t)parse_u64("--exchange", optarg); break;
        case 'm': opt.max_size = (size_t)parse_u64("--max-size", optarg); break;
        case 'r': opt.report = parse_dbl("--report", optarg); break;
        case 'H': opt.hang = parse_dbl("--hang", optarg); break;
        case 'C': opt.churn = false; break;
        case 'c': opt.capture = false; break;
        case 'a': opt.any_malloc = true; break;
        case 'T': opt.trim = true; break;
        case 'I':
            opt.inject = strcmp(optarg, "corrupt") == 0 ? 1 : strcmp(optarg, "double-free") == 0 ? 2 : -1;
            if (opt.inject < 0) {
                usage(stderr);
                exit(2);
            }
            break;
        case 'h': usage(stdout); exit(0);
        default:  usage(stderr); exit(2);
        }
    }
    if (optind != argc || opt.threads < 1 || opt.threads > MAX_THREADS || opt.pool < 8 ||
        opt.exchange < 1 || opt.hang <= 0 || opt.max_size < 1 || opt.max_size > MAX_SIZE) {
        usage(stderr);
        exit(2);
    }
    if (!seeded) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        opt.seed = mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid());
    }
}

/* Which object provides the malloc this process calls. */
static const char *malloc_provider(void)
{
    Dl_info di;
    void *sym = dlsym(RTLD_DEFAULT, "malloc");
    if (sym == NULL || dladdr(sym, &di) == 0 || di.dli_fname == NULL)
        return "?";
    const char *s = strrchr(di.dli_fname, '/');
    return s ? s + 1 : di.dli_fname;
}

static void start_thread(struct worker *w)
{
    int e = pthread_create(&w->th, NULL, worker_main, w);
    if (e != 0)
        fail("pthread_create: %s", strerror(e));
}

int main(int argc, char **argv)
{
    /* the hang bound's default (30 s) scales like every test timeout (CK_TIMEOUT_MULTIPLIER,
     * which scripts/run-tests.sh sets with meson's --timeout-multiplier); --hang overrides */
    const char *mult = getenv("CK_TIMEOUT_MULTIPLIER");
    if (mult && atof(mult) > 1.0)
        opt.hang *= atof(mult);
    parse_args(argc, argv);
    if (opt.capture)
        cap_start();
    static const int sigs[] = { SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE, SIGTERM };
    for (unsigned i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = fatal_signal;
        sa.sa_flags = SA_NODEFER | SA_RESETHAND;
        sigaction(sigs[i], &sa, NULL);
    }

    const char *prov = malloc_provider();
    if (!opt.any_malloc && strstr(prov, "hakmem") == NULL)
        fail("malloc comes from %s, not libhakmem (use --any-malloc to allow)", prov);

    xchg.slot = calloc(opt.exchange, sizeof *xchg.slot);
    workers = aligned_alloc(64, sizeof *workers * (size_t)opt.threads);
    if (xchg.slot == NULL || workers == NULL)
        fail("out of memory for the bookkeeping");
    memset(workers, 0, sizeof *workers * (size_t)opt.threads);
    for (int t = 0; t < opt.threads; t++) {
        struct worker *w = &workers[t];
        w->id = t;
        w->rng = mix64(opt.seed + (uint64_t)(t + 1) * 0x9E3779B97F4A7C15ULL) | 1;
        w->pool = calloc(opt.pool, sizeof *w->pool);
        if (w->pool == NULL)
            fail("out of memory for the pools");
        w->quota = opt.ops ? opt.ops / (uint64_t)opt.threads + (t == 0 ? opt.ops % (uint64_t)opt.threads : 0)
                           : UINT64_MAX;
    }

    double t0 = now_sec(), next_report = t0 + opt.report;
    size_t peak_rss_sampled = rss_bytes();
    uint64_t *last = calloc((size_t)opt.threads, sizeof *last);
    double *last_t = calloc((size_t)opt.threads, sizeof *last_t);
    if (last == NULL || last_t == NULL)
        fail("out of memory for the bookkeeping");
    for (int t = 0; t < opt.threads; t++) {
        last_t[t] = t0;
        start_thread(&workers[t]);
    }

    /* Monitor: stop after --seconds, respawn retired workers, detect hangs. */
    int done = 0;
    while (done < opt.threads) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 20 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&mon_mu);
        bool any = false;
        for (int t = 0; t < opt.threads; t++)
            any |= atomic_load(&workers[t].state) != 0 && workers[t].th != 0;
        if (!any)
            pthread_cond_timedwait(&mon_cv, &mon_mu, &ts);
        pthread_mutex_unlock(&mon_mu);

        if (opt.trim)
            malloc_trim(0);
        double t = now_sec();
        if (opt.ops == 0 && t - t0 >= opt.seconds)
            atomic_store(&stop_flag, true);
        for (int i = 0; i < opt.threads; i++) {
            struct worker *w = &workers[i];
            int st = atomic_load(&w->state);
            if (st != 0 && w->th != 0) {
                int e = pthread_join(w->th, NULL);
                if (e != 0)
                    fail("pthread_join: %s", strerror(e));
                w->th = 0;
                if (st == 2) {
                    done++;
                } else {
                    atomic_store(&w->state, 0);
                    last_t[i] = t;
                    start_thread(w);
                }
                continue;
            }
            if (st != 0)
                continue;
            uint64_t p = atomic_load_explicit(&w->progress, memory_order_relaxed);
            if (p != last[i]) {
                last[i] = p;
                last_t[i] = t;
            } else if (t - last_t[i] > opt.hang) {
                int op = atomic_load(&w->cur_op);
                fail("HANG: worker %d made no progress for %.0f s (at op %" PRIu64 ", in %s(%zu); "
                     "live %.1f MiB)", i, t - last_t[i], p, op_name[op], atomic_load(&w->cur_size),
                     mib((double)atomic_load(&live_bytes)));
            }
        }
        size_t rss = rss_bytes();
        if (rss > peak_rss_sampled)
            peak_rss_sampled = rss;
        if (opt.report > 0 && t >= next_report) {
            uint64_t ops = 0;
            for (int i = 0; i < opt.threads; i++)
                ops += atomic_load_explicit(&workers[i].progress, memory_order_relaxed);
            printf("stress: ... t=%.0fs ops=%" PRIu64 " (%.2fM/s) live=%.1fMiB max_live=%.1fMiB rss=%.1fMiB\n",
                   t - t0, ops, (double)ops / (t - t0) / 1e6, mib((double)atomic_load(&live_bytes)),
                   mib((double)atomic_load(&max_live)), mib((double)rss));
            fflush(stdout);
            next_report += opt.report;
        }
    }
    double elapsed = now_sec() - t0;

    /* The exchange: blocks of (now dead) threads, freed by main. */
    struct worker mainw;
    memset(&mainw, 0, sizeof mainw);
    mainw.id = -1;
    mainw.quota = UINT64_MAX;
    uint64_t left = 0;
    for (size_t j = 0; j < opt.exchange; j++)
        if (xchg.slot[j].p != NULL) {
            blk_free(&mainw, &xchg.slot[j], "before final free (exchange, main thread)");
            left++;
        }
    free(xchg.slot);

    struct worker sum;
    memset(&sum, 0, sizeof sum);
    for (int t = 0; t < opt.threads; t++) {
        struct worker *w = &workers[t];
        sum.ops += w->ops;
        sum.n_malloc += w->n_malloc;
        sum.n_calloc += w->n_calloc;
        sum.n_memalign += w->n_memalign;
        sum.n_realloc += w->n_realloc;
        sum.n_free += w->n_free;
        sum.n_cross += w->n_cross;
        sum.n_xchg += w->n_xchg;
        sum.n_bursts += w->n_bursts;
        sum.generations += w->generations;
        sum.bytes_alloc += w->bytes_alloc;
        sum.bytes_verified += w->bytes_verified;
        free(w->pool);
    }
    sum.ops += mainw.ops;
    sum.n_free += mainw.n_free;
    sum.n_cross += mainw.n_cross;
    sum.bytes_verified += mainw.bytes_verified;
    free(workers);
    free(last);
    free(last_t);

    int64_t live_end = atomic_load(&live_bytes);
    if (live_end != 0)
        fail("internal: %" PRId64 " live bytes left after freeing everything", live_end);
    if (sum.n_malloc + sum.n_calloc + sum.n_memalign != sum.n_free)
        fail("internal: %" PRIu64 " allocations but %" PRIu64 " frees",
             sum.n_malloc + sum.n_calloc + sum.n_memalign, sum.n_free);

    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    size_t peak_rss = (size_t)ru.ru_maxrss * KiB;
    if (peak_rss_sampled > peak_rss)
        peak_rss = peak_rss_sampled;
    size_t final_rss = rss_bytes();
    size_t maxl = (size_t)atomic_load(&max_live);
    size_t rss_limit = 64 * MiB + 2 * maxl;
    long hits = cap_dump();
    bool rss_bad = final_rss > rss_limit;
    bool ok = hits == 0 && !rss_bad;

    printf("stress: %s threads=%d seed=0x%" PRIx64 " time=%.1fs ops=%" PRIu64 " (%.2fM/s) "
           "allocated=%.1fMiB verified=%.1fMiB max_live=%.1fMiB peak_rss=%.1fMiB final_rss=%.1fMiB "
           "mallocs=%" PRIu64 " callocs=%" PRIu64 " memaligns=%" PRIu64 " reallocs=%" PRIu64
           " frees=%" PRIu64 " cross_thread=%" PRIu64 " exchanges=%" PRIu64 " bursts=%" PRIu64
           " thread_lives=%" PRIu64 " malloc_from=%s hakmem_lines=%ld\n",
           ok ? "PASS" : "FAIL", opt.threads, opt.seed, elapsed, sum.ops,
           (double)sum.ops / elapsed / 1e6, mib((double)sum.bytes_alloc),
           mib((double)sum.bytes_verified), mib((double)maxl), mib((double)peak_rss),
           mib((double)final_rss), sum.n_malloc, sum.n_calloc, sum.n_memalign, sum.n_realloc,
           sum.n_free, sum.n_cross, sum.n_xchg, sum.n_bursts, sum.generations, prov, hits);
    fflush(stdout);
    if (hits != 0)
        say("stress: FAIL: %ld line(s) starting with \"hakmem:\" on stderr (shown above)\n", hits);
    if (rss_bad)
        say("stress: FAIL: final RSS %.1f MiB exceeds 64 MiB + 2 x max live (%.1f MiB) = %.1f MiB\n",
            mib((double)final_rss), mib((double)maxl), mib((double)rss_limit));
    (void)left;
    return ok ? 0 : 1;
}
