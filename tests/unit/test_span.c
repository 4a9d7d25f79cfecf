/* Unit tests of spans (Phase 100): mid blocks carved best fit from per-thread spans, frees
 * merged with free neighbours, the quick cache, realloc in place, remote frees, thread exit.
 * Built against a core with HAK_SPAN_DEBUG: every span operation re-checks every span and bin. */
#define _GNU_SOURCE
#include <check.h>
#include "check_run.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "hakmem.h"
#include "testutil.h"
#include "arena/chunks.h"
#include "cold/cold.h"
#include "region/map.h"
#include "span/span.h"
#include "route/route.h"

static char report[4096];

static struct region *span_of(void *p)
{
    unsigned b = region_map_get((uintptr_t)p);
    ck_assert_uint_ge(b, 1);
    ck_assert_uint_le(b, 254);
    return region_from_map((uintptr_t)p, b);
}

static const char *free_reported(void *p)
{
    return hak_free_reported(p, report, sizeof report);
}

static void assert_consistent(void)
{
    const char *why = span_check(heap_tls);
    ck_assert_msg(why == NULL, "spans and bins disagree: %s", why);
}

/* 64 granules and up bypass the quick cache: their frees merge at once. */
#define BIG (20u << 10)

START_TEST(test_layout)
{
    ck_assert_uint_eq(SPAN_BLOCKS_OFF % SPAN_GRANULE, 0);
    ck_assert_uint_ge(SPAN_BLOCKS_OFF, offsetof(struct region, tags) + 3u * SPAN_NGRAN);
    ck_assert_uint_ge(SPAN_RUN_MAX, HAK_MID_MAX >> SPAN_GSHIFT);
    ck_assert_uint_le(SPAN_NGRAN, 1u << 16);              /* lengths are 16-bit */
    ck_assert_uint_eq(TAG_CLASS(TAG_LIVE_SPAN), HAK_CLS_SPAN);
    ck_assert_uint_lt(HAK_CLS_SPAN, OBS_SLOTS);
    ck_assert_uint_lt(HAK_CLS_SPAN, 64);                  /* a bit of remote_scan's word */
    for (unsigned c = 0; c <= HAK_NCLASSES; c++)
        ck_assert_uint_ne(TAG_LIVE(c), TAG_LIVE_SPAN);
    static const unsigned others[] = { 0, TAG_FREE, TAG_HOME, TAG_FEND, TAG_REMOTE, TAG_CACHED };
    for (unsigned i = 0; i < sizeof others / sizeof others[0]; i++) {
        ck_assert_uint_ne(others[i], TAG_LIVE_SPAN);
        ck_assert_uint_lt(others[i], 0x80);               /* none reads as live */
        for (unsigned j = 0; j < i; j++)
            ck_assert_uint_ne(others[i], others[j]);
    }
}
END_TEST

/* A run found from span_bin_up(n) on is at least n long, and no shorter search would do. */
START_TEST(test_bins)
{
    unsigned prev = 0;
    for (uint32_t n = 1; n < 2 * SPAN_NGRAN; n++) {
        unsigned b = span_bin(n), u = span_bin_up(n);
        ck_assert_uint_lt(b, SPAN_NBINS);
        ck_assert_uint_ge(b, prev);
        ck_assert_uint_le(b, prev + 1);
        prev = b;
        ck_assert_uint_ge(u, b);
        ck_assert_uint_le(u, b + 1);
        /* the shortest run of bin u holds n; one of bin u - 1 may not */
        uint32_t first = n;
        while (first > 1 && span_bin(first - 1) == u)
            first--;
        while (span_bin(first) < u)
            first++;
        ck_assert_uint_ge(first, n);
        ck_assert(u == b ? (n == 1 || span_bin(n - 1) < b) : 1);
    }
    ck_assert_uint_lt(span_bin(SPAN_RUN_MAX), SPAN_NBINS);
}
END_TEST

