/* Multi-threaded stress tests for hakmem, linked against libhakmem.so so the whole
 * process (Check included) allocates through hakmem.
 *
 *  - sanity:            the binary really uses hakmem (class size of 100 B is 128)
 *  - producer/consumer: millions of blocks malloc'd on one thread, freed on another
 *  - remote reuse:      blocks another thread freed are reused before fresh memory
 *  - short-lived:       1280 threads; blocks outlive their thread and are freed by
 *                       main / by threads of the next batch (abandoned regions)
 *  - realloc:           concurrent grow/shrink 1 B .. 2 MiB, contents preserved
 *  - abandoned release: an exited thread's blocks freed by two threads at once while
 *                       the released regions' chunks become large blocks
 *  - fork:              fork while another thread allocates; children allocate
 *  - fork-mt:           several threads fork at once while others allocate
 *  - fork-churn:        fork while other threads are being created and exit
 *  - visit:             malloc_trim in one thread takes in what it freed into an idle
 *                       thread's regions (a visit), and visits meet a thread at work
 *  - churn:             4,000 short-lived threads free all they allocated: in use back
 *                       where it started, within a region a class and a span
 *  - batch:             two threads free one block at once, thousands of times (each
 *                       double free reported once); a sleeping thread's frees come home
 *
 * Worker threads never call ck_assert (Check's failure path is not thread-safe):
 * they count errors in atomics that the test thread asserts on. */
#define _GNU_SOURCE
#include "config.h"
#include <check.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "hakmem.h"
#include "testrand.h"
/* gcc names a sanitizer build by a macro, clang by __has_feature. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifdef SANITIZED
#include <sanitizer/common_interface_defs.h>
#endif
#include "check_run.h"
#include "variant_check.h"
#include "visits.h"

/* ---------------------------------------------------------------- helpers */

#define MiB ((size_t)1 << 20)
#define KiB ((size_t)1 << 10)

/* How much RSS may grow over a test; a sanitizer's shadow memory needs its own bound. */
#ifndef RSS_SLACK
#define RSS_SLACK (256 * MiB)
#endif

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

static double now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline uint64_t seed_of(const void *p, uint64_t seq)
{
    return mix64((uint64_t)(uintptr_t)p ^ (seq * 0x9E3779B97F4A7C15ULL)) | 1;
}

/* Fill n bytes with a pattern determined by seed; word i = seed * (i + 1) ^ i. */
static void pat_fill(void *p, size_t n, uint64_t seed)
{
    uint64_t *w = p;
    size_t nw = n / 8, i;
    for (i = 0; i < nw; i++)
        w[i] = seed * (i + 1) ^ i;
    uint64_t last = seed * (i + 1) ^ i;
    memcpy((char *)p + nw * 8, &last, n - nw * 8);
}

static int pat_check(const void *p, size_t n, uint64_t seed)
{
    const uint64_t *w = p;
    size_t nw = n / 8, i;
    for (i = 0; i < nw; i++)
        if (w[i] != (seed * (i + 1) ^ i))
            return 0;
    uint64_t last = seed * (i + 1) ^ i;
    return memcmp((const char *)p + nw * 8, &last, n - nw * 8) == 0;
}

/* Position-only byte pattern (for realloc: a prefix stays valid whatever the size). */
static inline uint8_t rpat(uint64_t seed, size_t i)
{
    return (uint8_t)((seed >> ((i & 7) * 8)) + (i >> 3) * 131u + (i >> 11));
}

/* Misuse reports ("hakmem: ..." on fd 2) during a test mean the allocator
 * thought a valid free was a double free or a foreign pointer: capture fd 2
 * around the work (children inherit it), echo it back and count such lines. */
static FILE *cap_file;
static int cap_saved_fd = -1;

static void cap_begin(void)
{
    fflush(stderr);
    cap_file = tmpfile();
    if (cap_file == NULL)
        return;
    cap_saved_fd = dup(2);
#ifdef SANITIZED
    /* A sanitizer report ends the process before cap_end could echo it: send reports to
     * the real stderr, kept open for the rest of the run. */
    static int report_fd = -1;
    if (report_fd < 0 && (report_fd = dup(2)) >= 0)
        __sanitizer_set_report_fd((void *)(intptr_t)report_fd);
#endif
    dup2(fileno(cap_file), 2);
}

/* The reports captured; those holding `expected` (a test's own misuse) are counted but
 * not echoed, so a harness reading stderr sees only the unexpected. */
static long cap_end_expecting(const char *expected)
{
    long n = 0;
    char line[512];
    if (cap_file == NULL)
        return 0;
    fflush(stderr);
    dup2(cap_saved_fd, 2);
    close(cap_saved_fd);
    cap_saved_fd = -1;
    rewind(cap_file);
    while (fgets(line, sizeof line, cap_file) != NULL) {
        int report = strncmp(line, "hakmem:", 7) == 0;
        n += report;
        if (!report || expected == NULL || strstr(line, expected) == NULL)
            fputs(line, stderr);
    }
    fclose(cap_file);
    cap_file = NULL;
    return n;
}

static long cap_end(void)
{
    return cap_end_expecting(NULL);
}

/* 16 B .. 64 KiB, mostly small. */
static size_t mixed_size(uint64_t *rng)
{
    uint64_t r = rng_next(rng);
    unsigned bucket = (unsigned)(r % 100);
    r >>= 8;
    if (bucket < 80)
        return 16 + r % (256 - 16 + 1);
    if (bucket < 95)
        return 257 + r % (4096 - 257 + 1);
    if (bucket < 99)
        return 4097 + r % (16384 - 4097 + 1);
    return 16385 + r % (65536 - 16385 + 1);
}

/* ------------------------------------------------------------ 0. sanity */

START_TEST(test_uses_hakmem)
{
    void *p = malloc(100);
    ck_assert_ptr_nonnull(p);
    size_t us = malloc_usable_size(p), expect = HAK_HARDENED ? 100 : 112;
    ck_assert_msg(us == expect, "malloc_usable_size(malloc(100)) = %zu, expected %zu "
                  "(hakmem's answer); is the test really linked with hakmem?", us, expect);
    free(p);
}
END_TEST

/* ------------------------------------------------- 1. producer / consumer */

#define PC_PRODUCERS   2
#define PC_CONSUMERS   2
#ifndef PC_PER_PROD
#define PC_PER_PROD    2500000
#endif
#define PC_BATCH       64
#define PC_QCAP        2048          /* items; a multiple of PC_BATCH */

struct pc_item {
    void    *p;
    uint32_t size;
    uint64_t seq;
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t  not_full, not_empty;
    struct pc_item  ring[PC_QCAP];
    size_t          head, count;
    int             producers_left;
} pcq;

static atomic_long pc_produced, pc_verified, pc_bad, pc_freed, pc_null, pc_small_usable;

static void pcq_push(const struct pc_item *items, size_t n)
{
    pthread_mutex_lock(&pcq.mu);
    while (PC_QCAP - pcq.count < n)
        pthread_cond_wait(&pcq.not_full, &pcq.mu);
    for (size_t i = 0; i < n; i++)
        pcq.ring[(pcq.head + pcq.count + i) % PC_QCAP] = items[i];
    pcq.count += n;
    pthread_cond_signal(&pcq.not_empty);
    pthread_mutex_unlock(&pcq.mu);
}

/* Pops up to max items; returns 0 when producers are done and the queue is empty. */
static size_t pcq_pop(struct pc_item *items, size_t max)
{
    pthread_mutex_lock(&pcq.mu);
    while (pcq.count == 0 && pcq.producers_left > 0)
        pthread_cond_wait(&pcq.not_empty, &pcq.mu);
    size_t n = pcq.count < max ? pcq.count : max;
    for (size_t i = 0; i < n; i++)
        items[i] = pcq.ring[(pcq.head + i) % PC_QCAP];
    pcq.head = (pcq.head + n) % PC_QCAP;
    pcq.count -= n;
    if (n > 0)
        pthread_cond_signal(&pcq.not_full);
    if (pcq.count > 0)
        pthread_cond_signal(&pcq.not_empty);
    pthread_mutex_unlock(&pcq.mu);
    return n;
}

static void *pc_producer(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    uint64_t rng = 0x1234567ULL + id * 0x9E3779B97F4A7C15ULL;
    struct pc_item batch[PC_BATCH];
    size_t nb = 0;
    for (uint64_t i = 0; i < PC_PER_PROD; i++) {
        size_t sz = mixed_size(&rng);
        void *p = malloc(sz);
        if (p == NULL) {
            atomic_fetch_add(&pc_null, 1);
            continue;
        }
        if (malloc_usable_size(p) < sz)
            atomic_fetch_add(&pc_small_usable, 1);
        uint64_t seq = ((uint64_t)id << 40) | i;
        pat_fill(p, sz, seed_of(p, seq));
        batch[nb].p = p;
        batch[nb].size = (uint32_t)sz;
        batch[nb].seq = seq;
        if (++nb == PC_BATCH) {
            pcq_push(batch, nb);
            atomic_fetch_add(&pc_produced, (long)nb);
            nb = 0;
        }
    }
    if (nb > 0) {
        pcq_push(batch, nb);
        atomic_fetch_add(&pc_produced, (long)nb);
    }
    pthread_mutex_lock(&pcq.mu);
    pcq.producers_left--;
    pthread_cond_broadcast(&pcq.not_empty);
    pthread_mutex_unlock(&pcq.mu);
    return NULL;
}

static void *pc_consumer(void *arg)
{
    (void)arg;
    struct pc_item batch[PC_BATCH];
    size_t n;
    long ok = 0, bad = 0, freed = 0;
    while ((n = pcq_pop(batch, PC_BATCH)) > 0) {
        for (size_t i = 0; i < n; i++) {
            if (pat_check(batch[i].p, batch[i].size, seed_of(batch[i].p, batch[i].seq)))
                ok++;
            else
                bad++;
            free(batch[i].p);
            freed++;
        }
    }
    atomic_fetch_add(&pc_verified, ok);
    atomic_fetch_add(&pc_bad, bad);
    atomic_fetch_add(&pc_freed, freed);
    return NULL;
}

/* Blocks another thread freed come back to their owner before untouched memory does:
 * the next malloc of the class reuses one of them instead of carving a fresh block. */
enum { RF_N = 16, RF_SIZE = 3000 };      /* a mid class: no thread cache in the way */

static void *rf_free_all(void *arg)
{
    void **v = arg;
    for (int i = 0; i < RF_N; i++)
        free(v[i]);
    return NULL;
}

START_TEST(test_remote_frees_reused_first)
{
    void *a[RF_N];
    for (int i = 0; i < RF_N; i++) {
        a[i] = malloc(RF_SIZE);
        ck_assert_ptr_nonnull(a[i]);
        memset(a[i], i, RF_SIZE);
    }
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, rf_free_all, a), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    void *b = malloc(RF_SIZE);
    ck_assert_ptr_nonnull(b);
    int found = 0;
    for (int i = 0; i < RF_N; i++)
        found |= b == a[i];
    ck_assert_msg(found, "malloc after remote frees returned %p, none of the freed blocks", b);
    free(b);
}
END_TEST

START_TEST(test_producer_consumer)
{
    size_t rss0 = rss_bytes();
    double t0 = now_sec();
    cap_begin();
    pthread_mutex_init(&pcq.mu, NULL);
    pthread_cond_init(&pcq.not_full, NULL);
    pthread_cond_init(&pcq.not_empty, NULL);
    pcq.head = pcq.count = 0;
    pcq.producers_left = PC_PRODUCERS;

    pthread_t prod[PC_PRODUCERS], cons[PC_CONSUMERS];
    for (uintptr_t i = 0; i < PC_CONSUMERS; i++)
        ck_assert_int_eq(pthread_create(&cons[i], NULL, pc_consumer, NULL), 0);
    for (uintptr_t i = 0; i < PC_PRODUCERS; i++)
        ck_assert_int_eq(pthread_create(&prod[i], NULL, pc_producer, (void *)(i + 1)), 0);
    for (int i = 0; i < PC_PRODUCERS; i++)
        ck_assert_int_eq(pthread_join(prod[i], NULL), 0);
    for (int i = 0; i < PC_CONSUMERS; i++)
        ck_assert_int_eq(pthread_join(cons[i], NULL), 0);
    long misuse = cap_end();

    size_t rss1 = rss_bytes();
    fprintf(stderr, "# producer/consumer: %ld blocks in %.2f s, rss %zu -> %zu KiB\n",
            atomic_load(&pc_produced), now_sec() - t0, rss0 / 1024, rss1 / 1024);

    ck_assert_int_eq(misuse, 0);
    ck_assert_int_eq(atomic_load(&pc_null), 0);
    ck_assert_int_eq(atomic_load(&pc_small_usable), 0);
    ck_assert_int_eq(atomic_load(&pc_produced), (long)PC_PRODUCERS * PC_PER_PROD);
    ck_assert_int_eq(atomic_load(&pc_bad), 0);
    ck_assert_int_eq(atomic_load(&pc_verified), (long)PC_PRODUCERS * PC_PER_PROD);
    ck_assert_int_eq(atomic_load(&pc_freed), (long)PC_PRODUCERS * PC_PER_PROD);
    ck_assert_uint_eq(pcq.count, 0);
    ck_assert_msg(rss1 < rss0 + RSS_SLACK, "RSS grew from %zu KiB to %zu KiB",
                  rss0 / 1024, rss1 / 1024);
}
END_TEST

/* ------------------------------------------- 2. many short-lived threads */

#ifndef SL_BATCHES
#define SL_BATCHES     20
#endif
#define SL_PER_BATCH   64
#define SL_BLOCKS      300
#define SL_HANDOFF     8         /* blocks handed to main, and as many to the next batch */

struct sl_block {
    void    *p;
    size_t   size;
    uint64_t seq;
};

struct sl_arg {
    int               batch, idx;
    struct sl_block  *inbox;     /* from the previous batch: verify and free */
    size_t            ninbox;
    struct sl_block   to_main[SL_HANDOFF];
    struct sl_block   to_next[SL_HANDOFF];
};

static atomic_long sl_ok, sl_bad, sl_null, sl_allocs, sl_frees;

static int sl_verify_free(struct sl_block *b)
{
    int ok = pat_check(b->p, b->size, seed_of(b->p, b->seq));
    free(b->p);
    b->p = NULL;
    return ok;
}

static size_t sl_size(uint64_t *rng)
{
    uint64_t r = rng_next(rng);
    switch (r % 8) {
    case 0: return 1 + (r >> 8) % 8192;
    case 1: return 1 + (r >> 8) % 65536;
    default: return 1 + (r >> 8) % 512;
    }
}

static void *sl_thread(void *varg)
{
    struct sl_arg *a = varg;
    uint64_t rng = mix64(((uint64_t)a->batch << 20) | (uint64_t)a->idx) | 1;
    struct sl_block blocks[SL_BLOCKS];
    long ok = 0, bad = 0, nul = 0, allocs = 0, frees = 0;

    /* Frees of blocks whose owner thread has exited. */
    for (size_t i = 0; i < a->ninbox; i++) {
        if (sl_verify_free(&a->inbox[i]))
            ok++;
        else
            bad++;
        frees++;
    }

    for (int i = 0; i < SL_BLOCKS; i++) {
        blocks[i].size = sl_size(&rng);
        blocks[i].seq = ((uint64_t)a->batch << 32) | ((uint64_t)a->idx << 16) | (uint64_t)i;
        blocks[i].p = malloc(blocks[i].size);
        if (blocks[i].p == NULL) {
            nul++;
            blocks[i].size = 0;
            continue;
        }
        allocs++;
        pat_fill(blocks[i].p, blocks[i].size, seed_of(blocks[i].p, blocks[i].seq));
        /* free some of the earlier ones as we go, and reallocate them */
        if (i >= 10 && (rng_next(&rng) & 3) == 0) {
            int j = (int)(rng_next(&rng) % (uint64_t)i);
            if (blocks[j].p != NULL) {
                if (sl_verify_free(&blocks[j]))
                    ok++;
                else
                    bad++;
                frees++;
                blocks[j].size = sl_size(&rng);
                blocks[j].seq ^= 1ULL << 31;
                blocks[j].p = malloc(blocks[j].size);
                if (blocks[j].p == NULL) {
                    nul++;
                } else {
                    allocs++;
                    pat_fill(blocks[j].p, blocks[j].size, seed_of(blocks[j].p, blocks[j].seq));
                }
            }
        }
    }

    /* Hand the first 2*SL_HANDOFF live blocks away; free the rest here. */
    int nm = 0, nn = 0;
    memset(a->to_main, 0, sizeof a->to_main);
    memset(a->to_next, 0, sizeof a->to_next);
    for (int i = 0; i < SL_BLOCKS; i++) {
        if (blocks[i].p == NULL)
            continue;
        if (nm < SL_HANDOFF) {
            a->to_main[nm++] = blocks[i];
        } else if (nn < SL_HANDOFF) {
            a->to_next[nn++] = blocks[i];
        } else {
            if (sl_verify_free(&blocks[i]))
                ok++;
            else
                bad++;
            frees++;
        }
    }
    atomic_fetch_add(&sl_ok, ok);
    atomic_fetch_add(&sl_bad, bad);
    atomic_fetch_add(&sl_null, nul);
    atomic_fetch_add(&sl_allocs, allocs);
    atomic_fetch_add(&sl_frees, frees);
    return NULL;
}