START_TEST(test_mid_blocks_from_spans)
{
    for (size_t n = HAK_TINY_MAX + 1; n <= HAK_MID_MAX; n = n * 5 / 4 + 17) {
        char *p = hak_malloc(n);
        ck_assert_ptr_nonnull(p);
        struct region *r = span_of(p);
        ck_assert_uint_eq(r->cls, HAK_CLS_SPAN);
        ck_assert_ptr_eq(atomic_load(&r->owner), heap_tls);
        ck_assert_uint_eq(((uintptr_t)p - (uintptr_t)r) % SPAN_GRANULE, 0);
        ck_assert_uint_eq(hak_malloc_usable_size(p), (n + SPAN_GRANULE - 1) & ~(size_t)(SPAN_GRANULE - 1));
        memset(p, 0x7e, hak_malloc_usable_size(p));
        uint8_t *t;
        ck_assert(region_tag_check_live(r, (uintptr_t)p, &t));
        hak_free(p);
        assert_consistent();
    }
    ck_assert_uint_ne(span_of(hak_malloc(HAK_TINY_MAX))->cls, HAK_CLS_SPAN);
}
END_TEST

/* a, b, c carved one after the other; freed a, c, b, they are one run again, and a block
 * the size of all three takes a's place. */
START_TEST(test_free_merges_neighbours)
{
    char *a = hak_malloc(BIG), *b = hak_malloc(BIG), *c = hak_malloc(BIG);
    char *guard = hak_malloc(BIG);
    ck_assert_ptr_eq(b, a + BIG);
    ck_assert_ptr_eq(c, b + BIG);
    hak_free(a);
    hak_free(c);
    assert_consistent();
    struct region *r = span_of(a);
    ck_assert_uint_eq(r->tags[span_gran(r, a)], TAG_FREE);
    ck_assert_uint_eq(r->tags[span_gran(r, c)], TAG_FREE);
    hak_free(b);
    assert_consistent();
    ck_assert_uint_eq(r->tags[span_gran(r, a)], TAG_FREE);
    ck_assert_uint_eq(span_len(r)[span_gran(r, a)], 3 * BIG / SPAN_GRANULE);
    ck_assert_uint_eq(r->tags[span_gran(r, b)], 0);
    ck_assert_uint_eq(r->tags[span_gran(r, c)], 0);
    char *all = hak_malloc(3 * BIG);
    ck_assert_ptr_eq(all, a);
    hak_free(all);
    hak_free(guard);
    assert_consistent();
}
END_TEST

/* What one size freed serves another: blocks of 2 KiB freed are where 100 KiB goes.  (The
 * span stays busy: one nearly empty would lend its free chunks instead.) */
START_TEST(test_reuse_across_sizes)
{
    enum { N = 200 };
    char *v[N], *guard;
    char *busy = hak_malloc(100 << 10);
    for (int i = 0; i < N; i++)
        v[i] = hak_malloc(2048);
    guard = hak_malloc(2048);
    for (int i = 0; i < N; i++)
        ck_assert_ptr_eq(v[i], v[0] + (size_t)i * 2048);
    for (int i = 0; i < N; i++)
        hak_free(v[i]);
    assert_consistent();
    char *big = hak_malloc(100 << 10);
    ck_assert_msg(big >= v[0] && big + (100 << 10) <= v[N - 1] + 2048,
                  "100 KiB at %p, not inside the %d KiB freed at %p", (void *)big, N * 2, (void *)v[0]);
    hak_free(big);
    hak_free(guard);
    hak_free(busy);
}
END_TEST