START_TEST(test_short_lived_threads)
{
    size_t rss0 = rss_bytes();
    static struct sl_arg args[2][SL_PER_BATCH];
    pthread_t tids[SL_PER_BATCH];
    long main_ok = 0, main_bad = 0, main_frees = 0;
    int cur = 0;

    cap_begin();
    memset(args, 0, sizeof args);
    for (int b = 0; b < SL_BATCHES; b++) {
        struct sl_arg *prev = b > 0 ? args[cur ^ 1] : NULL;
        for (int t = 0; t < SL_PER_BATCH; t++) {
            struct sl_arg *a = &args[cur][t];
            a->batch = b;
            a->idx = t;
            a->inbox = prev ? prev[t].to_next : NULL;
            a->ninbox = prev ? SL_HANDOFF : 0;
            int rc = pthread_create(&tids[t], NULL, sl_thread, a);
            ck_assert_msg(rc == 0, "pthread_create failed in batch %d: %s", b, strerror(rc));
        }
        for (int t = 0; t < SL_PER_BATCH; t++)
            ck_assert_int_eq(pthread_join(tids[t], NULL), 0);
        /* All threads of this batch have exited: their regions are abandoned. */
        for (int t = 0; t < SL_PER_BATCH; t++) {
            for (int k = 0; k < SL_HANDOFF; k++) {
                struct sl_block *blk = &args[cur][t].to_main[k];
                ck_assert_ptr_nonnull(blk->p);
                if (sl_verify_free(blk))
                    main_ok++;
                else
                    main_bad++;
                main_frees++;
            }
        }
        cur ^= 1;
    }
    /* The last batch's to_next blocks: nobody follows, free them here. */
    for (int t = 0; t < SL_PER_BATCH; t++) {
        for (int k = 0; k < SL_HANDOFF; k++) {
            struct sl_block *blk = &args[cur ^ 1][t].to_next[k];
            ck_assert_ptr_nonnull(blk->p);
            if (sl_verify_free(blk))
                main_ok++;
            else
                main_bad++;
            main_frees++;
        }
    }
    long misuse = cap_end();
    size_t rss1 = rss_bytes();
    fprintf(stderr, "# short-lived: %ld allocs, rss %zu -> %zu KiB\n",
            atomic_load(&sl_allocs), rss0 / 1024, rss1 / 1024);

    ck_assert_int_eq(misuse, 0);
    ck_assert_int_eq(atomic_load(&sl_null), 0);
    ck_assert_int_eq(atomic_load(&sl_bad), 0);
    ck_assert_int_eq(main_bad, 0);
    /* every allocation was verified and freed exactly once */
    ck_assert_int_ge(atomic_load(&sl_allocs), (long)SL_BATCHES * SL_PER_BATCH * SL_BLOCKS);
    ck_assert_int_eq(atomic_load(&sl_frees) + main_frees, atomic_load(&sl_allocs));
    ck_assert_int_eq(atomic_load(&sl_ok) + main_ok, atomic_load(&sl_allocs));
    ck_assert_int_eq(main_frees, (long)SL_BATCHES * SL_PER_BATCH * SL_HANDOFF + SL_PER_BATCH * SL_HANDOFF);
    ck_assert_msg(rss1 < rss0 + RSS_SLACK, "RSS grew from %zu KiB to %zu KiB",
                  rss0 / 1024, rss1 / 1024);
}
END_TEST

/* --------------------------------------------------- 3. concurrent realloc */

#define RA_THREADS     4
#define RA_BUFS        4
#define RA_STEPS       1200
#define RA_MAX         (2 * MiB)

static atomic_long ra_steps, ra_bad, ra_null, ra_small_usable;

static int ra_check(const uint8_t *p, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != rpat(seed, i))
            return 0;
    return 1;
}

static void ra_fill(uint8_t *p, size_t from, size_t to, uint64_t seed)
{
    for (size_t i = from; i < to; i++)
        p[i] = rpat(seed, i);
}

/* realloc buf from *cur to n bytes, check the kept prefix, fill the rest. */
static uint8_t *ra_step(uint8_t *buf, size_t *cur, size_t n, uint64_t seed,
                        long *steps, long *bad, long *nul, long *small)
{
    uint8_t *q = realloc(buf, n);
    (*steps)++;
    if (q == NULL) {
        (*nul)++;
        return buf;                 /* old block still valid */
    }
    if (malloc_usable_size(q) < n)
        (*small)++;
    size_t keep = *cur < n ? *cur : n;
    if (!ra_check(q, keep, seed))
        (*bad)++;
    ra_fill(q, keep, n, seed);
    *cur = n;
    return q;
}

static void *ra_thread(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    uint64_t rng = mix64(0xabcdef + id) | 1;
    uint8_t *bufs[RA_BUFS] = {0};
    size_t sizes[RA_BUFS] = {0};
    uint64_t seeds[RA_BUFS];
    long steps = 0, bad = 0, nul = 0, small = 0;

    for (int b = 0; b < RA_BUFS; b++)
        seeds[b] = mix64((id << 8) | (uint64_t)b) | 0x0101010101010101ULL;

    /* Deterministic sweep on buffer 0: grow 1 B -> 2 MiB, then shrink back to 1 B. */
    for (size_t n = 1; n <= RA_MAX; n = n + n / 3 + 1)
        bufs[0] = ra_step(bufs[0], &sizes[0], n, seeds[0], &steps, &bad, &nul, &small);
    bufs[0] = ra_step(bufs[0], &sizes[0], RA_MAX, seeds[0], &steps, &bad, &nul, &small);
    for (size_t n = RA_MAX; n >= 1; n = n - n / 3 - 1)
        bufs[0] = ra_step(bufs[0], &sizes[0], n, seeds[0], &steps, &bad, &nul, &small);

    /* Random walk on all buffers; sizes log-uniform in [1, 2 MiB]. */
    for (int s = 0; s < RA_STEPS; s++) {
        int b = (int)(rng_next(&rng) % RA_BUFS);
        uint64_t r = rng_next(&rng);
        unsigned bits = (unsigned)(r % 22);          /* 0..21 */
        size_t n = ((size_t)1 << bits) + ((r >> 8) & (((size_t)1 << bits) - 1));
        if (n > RA_MAX)
            n = RA_MAX;
        if (n == 0)
            n = 1;
        /* small relative step sometimes (in-place grow/shrink paths) */
        if ((r >> 40) % 4 == 0 && sizes[b] > 0) {
            size_t d = 1 + (r >> 44) % 64;
            n = ((r >> 50) & 1) ? sizes[b] + d : (sizes[b] > d ? sizes[b] - d : 1);
            if (n > RA_MAX)
                n = RA_MAX;
        }
        bufs[b] = ra_step(bufs[b], &sizes[b], n, seeds[b], &steps, &bad, &nul, &small);
    }
    for (int b = 0; b < RA_BUFS; b++) {
        if (bufs[b] != NULL && !ra_check(bufs[b], sizes[b], seeds[b]))
            bad++;
        free(bufs[b]);
    }
    atomic_fetch_add(&ra_steps, steps);
    atomic_fetch_add(&ra_bad, bad);
    atomic_fetch_add(&ra_null, nul);
    atomic_fetch_add(&ra_small_usable, small);
    return NULL;
}

START_TEST(test_concurrent_realloc)
{
    pthread_t t[RA_THREADS];
    cap_begin();
    for (uintptr_t i = 0; i < RA_THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, ra_thread, (void *)i), 0);
    for (int i = 0; i < RA_THREADS; i++)
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
    ck_assert_int_eq(cap_end(), 0);
    ck_assert_int_eq(atomic_load(&ra_null), 0);
    ck_assert_int_eq(atomic_load(&ra_small_usable), 0);
    ck_assert_int_eq(atomic_load(&ra_bad), 0);
    ck_assert_int_ge(atomic_load(&ra_steps), (long)RA_THREADS * RA_STEPS);
}
END_TEST

/* ------------------------------------------- abandoned regions released by a free */

/* Two threads free an exited thread's blocks at once: one the first block of each region
 * (the first pending free there), the other all the rest (whose last releases the region),
 * while two more take the chunks for large blocks filled with 0xff.  The first free must
 * not read its region after its push: by then it may be a large block's bytes (such a free
 * read 0xff.. as the owner to tell, and crashed about one run of 1000 rounds in five). */
#define AR_BLOCKS  32768
#define AR_ROUNDS  1000
#define AR_SEC     3.0

static void *ar_blk[AR_BLOCKS];
static char ar_first[AR_BLOCKS];
static atomic_int ar_round, ar_started, ar_done, ar_stop;
static atomic_long ar_bad;

static void *ar_alloc(void *arg)
{
    (void)arg;
    for (uintptr_t i = 0; i < AR_BLOCKS; i++) {
        ar_blk[i] = malloc(48);
        if (ar_blk[i] != NULL)
            *(uintptr_t *)ar_blk[i] = i;
    }
    return NULL;
}

static void *ar_freer(void *arg)
{
    int firsts = arg == NULL, seen = 0;
    for (;;) {
        int r;
        while ((r = atomic_load(&ar_round)) == seen && !atomic_load(&ar_stop))
            sched_yield();
        if (atomic_load(&ar_stop))
            return NULL;
        seen = r;
        if (firsts)
            atomic_store(&ar_started, 1);
        else
            while (!atomic_load(&ar_started))
                ;
        long bad = 0;
        for (uintptr_t i = 0; i < AR_BLOCKS; i++) {
            if (ar_blk[i] == NULL) {
                bad++;
            } else if (ar_first[i] == firsts) {
                bad += *(uintptr_t *)ar_blk[i] != i;
                free(ar_blk[i]);
            }
        }
        if (bad)
            atomic_fetch_add(&ar_bad, bad);
        atomic_fetch_add(&ar_done, 1);
    }
}

static void *ar_large(void *arg)
{
    uint64_t rng = (uintptr_t)arg | 1;
    char *held[8] = {0};
    for (unsigned k = 0; !atomic_load(&ar_stop); k++) {
        size_t n = 256 * KiB + (rng_next(&rng) % 4) * 64 * KiB + 100;
        free(held[k % 8]);
        held[k % 8] = malloc(n);
        if (held[k % 8] != NULL)
            memset(held[k % 8], 0xff, n);
    }
    for (int i = 0; i < 8; i++)
        free(held[i]);
    return NULL;
}

START_TEST(test_abandoned_region_released_under_a_free)
{
    pthread_t fr[2], lg[2];
    atomic_store(&ar_stop, 0);
    atomic_store(&ar_round, 0);
    cap_begin();
    for (uintptr_t i = 0; i < 2; i++) {
        ck_assert_int_eq(pthread_create(&fr[i], NULL, ar_freer, i ? (void *)1 : NULL), 0);
        ck_assert_int_eq(pthread_create(&lg[i], NULL, ar_large, (void *)(i + 1)), 0);
    }
    double end = now_sec() + AR_SEC;
    int rounds = 0;
    while (rounds < AR_ROUNDS && now_sec() < end) {
        pthread_t a;
        ck_assert_int_eq(pthread_create(&a, NULL, ar_alloc, NULL), 0);
        ck_assert_int_eq(pthread_join(a, NULL), 0);
        for (int i = 0; i < AR_BLOCKS; i++)
            ar_first[i] = i == 0 || ((uintptr_t)ar_blk[i] >> 16) != ((uintptr_t)ar_blk[i - 1] >> 16);
        atomic_store(&ar_started, 0);
        atomic_store(&ar_done, 0);
        atomic_store(&ar_round, ++rounds);          /* publishes the blocks and marks */
        while (atomic_load(&ar_done) < 2)
            sched_yield();
    }
    atomic_store(&ar_stop, 1);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(pthread_join(fr[i], NULL), 0);
        ck_assert_int_eq(pthread_join(lg[i], NULL), 0);
    }
    ck_assert_int_eq(cap_end(), 0);
    ck_assert_int_eq(atomic_load(&ar_bad), 0);
    ck_assert_int_gt(rounds, 0);
}
END_TEST

/* ------------------------------------------------------------ 4/5. fork */

/* A fork child's bound (deadlock detection), times CK_TIMEOUT_MULTIPLIER (as Check's own
 * timeouts are); a bound for a failing run, not a speed asked of a passing one. */
#define FK_WAIT_SEC    (10.0 * fk_time_scale())
#define FK_HELD        64          /* blocks allocated before fork, freed in the child */

static atomic_int fk_stop;
static int fk_child_trims;          /* the children trim too (test_fork_while_trimming) */
static atomic_long fk_bg_iters, fk_bg_bad;

/* Blocks allocated by a background thread and left untouched afterwards: a child
 * frees them although their owner thread does not exist in the child. */
struct fk_held {
    void    *p[FK_HELD];
    size_t   size[FK_HELD];
    atomic_int ready;
};
static struct fk_held fk_held;

static void *fk_background(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    uint64_t rng = mix64(0x5151 + id) | 1;
    void *live[32] = {0};
    size_t lsz[32] = {0};
    uint64_t lseq[32] = {0};
    long bad = 0, iters = 0;

    if (id == 0) {
        for (int i = 0; i < FK_HELD; i++) {
            size_t sz = i % 8 == 7 ? 300 * KiB + (size_t)i : 16 + (size_t)i * 97;
            fk_held.p[i] = malloc(sz);
            fk_held.size[i] = sz;
            if (fk_held.p[i] != NULL)
                pat_fill(fk_held.p[i], sz, seed_of(fk_held.p[i], 777));
        }
        atomic_store(&fk_held.ready, 1);
    }
    while (!atomic_load_explicit(&fk_stop, memory_order_relaxed)) {
        unsigned k = (unsigned)(rng_next(&rng) % 32);
        if (live[k] != NULL) {
            if (!pat_check(live[k], lsz[k], seed_of(live[k], lseq[k])))
                bad++;
            free(live[k]);
            live[k] = NULL;
        }
        uint64_t r = rng_next(&rng);
        size_t sz = r % 16 == 0 ? (r >> 8) % (1536 * KiB) + 1 : (r >> 8) % 4096 + 1;
        live[k] = malloc(sz);
        if (live[k] != NULL) {
            /* touch only a prefix of big blocks to keep the loop fast */
            lsz[k] = sz > 8192 ? 8192 : sz;
            lseq[k] = (uint64_t)iters;
            pat_fill(live[k], lsz[k], seed_of(live[k], lseq[k]));
        } else {
            bad++;
        }
        iters++;
    }
    for (int k = 0; k < 32; k++) {
        if (live[k] != NULL && !pat_check(live[k], lsz[k], seed_of(live[k], lseq[k])))
            bad++;
        free(live[k]);
    }
    atomic_fetch_add(&fk_bg_iters, iters);
    atomic_fetch_add(&fk_bg_bad, bad);
    return NULL;
}