START_TEST(test_quick_cache)
{
    char *guard = hak_malloc(3000);                        /* keeps the span from emptying */
    char *p = hak_malloc(3000);
    struct region *r = span_of(p);
    hak_free(p);
    ck_assert_uint_eq(r->tags[span_gran(r, p)], TAG_CACHED);
    ck_assert_ptr_eq(hak_malloc(3000), p);                 /* LIFO, exact length */
    ck_assert_uint_eq(r->tags[span_gran(r, p)], TAG_LIVE_SPAN);
    hak_free(p);
    ck_assert_ptr_nonnull(strstr(free_reported(p), "double free"));
    ck_assert_ptr_eq(hak_malloc(3000), p);                 /* refused: still cached once */
    /* Depth: past SPAN_QUICK_DEPTH blocks of one length, frees merge. */
    char *v[SPAN_QUICK_DEPTH + 4];
    unsigned n = sizeof v / sizeof v[0], cached = 0;
    for (unsigned i = 0; i < n; i++)
        v[i] = hak_malloc(3000);
    for (unsigned i = 0; i < n; i++)
        hak_free(v[i]);
    for (unsigned i = 0; i < n; i++)
        cached += span_of(v[i])->tags[span_gran(span_of(v[i]), v[i])] == TAG_CACHED;
    ck_assert_uint_le(cached, SPAN_QUICK_DEPTH);
    ck_assert_uint_ge(cached, 1);
    ck_assert_uint_le(heap_tls->span.quick_bytes, SPAN_QUICK_BYTES);
    assert_consistent();
    hak_free(p);
    /* The guard's free leaves the span nothing but cached blocks: it is the heap's one
     * idle span, and keeps them (a second would merge them and go: test_empty_spans_released). */
    hak_free(guard);
    assert_consistent();
    ck_assert_ptr_eq(heap_tls->span.empty, r);
    ck_assert_uint_ge(r->nhome, 1);
    ck_assert_uint_eq(r->used, r->nhome);
    unsigned cached_then = r->nhome;
    char *q = hak_malloc(3000);                            /* still served from the cache */
    ck_assert_ptr_eq(span_of(q), r);
    ck_assert_uint_eq(r->nhome, cached_then - 1);
    hak_free(q);
    /* Flushed, they merge, and the span is one run again. */
    span_quick_flush(heap_tls);
    assert_consistent();
    ck_assert_uint_eq(r->used, 0);
    ck_assert_uint_eq(r->nhome, 0);
    ck_assert_uint_eq(r->span_avail + r->span_lent, SPAN_RUN_MAX);
}
END_TEST

START_TEST(test_bad_frees_refused)
{
    char *a = hak_malloc(BIG), *b = hak_malloc(BIG), *guard = hak_malloc(BIG);
    ck_assert_ptr_nonnull(strstr(free_reported(b + 1), "not the start of a block"));
    ck_assert_ptr_nonnull(strstr(free_reported(b + SPAN_GRANULE), "not the start"));
    ck_assert_ptr_nonnull(strstr(free_reported(b + BIG - SPAN_GRANULE), "not the start"));
    memset(b, 1, BIG);                                     /* b is still live */
    hak_free(b);
    ck_assert_ptr_nonnull(strstr(free_reported(b), "double free"));
    hak_free(a);                                           /* b merged into a's run */
    ck_assert_ptr_nonnull(strstr(free_reported(b), "not the start of an allocated block"));
    ck_assert_ptr_nonnull(strstr(free_reported(a), "double free"));
    assert_consistent();
    char *c = hak_malloc(2 * BIG);                         /* handed out once */
    ck_assert_ptr_eq(c, a);
    ck_assert_ptr_ne(hak_malloc(2 * BIG), c);
    hak_free(guard);
}
END_TEST

/* A write past a block that reaches the free run after it finds no links in a run long
 * enough to keep them in the header: the run is handed out whole.  A shorter run keeps
 * them in its last 24 bytes, and a write that reaches them is found when the run leaves
 * its bin: the neighbour a link names must point back.  Reported, the bin cut (its runs
 * leak), and neither the run nor the place the link names is handed out. */