/* A thread started inside the child: the allocator must be fully usable there. */
static void *fk_child_thread(void *arg)
{
    uint64_t rng = (uint64_t)(uintptr_t)arg | 1;
    void *p[64];
    size_t sz[64];
    for (int i = 0; i < 64; i++) {
        sz[i] = 1 + rng_next(&rng) % (i % 16 == 0 ? 1536 * KiB : 4096);
        p[i] = malloc(sz[i]);
        if (p[i] == NULL)
            return (void *)1;
        pat_fill(p[i], sz[i], seed_of(p[i], (uint64_t)i));
    }
    for (int i = 0; i < 64; i++) {
        if (!pat_check(p[i], sz[i], seed_of(p[i], (uint64_t)i)))
            return (void *)2;
        /* half freed here, half handed back to the child's main thread */
        if (i % 2 == 0) {
            free(p[i]);
            p[i] = NULL;
        }
    }
    void **out = malloc(sizeof p);
    if (out == NULL)
        return (void *)3;
    memcpy(out, p, sizeof p);
    return out;
}

/* The child's work.  Returns the exit code: 0 ok, else which check failed. */
static int fk_child_work(unsigned salt)
{
    uint64_t rng = mix64(0xC0FFEE ^ salt ^ ((uint64_t)getpid() << 20)) | 1;
    enum { N = 256 };
    void *p[N] = {0};
    size_t sz[N] = {0};

    /* Blocks the parent's background thread allocated before the fork. */
    if (atomic_load(&fk_held.ready) && salt % 2 == 0) {
        for (int i = 0; i < FK_HELD; i++) {
            if (fk_held.p[i] == NULL)
                continue;
            if (!pat_check(fk_held.p[i], fk_held.size[i], seed_of(fk_held.p[i], 777)))
                return 10;
            free(fk_held.p[i]);
        }
    }
    for (int round = 0; round < 3000; round++) {
        int k = (int)(rng_next(&rng) % N);
        if (p[k] != NULL) {
            if (!pat_check(p[k], sz[k], seed_of(p[k], (uint64_t)k)))
                return 11;
            free(p[k]);
        }
        uint64_t r = rng_next(&rng);
        size_t n;
        switch (r % 64) {
        case 0: n = 1 * MiB; break;
        case 1: n = 1 * MiB + (r >> 8) % (512 * KiB); break;
        case 2: case 3: case 4: case 5: case 6: case 7:
            n = 1 + (r >> 8) % (256 * KiB); break;
        default: n = 1 + (r >> 8) % 2048; break;
        }
        p[k] = malloc(n);
        if (p[k] == NULL)
            return 12;
        if (malloc_usable_size(p[k]) < n)
            return 13;
        sz[k] = n;
        pat_fill(p[k], n, seed_of(p[k], (uint64_t)k));
    }
    for (int k = 0; k < N; k++) {
        if (p[k] != NULL) {
            if (!pat_check(p[k], sz[k], seed_of(p[k], (uint64_t)k)))
                return 14;
            free(p[k]);
        }
    }
    /* a thread in the child; blocks it leaves behind are freed here after it exited */
    pthread_t t;
    void *ret = NULL;
    if (pthread_create(&t, NULL, fk_child_thread, (void *)(uintptr_t)(salt * 7919u + 1)) != 0)
        return 18;
    if (pthread_join(t, &ret) != 0)
        return 19;
    if ((uintptr_t)ret < 16)
        return 20 + (int)(uintptr_t)ret;
    void **left = ret;
    for (int i = 1; i < 64; i += 2)
        free(left[i]);
    free(left);
    void *c = calloc(1000, 1000);
    if (c == NULL)
        return 15;
    for (size_t i = 0; i < 1000 * 1000; i += 4096)
        if (((char *)c)[i] != 0)
            return 16;
    c = realloc(c, 3 * MiB);
    if (c == NULL)
        return 17;
    free(c);
    if (fk_child_trims)
        malloc_trim(0);                 /* every lock a trim takes, in the child */
    return 0;
}

/* Wait for pid with a deadline; kills it on timeout.  Returns the wait status,
 * or -1 on timeout / waitpid error. */
static double fk_time_scale(void)
{
    const char *m = getenv("CK_TIMEOUT_MULTIPLIER");
    double v = m && *m ? atof(m) : 1.0;
    return v > 1.0 ? v : 1.0;
}

static int wait_deadline(pid_t pid, double secs)
{
    double deadline = now_sec() + secs;
    int st;
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return st;
        if (r < 0 && errno != EINTR)
            return -1;
        if (now_sec() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        usleep(1000);
    }
}

struct fk_result {
    int forks, ok, timeouts, failed, fork_errors;
    int last_status;
};

static void fk_do_forks(int n, unsigned salt, struct fk_result *res)
{
    for (int i = 0; i < n; i++) {
        /* the forking thread allocates too, so it holds heap state at fork time */
        void *mine = malloc(64 + (size_t)i * 13);
        pid_t pid = fork();
        if (pid < 0) {
            res->fork_errors++;
            free(mine);
            continue;
        }
        if (pid == 0) {
            alarm((unsigned)FK_WAIT_SEC + 5);   /* in case the parent is gone */
            free(mine);
            _exit(fk_child_work(salt + (unsigned)i));
        }
        free(mine);
        res->forks++;
        int st = wait_deadline(pid, FK_WAIT_SEC);
        if (st == -1) {
            res->timeouts++;
        } else if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
            res->ok++;
        } else {
            res->failed++;
            res->last_status = st;
        }
    }
}

static void fk_start_background(pthread_t *t, int n)
{
    atomic_store(&fk_stop, 0);
    atomic_store(&fk_bg_iters, 0);
    atomic_store(&fk_bg_bad, 0);
    for (uintptr_t i = 0; i < (uintptr_t)n; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, fk_background, (void *)i), 0);
    /* let the background threads get going (and fk_held be filled) */
    for (int i = 0; i < (int)(10000 * fk_time_scale()) && !atomic_load(&fk_held.ready); i++)
        usleep(1000);
    ck_assert_int_eq(atomic_load(&fk_held.ready), 1);
}

static void fk_stop_background(pthread_t *t, int n)
{
    atomic_store(&fk_stop, 1);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
    ck_assert_int_eq(atomic_load(&fk_bg_bad), 0);
    ck_assert_int_gt(atomic_load(&fk_bg_iters), 0);
    for (int i = 0; i < FK_HELD; i++) {
        ck_assert_ptr_nonnull(fk_held.p[i]);
        ck_assert(pat_check(fk_held.p[i], fk_held.size[i], seed_of(fk_held.p[i], 777)));
        free(fk_held.p[i]);
        fk_held.p[i] = NULL;
    }
    atomic_store(&fk_held.ready, 0);
}

static void fk_report(const char *what, const struct fk_result *r, int expect)
{
    ck_assert_msg(r->fork_errors == 0, "%s: %d fork() errors", what, r->fork_errors);
    ck_assert_msg(r->timeouts == 0, "%s: %d of %d children did not finish within %.0f s "
                  "(deadlock after fork?)", what, r->timeouts, r->forks, FK_WAIT_SEC);
    ck_assert_msg(r->failed == 0, "%s: %d of %d children failed; last %s %d", what,
                  r->failed, r->forks,
                  WIFEXITED(r->last_status) ? "exit status" : "signal",
                  WIFEXITED(r->last_status) ? WEXITSTATUS(r->last_status) : WTERMSIG(r->last_status));
    ck_assert_int_eq(r->forks, expect);
    ck_assert_int_eq(r->ok, expect);
}

START_TEST(test_fork_while_allocating)
{
    pthread_t bg[1];
    struct fk_result res = {0};
    cap_begin();
    fk_start_background(bg, 1);
    fk_do_forks(50, 0, &res);
    fk_stop_background(bg, 1);
    ck_assert_int_eq(cap_end(), 0);
    fk_report("fork", &res, 50);
}
END_TEST

#define FM_FORKERS     2
#define FM_FORKS       20
#define FM_ALLOCATORS  2

struct fm_arg {
    int idx;
    struct fk_result res;
};

static void *fm_forker(void *varg)
{
    struct fm_arg *a = varg;
    fk_do_forks(FM_FORKS, 1000u * (unsigned)(a->idx + 1), &a->res);
    return NULL;
}

/* A thread that trims in a loop holds, one after another, the locks a trim takes (the
 * sparse pass's, the pool's, the heap list's for its visits): a fork at any moment must
 * leave the child free to allocate, free and trim itself (a lock not re-initialised in
 * the child hangs it). */
static void *fk_trimmer(void *arg)
{
    (void)arg;
    long n = 0;
    while (!atomic_load_explicit(&fk_stop, memory_order_relaxed)) {
        void *p = malloc(200 + (size_t)(n % 64) * 16);
        free(p);
        malloc_trim(0);
        n++;
    }
    atomic_fetch_add(&fk_bg_iters, n);
    return NULL;
}

START_TEST(test_fork_while_trimming)
{
    pthread_t bg[1], tr;
    struct fk_result res = {0};
    cap_begin();
    fk_start_background(bg, 1);
    ck_assert_int_eq(pthread_create(&tr, NULL, fk_trimmer, NULL), 0);
    fk_child_trims = 1;
    fk_do_forks(40, 7, &res);
    fk_child_trims = 0;
    fk_stop_background(bg, 1);
    ck_assert_int_eq(pthread_join(tr, NULL), 0);
    ck_assert_int_eq(cap_end(), 0);
    fk_report("fork while trimming", &res, 40);
}
END_TEST

START_TEST(test_fork_from_many_threads)
{
    pthread_t bg[FM_ALLOCATORS], fk[FM_FORKERS];
    struct fm_arg args[FM_FORKERS];
    memset(args, 0, sizeof args);
    cap_begin();
    fk_start_background(bg, FM_ALLOCATORS);
    for (int i = 0; i < FM_FORKERS; i++) {
        args[i].idx = i;
        ck_assert_int_eq(pthread_create(&fk[i], NULL, fm_forker, &args[i]), 0);
    }
    for (int i = 0; i < FM_FORKERS; i++)
        ck_assert_int_eq(pthread_join(fk[i], NULL), 0);
    fk_stop_background(bg, FM_ALLOCATORS);
    ck_assert_int_eq(cap_end(), 0);
    for (int i = 0; i < FM_FORKERS; i++)
        fk_report("fork-mt", &args[i].res, FM_FORKS);
}
END_TEST

/* Fork while threads are being created and are exiting (heap retire / region
 * abandon racing with the fork handlers). */
#define CH_FORKS       30

static atomic_long ch_threads, ch_bad;

struct ch_arg {
    void    *in[16];            /* blocks left by the previous churn thread */
    size_t   in_size[16];
    void    *out[16];
    size_t   out_size[16];
    uint64_t seed;
};

static void *ch_thread(void *varg)
{
    struct ch_arg *a = varg;
    uint64_t rng = a->seed | 1;
    long bad = 0;
    for (int i = 0; i < 16; i++) {
        if (a->in[i] != NULL) {
            if (!pat_check(a->in[i], a->in_size[i], seed_of(a->in[i], 99)))
                bad++;
            free(a->in[i]);
        }
    }
    void *p[64];
    size_t sz[64];
    for (int i = 0; i < 64; i++) {
        sz[i] = 1 + rng_next(&rng) % (i % 16 == 0 ? 300 * KiB : 2048);
        p[i] = malloc(sz[i]);
        if (p[i] == NULL) {
            bad++;
            sz[i] = 0;
            continue;
        }
        pat_fill(p[i], sz[i], seed_of(p[i], 99));
    }
    for (int i = 0; i < 64; i++) {
        if (p[i] == NULL)
            continue;
        if (!pat_check(p[i], sz[i], seed_of(p[i], 99)))
            bad++;
        if (i < 16) {                       /* outlive this thread */
            a->out[i] = p[i];
            a->out_size[i] = sz[i];
        } else {
            free(p[i]);
        }
    }
    if (bad)
        atomic_fetch_add(&ch_bad, bad);
    return NULL;
}

static void *ch_churner(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    struct ch_arg a[2];
    memset(a, 0, sizeof a);
    int cur = 0;
    uint64_t n = 0;
    while (!atomic_load_explicit(&fk_stop, memory_order_relaxed)) {
        struct ch_arg *x = &a[cur], *prev = &a[cur ^ 1];
        memcpy(x->in, prev->out, sizeof x->in);
        memcpy(x->in_size, prev->out_size, sizeof x->in_size);
        memset(prev->out, 0, sizeof prev->out);
        memset(x->out, 0, sizeof x->out);
        x->seed = mix64((id << 40) | n++);
        pthread_t t;
        if (pthread_create(&t, NULL, ch_thread, x) != 0) {
            atomic_fetch_add(&ch_bad, 1);
            break;
        }
        pthread_join(t, NULL);
        atomic_fetch_add(&ch_threads, 1);
        cur ^= 1;
    }
    struct ch_arg *last = &a[cur ^ 1];
    for (int i = 0; i < 16; i++) {
        if (last->out[i] != NULL) {
            if (!pat_check(last->out[i], last->out_size[i], seed_of(last->out[i], 99)))
                atomic_fetch_add(&ch_bad, 1);
            free(last->out[i]);
        }
    }
    return NULL;
}

START_TEST(test_fork_during_thread_churn)
{
    pthread_t bg[1], ch[2];
    struct fk_result res = {0};
    atomic_store(&ch_threads, 0);
    atomic_store(&ch_bad, 0);
    cap_begin();
    fk_start_background(bg, 1);
    for (uintptr_t i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&ch[i], NULL, ch_churner, (void *)i), 0);
    fk_do_forks(CH_FORKS, 5000, &res);
    atomic_store(&fk_stop, 1);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_join(ch[i], NULL), 0);
    fk_stop_background(bg, 1);
    ck_assert_int_eq(cap_end(), 0);
    fk_report("fork-churn", &res, CH_FORKS);
    ck_assert_int_eq(atomic_load(&ch_bad), 0);
    ck_assert_int_gt(atomic_load(&ch_threads), CH_FORKS);
}
END_TEST

/* ------------------------------------------------------------ 9. visits */

/* A thread allocates, another frees everything, and the first sleeps: only the owner may
 * take those frees into its regions and spans, so they stayed its own until it woke.
 * malloc_trim in any thread now visits it (cold/visit.c) and the regions go back. */
#define VI_N 30000
static void *vi_blocks[VI_N];
static size_t vi_size[VI_N];
static pthread_mutex_t vi_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t vi_cv = PTHREAD_COND_INITIALIZER;
static int vi_stage;                    /* 1: blocks made; 2: freed and trimmed, go on */
static atomic_long vi_bad;

static size_t vi_size_of(unsigned i)
{
    return i % 3 == 0 ? 48 : i % 3 == 1 ? 1000 + i % 3000 : 300;   /* tiny and span sizes */
}

static void vi_wait(int stage)
{
    pthread_mutex_lock(&vi_mu);
    while (vi_stage < stage)
        pthread_cond_wait(&vi_cv, &vi_mu);
    pthread_mutex_unlock(&vi_mu);
}

static void vi_signal(int stage)
{
    pthread_mutex_lock(&vi_mu);
    vi_stage = stage;
    pthread_cond_broadcast(&vi_cv);
    pthread_mutex_unlock(&vi_mu);
}

static void *vi_owner(void *arg)
{
    (void)arg;
    for (unsigned i = 0; i < VI_N; i++) {
        vi_size[i] = vi_size_of(i);
        vi_blocks[i] = malloc(vi_size[i]);
        if (vi_blocks[i] == NULL) {
            atomic_fetch_add(&vi_bad, 1);
            continue;
        }
        pat_fill(vi_blocks[i], vi_size[i], seed_of(vi_blocks[i], i));
    }
    vi_signal(1);
    vi_wait(2);
    /* Awake again: the heap the visit changed serves and takes back as before. */
    void **again = malloc(VI_N * sizeof *again);
    for (unsigned i = 0; i < VI_N; i++) {
        again[i] = malloc(vi_size_of(i));
        if (again[i] != NULL)
            pat_fill(again[i], vi_size_of(i), seed_of(again[i], i + 7));
    }
    for (unsigned i = 0; i < VI_N; i++) {
        if (again[i] == NULL || !pat_check(again[i], vi_size_of(i), seed_of(again[i], i + 7)))
            atomic_fetch_add(&vi_bad, 1);
        free(again[i]);
    }
    free(again);
    return NULL;
}