#define SHORT_RUN (12u * SPAN_GRANULE)              /* below SPAN_NODE_MIN granules */
START_TEST(test_corrupt_run_links_caught)
{
    static struct span_node target[4];
    char *a = hak_malloc(BIG), *b = hak_malloc(BIG), *guard = hak_malloc(BIG);
    hak_free(b);                                           /* a run of its own: a and guard live */
    HAK_UNPOISON(b, BIG);                                  /* these writes are the point */
    memset(b, 0x5A, BIG);
    char *x = hak_malloc(BIG);
    ck_assert_ptr_eq(x, b);
    /* the run's front handed out, what is left a short run before guard */
    hak_free(x);
    x = hak_malloc(BIG - SHORT_RUN);
    ck_assert_ptr_eq(x, b);
    struct span_node *links = (struct span_node *)(guard) - 1;
    HAK_UNPOISON(links, sizeof *links);
    links->next = &target[1];
    struct capture c;
    stderr_capture_begin(&c);
    char *y = hak_malloc(SHORT_RUN);
    stderr_capture_end(&c, report, sizeof report);
    ck_assert_ptr_nonnull(y);
    ck_assert_ptr_ne(y, b + BIG - SHORT_RUN);
    ck_assert_ptr_ne((void *)y, (void *)&target[1]);
    ck_assert_ptr_nonnull(strstr(report, "free-run links overwritten"));
    memset(y, 1, SHORT_RUN);
    hak_free(y);
    hak_free(a);
    /* x and guard stay: their frees would meet the leaked run and report it again */
}
END_TEST

START_TEST(test_realloc_in_place)
{
    char *p = hak_malloc(BIG);
    memset(p, 0x33, BIG);
    char *q = hak_realloc(p, 2 * BIG);                     /* into the free run after it */
    ck_assert_ptr_eq(q, p);
    ck_assert_uint_ge(hak_malloc_usable_size(p), 2 * BIG);
    for (size_t i = 0; i < BIG; i++)
        ck_assert_uint_eq((unsigned char)p[i], 0x33);
    memset(p, 0x44, 2 * BIG);
    q = hak_realloc(p, 8 << 10);                           /* below half: its tail goes back */
    ck_assert_ptr_eq(q, p);
    ck_assert_uint_eq(hak_malloc_usable_size(p), 8 << 10);
    for (size_t i = 0; i < (8 << 10); i++)
        ck_assert_uint_eq((unsigned char)p[i], 0x44);
    char *t = hak_malloc(BIG);                             /* the tail, merged, serves it */
    ck_assert_ptr_eq(t, p + (8 << 10));
    assert_consistent();
    /* a live neighbour: it moves, with its bytes */
    q = hak_realloc(p, 16 << 10);
    ck_assert_ptr_ne(q, p);
    for (size_t i = 0; i < (8 << 10); i++)
        ck_assert_uint_eq((unsigned char)q[i], 0x44);
    hak_free(q);
    hak_free(t);
    assert_consistent();
}
END_TEST

/* Another thread's free flips the tag to TAG_REMOTE and pushes the block; the owner's next
 * mid malloc merges it (or caches it) before anything else, and reuses it. */
START_TEST(test_remote_free_merged)
{
    char *a = hak_malloc(BIG), *b = hak_malloc(BIG), *guard = hak_malloc(BIG);
    struct region *r = span_of(a);
    ck_assert_str_eq(hak_free_elsewhere(a, report, sizeof report), "");
    ck_assert_str_eq(hak_free_elsewhere(b, report, sizeof report), "");
    ck_assert_uint_eq(r->tags[span_gran(r, a)], TAG_REMOTE);
    ck_assert_ptr_eq(atomic_load(&r->remote), b);
    ck_assert_uint_eq(atomic_load(&heap_tls->span_remote), 1);
    ck_assert_ptr_nonnull(strstr(hak_free_elsewhere(a, report, sizeof report), "double free"));
    ck_assert_ptr_nonnull(strstr(free_reported(b), "double free"));
    char *c = hak_malloc(2 * BIG);                         /* a and b, merged */
    ck_assert_ptr_eq(c, a);
    ck_assert_ptr_eq(atomic_load(&r->remote), NULL);
    hak_free(c);
    hak_free(guard);
    assert_consistent();
}
END_TEST