START_TEST(test_trim_visits_an_idle_thread)
{
    if (visits_enabled() && !visits_possible()) {
        fprintf(stderr, "# visit: the kernel refuses membarrier here, so hakmem makes no visits\n");
        return;
    }
    pthread_t t;
    atomic_store(&vi_bad, 0);
    vi_stage = 0;
    cap_begin();
    ck_assert_int_eq(pthread_create(&t, NULL, vi_owner, NULL), 0);
    vi_wait(1);
    size_t bytes = 0;
    for (unsigned i = 0; i < VI_N; i++) {
        if (vi_blocks[i] != NULL && !pat_check(vi_blocks[i], vi_size[i], seed_of(vi_blocks[i], i)))
            atomic_fetch_add(&vi_bad, 1);
        bytes += vi_size[i];
        free(vi_blocks[i]);
    }
    struct hak_totals before, after;
    hak_totals_get(&before);
    malloc_trim(0);
    hak_totals_get(&after);
    vi_signal(2);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(cap_end(), 0);
    ck_assert_int_eq(atomic_load(&vi_bad), 0);
    /* The owner's regions and spans held all of it (their free blocks count as in use);
     * after the trim at most a tenth of it is left in them.  With Phase 103 off they stay
     * until the owner wakes. */
    fprintf(stderr, "# visit: %zu bytes freed by another thread; in use %llu -> %llu, %llu visits\n",
            bytes, (unsigned long long)before.in_use, (unsigned long long)after.in_use,
            (unsigned long long)(after.visits - before.visits));
    ck_assert_uint_ge(before.in_use, bytes);
    if (visits_enabled()) {
        ck_assert_uint_ge(after.visits, before.visits + 1);
        ck_assert_uint_le(after.in_use + bytes * 9 / 10, before.in_use);
    } else {
        ck_assert_uint_eq(after.visits, before.visits);
        ck_assert_uint_ge(after.in_use, bytes);
    }
}
END_TEST

/* Visits meet a thread at work: one thread allocates and frees blocks of every kind
 * (tiny, span, a class's own slots overflowing), hands some to a second that frees them,
 * and the test thread calls malloc_trim all the while, so visits begin between the
 * owner's calls and the owner waits for them on its way in.  Every block keeps its
 * pattern and nothing is reported as misuse. */
#define VS_RING 256
static void *vs_ring[VS_RING];
static size_t vs_ring_size[VS_RING];
static atomic_uint vs_head, vs_tail;
static atomic_int vs_stop;

static void *vs_worker(void *arg)
{
    uint64_t rng = (uintptr_t)arg * 7919 + 17;
    void *mine[512] = { 0 };
    size_t mine_size[512];
    unsigned long seq = 0;
    while (!atomic_load(&vs_stop)) {
        unsigned j = (unsigned)(rng_next(&rng) % 512);
        if (mine[j] != NULL) {
            if (!pat_check(mine[j], mine_size[j], seed_of(mine[j], 5)))
                atomic_fetch_add(&vi_bad, 1);
            unsigned h = atomic_load(&vs_head);
            if ((seq & 1) && h - atomic_load(&vs_tail) < VS_RING) {
                vs_ring[h % VS_RING] = mine[j];         /* the other thread frees it */
                vs_ring_size[h % VS_RING] = mine_size[j];
                atomic_store(&vs_head, h + 1);
            } else {
                free(mine[j]);
            }
        }
        mine_size[j] = mixed_size(&rng);
        mine[j] = malloc(mine_size[j]);
        if (mine[j] == NULL)
            atomic_fetch_add(&vi_bad, 1);
        else
            pat_fill(mine[j], mine_size[j], seed_of(mine[j], 5));
        seq++;
    }
    for (unsigned j = 0; j < 512; j++)
        free(mine[j]);
    return NULL;
}

static void *vs_freer(void *arg)
{
    (void)arg;
    for (;;) {
        unsigned t = atomic_load(&vs_tail);
        if (t == atomic_load(&vs_head)) {
            if (atomic_load(&vs_stop) == 2)
                return NULL;
            sched_yield();
            continue;
        }
        void *p = vs_ring[t % VS_RING];
        if (!pat_check(p, vs_ring_size[t % VS_RING], seed_of(p, 5)))
            atomic_fetch_add(&vi_bad, 1);
        free(p);
        atomic_store(&vs_tail, t + 1);
    }
}

START_TEST(test_visits_meet_a_working_thread)
{
    pthread_t w, f;
    struct hak_totals before, after;
    hak_totals_get(&before);
    atomic_store(&vi_bad, 0);
    atomic_store(&vs_stop, 0);
    atomic_store(&vs_head, 0);
    atomic_store(&vs_tail, 0);
    cap_begin();
    ck_assert_int_eq(pthread_create(&w, NULL, vs_worker, (void *)1), 0);
    ck_assert_int_eq(pthread_create(&f, NULL, vs_freer, NULL), 0);
    unsigned trims = 0;
    for (double end = now_sec() + 1.0; now_sec() < end; trims++)
        malloc_trim(0);
    atomic_store(&vs_stop, 1);
    ck_assert_int_eq(pthread_join(w, NULL), 0);
    atomic_store(&vs_stop, 2);
    ck_assert_int_eq(pthread_join(f, NULL), 0);
    ck_assert_int_eq(cap_end(), 0);
    ck_assert_int_eq(atomic_load(&vi_bad), 0);
    ck_assert_uint_gt(trims, 10);
    /* The trims met the worker out of its cold paths often: they visited (where they can) */
    hak_totals_get(&after);
    fprintf(stderr, "# visits: %u trims, %llu visits\n", trims, (unsigned long long)(after.visits - before.visits));
    if (visits_possible())
        ck_assert_uint_gt(after.visits - before.visits, 0);
    else if (!visits_enabled())
        ck_assert_uint_eq(after.visits, before.visits);
}
END_TEST

/* ------------------------------------------------------------- batch */

/* Two threads free one block at once, over and over (the block is the test thread's):
 * every such double free is reported exactly once, at the call or when the owner takes the
 * batch in (Phase 107), and no block is lost or handed out twice afterwards. */
#ifndef DF_ROUNDS
#define DF_ROUNDS 4000
#endif
static pthread_barrier_t df_barrier;

static int ptr_cmp(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)*(void *const *)a, y = (uintptr_t)*(void *const *)b;
    return x < y ? -1 : x > y;
}

/* CK_TIMEOUT_MULTIPLIER scales waits as it scales Check's timeouts (a loaded machine). */
static double time_scale(void)
{
    const char *m = getenv("CK_TIMEOUT_MULTIPLIER");
    double v = m && *m ? atof(m) : 1.0;
    return v > 1.0 ? v : 1.0;
}
static void *_Atomic df_block;

static void *df_freer(void *arg)
{
    (void)arg;
    for (unsigned i = 0; i < DF_ROUNDS; i++) {
        pthread_barrier_wait(&df_barrier);
        free(atomic_load(&df_block));
        pthread_barrier_wait(&df_barrier);
    }
    return NULL;
}

START_TEST(test_double_free_from_two_threads)
{
    static const size_t sizes[] = { 16, 48, 64, 256, 1024 };
    ck_assert_int_eq(hak_policy_set("safety.on_misuse", "report"), 0);     /* hardened aborts */
    ck_assert_int_eq(pthread_barrier_init(&df_barrier, NULL, 3), 0);
    pthread_t t[2];
    cap_begin();
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, df_freer, NULL), 0);
    for (unsigned i = 0; i < DF_ROUNDS; i++) {
        size_t n = sizes[i % 5];
        char *p = malloc(n);
        ck_assert_ptr_nonnull(p);
        memset(p, 0x3c, n);
        atomic_store(&df_block, p);
        pthread_barrier_wait(&df_barrier);
        pthread_barrier_wait(&df_barrier);
    }
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
    malloc_trim(0);                         /* the exited threads' batches taken in */
    long reports = cap_end_expecting("double free");
    pthread_barrier_destroy(&df_barrier);
    ck_assert_int_eq(reports, DF_ROUNDS);
    /* Each block came back once: as many fresh mallocs of each size are all distinct. */
    enum { N = DF_ROUNDS / 5 + 64 };
    static char *got[5][N];
    for (unsigned k = 0; k < 5; k++)
        for (unsigned i = 0; i < N; i++) {
            got[k][i] = malloc(sizes[k]);
            ck_assert_ptr_nonnull(got[k][i]);
            memset(got[k][i], (int)k, sizes[k]);
        }
    for (unsigned k = 0; k < 5; k++) {
        qsort(got[k], N, sizeof got[k][0], ptr_cmp);
        for (unsigned i = 1; i < N; i++)
            ck_assert_ptr_ne(got[k][i], got[k][i - 1]);
        for (unsigned i = 0; i < N; i++) {
            for (size_t b = 0; b < sizes[k]; b++)
                ck_assert_int_eq(got[k][i][b], (int)k);
            free(got[k][i]);
        }
    }
}
END_TEST

/* A thread that frees another's blocks and then sleeps sends them anyway: the blocks sit
 * in its batch (Phase 107) until a thread at work, passing through malloc's cold path,
 * finds it idle and sends them (cold/batch.c), so the owner gets them back within a bound. */
enum { IS_N = 40, IS_SIZE = 176 };          /* a class no other test of the process uses */
static void *is_blocks[IS_N];
static pthread_mutex_t is_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t is_cond = PTHREAD_COND_INITIALIZER;
static int is_stage;

static void *is_sleeper(void *arg)
{
    (void)arg;
    for (unsigned i = 0; i < IS_N; i++)
        free(is_blocks[i]);
    pthread_mutex_lock(&is_mutex);
    is_stage = 1;
    pthread_cond_broadcast(&is_cond);
    while (is_stage != 2)
        pthread_cond_wait(&is_cond, &is_mutex);
    pthread_mutex_unlock(&is_mutex);
    return NULL;
}

START_TEST(test_idle_sender_sends)
{
    if (!visits_possible()) {
        fprintf(stderr, "# batch: no visits here (Phase 103 off, or no membarrier): a sleeping thread keeps its batches\n");
        return;
    }
    for (unsigned i = 0; i < IS_N; i++)
        ck_assert_ptr_nonnull(is_blocks[i] = malloc(IS_SIZE));
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, is_sleeper, NULL), 0);
    pthread_mutex_lock(&is_mutex);
    while (is_stage != 1)
        pthread_cond_wait(&is_cond, &is_mutex);
    pthread_mutex_unlock(&is_mutex);
    /* This thread works (a large block takes malloc's cold path each time) and looks for
     * its blocks among new ones of the class. */
    enum { KEEP = 4096 };
    static void *kept[KEEP];
    unsigned nk = 0, found = 0;
    double limit = 5.0 * time_scale();
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        free(malloc(4 * MiB));
        void *q = malloc(IS_SIZE);
        ck_assert_ptr_nonnull(q);
        for (unsigned i = 0; i < IS_N; i++)
            found |= q == is_blocks[i];
        if (found || nk == KEEP) {
            free(q);
        } else {
            kept[nk++] = q;
        }
        struct timespec pause = { 0, 5 * 1000 * 1000 };
        nanosleep(&pause, NULL);
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (!found && (double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) * 1e-9 < limit);
    double waited = (double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) * 1e-9;
    pthread_mutex_lock(&is_mutex);
    is_stage = 2;
    pthread_cond_broadcast(&is_cond);
    pthread_mutex_unlock(&is_mutex);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    for (unsigned i = 0; i < nk; i++)
        free(kept[i]);
    fprintf(stderr, "# batch: a sleeping thread's frees came back after %.2f s\n", waited);
    ck_assert_msg(found, "the blocks a sleeping thread freed did not come back in %.1f s", limit);
}
END_TEST

/* ------------------------------------------------------------- churn */

/* Thousands of short-lived threads, each allocating tiny blocks of every class and freeing
 * them before it exits: the exit hands everything back (its slots flushed, its regions
 * released), so after malloc_trim the bytes in use are where they started, within a region
 * of each tiny class and a span (a class's region the test thread itself may be carving,
 * and its own span): 21 x 64 KiB + 1 MiB.  A thread exit that kept its slots' blocks would
 * keep a region per class per thread: hundreds of MiB here. */
#ifndef CH_THREADS
#define CH_THREADS 4000
#endif
enum { CH_BLOCKS = 256 };

static void *ch_worker(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    void *b[CH_BLOCKS];
    for (unsigned i = 0; i < CH_BLOCKS; i++) {
        size_t n = 8 + ((i * 37u + id) % 128) * 8;      /* 8 B .. 1 KiB: every tiny class */
        b[i] = malloc(n);
        if (b[i] != NULL)
            memset(b[i], (int)i, n);
    }
    for (unsigned i = 0; i < CH_BLOCKS; i++)
        free(b[i]);
    return NULL;
}

START_TEST(test_thread_churn_gives_all_back)
{
    struct hak_totals before, after;
    malloc_trim(0);
    hak_totals_get(&before);
    for (unsigned i = 0; i < CH_THREADS; i += 4) {
        pthread_t t[4];
        for (unsigned k = 0; k < 4; k++)
            ck_assert_int_eq(pthread_create(&t[k], NULL, ch_worker, (void *)(uintptr_t)(i + k)), 0);
        for (unsigned k = 0; k < 4; k++)
            ck_assert_int_eq(pthread_join(t[k], NULL), 0);
    }
    malloc_trim(0);
    hak_totals_get(&after);
    uint64_t bound = 21 * 64 * KiB + MiB;
    fprintf(stderr, "# churn: %u threads; in use %llu -> %llu bytes (bound +%llu)\n", CH_THREADS,
            (unsigned long long)before.in_use, (unsigned long long)after.in_use, (unsigned long long)bound);
    ck_assert_uint_le(after.in_use, before.in_use + bound);
}
END_TEST

/* ------------------------------------------------------------------ main */

static Suite *threads_suite(void)
{
    Suite *s = suite_create("threads");
    TCase *tc;

    tc = tcase_create("sanity");
    tcase_add_test(tc, test_uses_hakmem);
    suite_add_tcase(s, tc);

    tc = tcase_create("producer_consumer");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_producer_consumer);
    suite_add_tcase(s, tc);

    /* Its own case: it needs a class no earlier test of the process has used (Check
     * forks each test; the TSan build, which does not, leaves this case out). */
    tc = tcase_create("remote_reuse");
    tcase_add_test(tc, test_remote_frees_reused_first);
    suite_add_tcase(s, tc);

    tc = tcase_create("short_lived");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_short_lived_threads);
    suite_add_tcase(s, tc);

    tc = tcase_create("realloc");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_concurrent_realloc);
    suite_add_tcase(s, tc);

    tc = tcase_create("abandoned_release");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_abandoned_region_released_under_a_free);
    suite_add_tcase(s, tc);

    tc = tcase_create("fork");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_fork_while_allocating);
    tcase_add_test(tc, test_fork_while_trimming);
    tcase_add_test(tc, test_fork_from_many_threads);
    tcase_add_test(tc, test_fork_during_thread_churn);
    suite_add_tcase(s, tc);

    tc = tcase_create("visit");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_trim_visits_an_idle_thread);
    tcase_add_test(tc, test_visits_meet_a_working_thread);
    suite_add_tcase(s, tc);

    tc = tcase_create("churn");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_thread_churn_gives_all_back);
    suite_add_tcase(s, tc);

    tc = tcase_create("batch");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_double_free_from_two_threads);
    tcase_add_test(tc, test_idle_sender_sends);
    suite_add_tcase(s, tc);

    return s;
}

int main(int argc, char **argv)
{
    (void)argc;
    variant_check(argv);            /* under tests/equivalence: the variant is in force */
    return check_run(threads_suite());      /* no case run (CK_RUN_CASE naming none): a failure */
}