/* A thread that exits with blocks live leaves its spans for adoption; frees meanwhile go
 * onto their remote stacks, and the adopter merges them. */
enum { EX_N = 300 };
static char *ex_blocks[EX_N];

static void *free_quarter(void *arg)
{
    (void)arg;
    for (int i = 0; i < EX_N; i += 4)
        hak_free(ex_blocks[i]);
    return NULL;
}

/* Exits with a quarter of its blocks freed here (some cached), a quarter freed by another
 * thread and not merged yet (the exit merges them, and must not leave them cached in a heap
 * the next thread reuses), and half live. */
static void *exit_with_blocks(void *arg)
{
    (void)arg;
    for (int i = 0; i < EX_N; i++) {
        ex_blocks[i] = hak_malloc(1500 + (size_t)(i % 40) * 300);
        memset(ex_blocks[i], i, 1500);
    }
    for (int i = 2; i < EX_N; i += 4)
        hak_free(ex_blocks[i]);
    pthread_t t;
    pthread_create(&t, NULL, free_quarter, NULL);
    pthread_join(t, NULL);
    return NULL;
}

static void *adopt_and_check(void *arg)
{
    (void)arg;
    void *v[64];
    for (int i = 0; i < 64; i++)
        v[i] = hak_malloc(1500 + (size_t)i * 700);
    const char *why = span_check(heap_tls);
    for (int i = 0; i < 64; i++)
        hak_free(v[i]);
    return (void *)why;
}

START_TEST(test_thread_exit_adopt)
{
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, exit_with_blocks, NULL), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    struct region *r = span_of(ex_blocks[1]);
    ck_assert_ptr_null(atomic_load(&r->owner));              /* abandoned */
    for (int i = 1; i < EX_N; i += 2) {
        for (int k = 0; k < 1500; k++)
            ck_assert_uint_eq((unsigned char)ex_blocks[i][k], (unsigned char)i);
        hak_free(ex_blocks[i]);                             /* remote, into abandoned spans */
    }
    void *why;
    ck_assert_int_eq(pthread_create(&t, NULL, adopt_and_check, NULL), 0);
    ck_assert_int_eq(pthread_join(t, &why), 0);
    ck_assert_msg(why == NULL, "after adoption: %s", (const char *)why);
}
END_TEST

/* Freed, a heap's spans go back to the arenas but one, whether their blocks merge at once
 * (20 KiB) or some wait in the quick cache (3 KiB): the cache pins no span. */
START_TEST(test_empty_spans_released)
{
    enum { N = 4000 };
    static char *v[N];
    static const size_t sizes[] = { BIG, 3000, 1100 };
    size_t before = arena_in_use();
    for (unsigned s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int n = (int)((4u << 20) / sizes[s] < N ? (4u << 20) / sizes[s] : N);   /* 4 spans and more */
        for (int i = 0; i < n; i++)
            v[i] = hak_malloc(sizes[s]);
        ck_assert_uint_ge(heap_tls->span.n, 4);
        for (int i = 0; i < n; i++)
            hak_free(v[(i * 7) % n]);                       /* 7 is prime to every n here */
        assert_consistent();
        ck_assert_msg(heap_tls->span.n <= 1, "%zu B blocks: %u spans left", sizes[s], heap_tls->span.n);
        ck_assert_uint_le(arena_in_use(), before + (size_t)SPAN_CHUNKS * HAK_CHUNK_SIZE);
    }
}
END_TEST

/* A span left with a little in it lends its whole free chunks to the arenas (they are no
 * longer its: a free there is a foreign pointer's, and another region may take them); when
 * it empties, the rest of it goes back, the lent chunks not twice.  Only past the arenas'
 * bound on waiting memory, twice [purge] retain: below it, here with the defaults, it
 * keeps them; with retain 0, every heap is past it. */
START_TEST(test_sparse_span_lends)
{
    enum { N = 60 };
    char *v[N];
    char *keep = hak_malloc(15000), *sparse = hak_malloc(15000);
    for (int i = 0; i < N; i++)
        v[i] = hak_malloc(15000);
    for (int i = 0; i < N; i++)
        hak_free(v[i]);
    ck_assert_uint_eq(span_of(keep)->span_lent, 0);       /* a small heap: nothing lent */
    hak_free(keep);
    hak_free(sparse);
    ck_assert_int_eq(policy_load_text("[purge]\nretain = 0\n"), 0);
    size_t before = arena_in_use();
    for (int i = 0; i < N; i++)
        v[i] = hak_malloc(15000);                          /* 59 granules: cached or merged */
    struct region *r = span_of(v[0]);
    ck_assert_ptr_eq(span_of(v[N - 1]), r);
    for (int i = 1; i < N; i++)
        hak_free(v[i]);
    assert_consistent();
    ck_assert_uint_le(span_live(r), SPAN_LEND_LIVE);
    ck_assert_uint_ge(r->span_lent, 10u * (HAK_CHUNK_SIZE >> SPAN_GSHIFT));
    ck_assert_uint_le(arena_in_use(), before + 6 * HAK_CHUNK_SIZE);
    char *lent = (char *)r + 8 * HAK_CHUNK_SIZE;
    ck_assert_uint_ne(region_map_get((uintptr_t)lent), 9);
    memset(v[0], 1, 15000);                                /* the survivor is intact */
    /* blocks go on coming from the span's runs, and then from fresh spans */
    char *w[N];
    for (int i = 0; i < N; i++)
        w[i] = hak_malloc(15000);
    assert_consistent();
    for (int i = 0; i < N; i++)
        hak_free(w[i]);
    hak_free(v[0]);
    assert_consistent();
    ck_assert_uint_le(heap_tls->span.n, 1);
    ck_assert_uint_le(arena_in_use(), before + (size_t)SPAN_CHUNKS * HAK_CHUNK_SIZE);
}
END_TEST

/* A run made while the span was busy lends too, once the span comes down to little: blocks
 * 0-6 freed first (one run, 9 blocks live), then 8-15, leaving block 7 between the runs. */
START_TEST(test_lend_when_sparse)
{
    enum { N = 16 };
    char *v[N];
    ck_assert_int_eq(policy_load_text("[purge]\nretain = 0\n"), 0);
    for (int i = 0; i < N; i++)
        v[i] = hak_malloc(60 << 10);
    struct region *r = span_of(v[0]);
    ck_assert_ptr_eq(span_of(v[N - 1]), r);
    for (int i = 0; i < 7; i++)
        hak_free(v[i]);
    ck_assert_uint_eq(r->span_lent, 0);                   /* 540 KiB live: nothing lent */
    for (int i = 8; i < N; i++)
        hak_free(v[i]);
    assert_consistent();
    /* 60 KiB left: every whole chunk not holding it or the header is lent */
    ck_assert_uint_ge(r->span_lent, (SPAN_CHUNKS - 3) * (HAK_CHUNK_SIZE >> SPAN_GSHIFT));
    hak_free(v[7]);
    assert_consistent();
}
END_TEST

/* Past a granule, memalign's mid blocks come from the naturally aligned size classes. */
START_TEST(test_memalign_mid)
{
    static const size_t aligns[] = { 32, 256, 512, 4096, 65536 };
    for (unsigned i = 0; i < sizeof aligns / sizeof aligns[0]; i++) {
        void *p = NULL;
        ck_assert_int_eq(hak_posix_memalign(&p, aligns[i], 5000), 0);
        ck_assert_uint_eq((uintptr_t)p % aligns[i], 0);
        ck_assert_uint_eq(span_of(p)->cls == HAK_CLS_SPAN, aligns[i] <= SPAN_GRANULE);
        memset(p, 9, 5000);
        hak_free(p);
    }
}
END_TEST

/* Phase 100 off at run time: new mid blocks from the classes; the spans' blocks still free. */
START_TEST(test_phase_off_at_run_time)
{
    char *s = hak_malloc(5000);
    ck_assert_uint_eq(span_of(s)->cls, HAK_CLS_SPAN);
    ck_assert_int_eq(policy_load_text("[phases]\nphase100 = off\n"), 0);
    char *c = hak_malloc(5000);
    ck_assert_uint_eq(span_of(c)->cls, class_of_size(5000));
    ck_assert_str_eq(free_reported(s), "");
    ck_assert_str_eq(free_reported(c), "");
    ck_assert_int_eq(policy_load_text(""), 0);
    char *d = hak_malloc(5000);
    ck_assert_uint_eq(span_of(d)->cls, HAK_CLS_SPAN);
    hak_free(d);
}
END_TEST

/* Random mid churn with reallocs: every block keeps its bytes, and (HAK_SPAN_DEBUG) every
 * operation leaves the spans and bins in agreement. */
START_TEST(test_churn)
{
    enum { N = 400 };
    char *v[N] = { 0 };
    size_t sz[N] = { 0 };
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int op = 0; op < 20000; op++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int i = (int)(x % N);
        if (v[i]) {
            for (size_t k = 0; k < sz[i]; k += 97)
                ck_assert_uint_eq((unsigned char)v[i][k], (unsigned char)(i + sz[i]));
        }
        if (v[i] && (x >> 20) % 3 == 0) {
            size_t n = HAK_TINY_MAX + 1 + (x >> 32) % (64 << 10);
            char *q = hak_realloc(v[i], n);
            ck_assert_ptr_nonnull(q);
            v[i] = q;
            sz[i] = n;
            memset(q, (unsigned char)(i + n), n);
        } else if (v[i]) {
            hak_free(v[i]);
            v[i] = NULL;
        } else {
            sz[i] = HAK_TINY_MAX + 1 + (x >> 32) % ((x >> 40) & 1 ? 8192 : 120000);
            v[i] = hak_malloc(sz[i]);
            ck_assert_ptr_nonnull(v[i]);
            memset(v[i], (unsigned char)(i + sz[i]), sz[i]);
        }
    }
    for (int i = 0; i < N; i++)
        hak_free(v[i]);
    assert_consistent();
}
END_TEST

int main(void)
{
    Suite *su = suite_create("span");
    TCase *tc = tcase_create("span");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_layout);
    tcase_add_test(tc, test_bins);
    tcase_add_test(tc, test_mid_blocks_from_spans);
    tcase_add_test(tc, test_free_merges_neighbours);
    tcase_add_test(tc, test_reuse_across_sizes);
    tcase_add_test(tc, test_quick_cache);
    tcase_add_test(tc, test_bad_frees_refused);
    tcase_add_test(tc, test_corrupt_run_links_caught);
    tcase_add_test(tc, test_realloc_in_place);
    tcase_add_test(tc, test_remote_free_merged);
    tcase_add_test(tc, test_thread_exit_adopt);
    tcase_add_test(tc, test_empty_spans_released);
    tcase_add_test(tc, test_sparse_span_lends);
    tcase_add_test(tc, test_lend_when_sparse);
    tcase_add_test(tc, test_memalign_mid);
    tcase_add_test(tc, test_phase_off_at_run_time);
    tcase_add_test(tc, test_churn);
    suite_add_tcase(su, tc);
    return check_run(su);
}
