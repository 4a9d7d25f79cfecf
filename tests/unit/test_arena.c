/* Unit tests of the chunk arenas: runs of chunks are contiguous, released chunks coalesce
 * with their free neighbours, and resident (unpurged) chunks are handed out first. */
#include <check.h>
#include "check_run.h"
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include "hakmem.h"
#include "arena/chunks.h"
#include "cold/cold.h"
#include "os/os.h"
#include "region/map.h"
#include "class/class.h"

#define NEVER_PURGE ((size_t)1 << 40)

static uintptr_t take(unsigned chunks, int *clean)
{
    uintptr_t a = arena_take(chunks, clean);
    if (a == 0) {                   /* no room yet: map an arena, as arena/pool.c does */
        unsigned n;
        int huge = 0;
        uintptr_t m = arena_map(chunks, &n, &huge);
        ck_assert(m != 0 && arena_add(m, n, huge));
        a = arena_take(chunks, clean);
    }
    ck_assert(a != 0);
    ck_assert_uint_eq(a & (HAK_CHUNK_SIZE - 1), 0);
    return a;
}

/* Takes every free chunk of the arenas there are, then adds a fresh arena: the next takes
 * come from its start, chunk after chunk (arena_take looks at the arenas in order), so a
 * test knows where its runs lie instead of hoping that they line up.  Returns its base. */
static uintptr_t fresh_arena(void)
{
    int clean;
    while (arena_take(1, &clean) != 0)
        ;
    unsigned n;
    int huge = 0;
    uintptr_t m = arena_map(1, &n, &huge);
    ck_assert(m != 0 && n >= 128);
    ck_assert(arena_add(m, n, huge));
    return m;
}

START_TEST(test_runs_coalesce)
{
    enum { N = 96 };                /* crosses a bitmap word */
    uintptr_t c[N];
    int clean;
    uintptr_t base = fresh_arena();
    for (unsigned i = 0; i < N; i++) {
        c[i] = take(1, &clean);
        ck_assert(c[i] == base + i * HAK_CHUNK_SIZE);   /* chunk i of the arena: 62..65 cross word 0/1 */
    }
    /* every other chunk free: no run of 2 among them */
    for (unsigned i = 0; i < N; i += 2)
        ck_assert_int_eq(arena_release(c[i], 1, NEVER_PURGE, 0, 1, 0), 0);
    uintptr_t two = take(2, &clean);
    for (unsigned i = 1; i < N; i += 2)         /* never over a chunk still taken */
        ck_assert(two + 2 * HAK_CHUNK_SIZE <= c[i] || two >= c[i] + HAK_CHUNK_SIZE);
    arena_release(two, 2, NEVER_PURGE, 0, 1, 0);
    /* free 62..65 (word boundary inside): a run of 4 appears there, resident, so it wins */
    arena_release(c[63], 1, NEVER_PURGE, 0, 1, 0);
    arena_release(c[65], 1, NEVER_PURGE, 0, 1, 0);
    uintptr_t four = take(4, &clean);
    ck_assert_int_eq(clean, 0);
    ck_assert(four == c[62]);
    arena_release(four, 4, NEVER_PURGE, 0, 1, 0);
    c[63] = c[65] = 0;
    for (unsigned i = 1; i < N; i += 2)
        if (c[i])
            arena_release(c[i], 1, NEVER_PURGE, 0, 1, 0);
}
END_TEST

START_TEST(test_resident_first_then_purged)
{
    int clean;
    uintptr_t base = fresh_arena();
    uintptr_t a = take(4, &clean), b = take(4, &clean);
    ck_assert(a == base && b == base + 4 * HAK_CHUNK_SIZE);
    memset((void *)a, 0x77, 4 * HAK_CHUNK_SIZE);
    /* a purged (cap 0), b kept resident: the next take of 4 gets resident chunks, not a's */
    ck_assert_int_eq(arena_release(a, 4, 0, 0, 1, 0), 1);
    ck_assert_int_eq(arena_release(b, 4, NEVER_PURGE, 0, 1, 0), 0);
    uintptr_t c = take(4, &clean);
    ck_assert(c == b);
    ck_assert_int_eq(clean, 0);
    /* no resident run is left: the lowest free run is a's, purged, and reads as zero */
    uintptr_t d = take(4, &clean);
    ck_assert(d == a);
    ck_assert_int_eq(clean, 1);
    for (size_t k = 0; k < 4 * HAK_CHUNK_SIZE; k += 512)
        ck_assert_uint_eq(((unsigned char *)d)[k], 0);
    arena_release(c, 4, 0, 0, 1, 0);
    arena_release(d, 4, 0, 0, 1, 0);
}
END_TEST

/* With a delay, runs past `retain` wait before they are purged, unless more would wait than
 * an eighth past twice `retain` (and than is in use); then those that have waited go, down
 * to `retain`, and what was freed last stays.  (Check forks each test, so the arenas start
 * empty here.) */
START_TEST(test_delayed_purge)
{
    int clean;
    size_t retain = 4 * HAK_CHUNK_SIZE;
    uintptr_t a = take(4, &clean), b = take(4, &clean), c = take(4, &clean);
    ck_assert_int_eq(arena_release(a, 4, retain, 50, 1, 0), 0);      /* within retain */
    ck_assert_int_eq(arena_release(b, 4, retain, 50, 1, 0), 0);      /* past it, but fresh */
    struct timespec nap = { 0, 150 * 1000 * 1000 };
    nanosleep(&nap, NULL);
    /* 3 x retain would be resident, none in use: a and b, which have waited, go */
    ck_assert_int_eq(arena_release(c, 4, retain, 50, 1, 0), 1);
    uintptr_t d = take(4, &clean);                              /* resident first: c */
    ck_assert_int_eq(clean, 0);
    ck_assert(d == c);
    uintptr_t e = take(4, &clean);                              /* a or b: purged */
    ck_assert(e == a || e == b);
    ck_assert_int_eq(clean, 1);
    uintptr_t f = take(4, &clean);
    ck_assert(f == a || f == b);
    ck_assert_int_eq(clean, 1);
    arena_release(d, 4, 0, 0, 1, 0);
    arena_release(e, 4, 0, 0, 1, 0);
    arena_release(f, 4, 0, 0, 1, 0);
}
END_TEST

/* Pages of a chunk the kernel still holds (mincore), of its 16. */
static unsigned resident_pages(uintptr_t c)
{
    unsigned char v[HAK_CHUNK_SIZE / 4096];
    ck_assert_int_eq(mincore((void *)c, HAK_CHUNK_SIZE, v), 0);
    unsigned n = 0;
    for (unsigned k = 0; k < sizeof v; k++)
        n += v[k] & 1;
    return n;
}

/* Past the bound, runs that have not waited go too, in one sweep, until no more than the
 * bound waits; each run is its own (a purged chunk between them), and the kernel drops
 * every one, whether the sweep hands them over in one call (Phase 95) or one by one. */
START_TEST(test_forced_purge_batch)
{
    enum { N = 40 };
    int clean;
    size_t retain = 2 * HAK_CHUNK_SIZE;
    uintptr_t c[N];
    for (unsigned i = 0; i < N; i++) {
        c[i] = take(1, &clean);
        memset((void *)c[i], 0xab, HAK_CHUNK_SIZE);
    }
    for (unsigned i = 1; i < N; i += 2)        /* purged at once: free, not resident */
        ck_assert_int_eq(arena_release(c[i], 1, 0, 0, _i, 0), 1);
    int purged = 0;
    for (unsigned i = 0; i < N; i += 2)
        purged |= arena_release(c[i], 1, retain, 10000, _i, 0);
    ck_assert_int_eq(purged, 1);
    unsigned kept = 0;
    for (unsigned i = 0; i < N; i++) {
        unsigned r = resident_pages(c[i]);
        ck_assert(r == 0 || (i % 2 == 0 && r == HAK_CHUNK_SIZE / 4096));
        kept += r != 0;
    }
    ck_assert_uint_le(kept, 4);                 /* nothing in use: twice retain waits */
    ck_assert_uint_ge(kept, 1);                 /* and the newest were not all dropped */
    for (unsigned i = 0; i < N; i++) {          /* purged chunks read as zero when taken */
        uintptr_t t = take(1, &clean);
        if (clean)
            ck_assert_int_eq(*(volatile unsigned char *)t, 0);
        else
            ck_assert_int_eq(*(volatile unsigned char *)t, 0xab);
        c[i] = t;
    }
    for (unsigned i = 0; i < N; i++)
        arena_release(c[i], 1, 0, 0, 1, 0);
}
END_TEST

/* What waits may be as much as is in use: a program with a big working set that frees
 * part of it and builds it again keeps the pages; once nothing is in use, a run past
 * twice `retain` is purged at once. */
START_TEST(test_wait_follows_use)
{
    int clean;
    size_t retain = HAK_CHUNK_SIZE;
    uintptr_t a = take(8, &clean), b = take(8, &clean);
    ck_assert_int_eq(arena_release(a, 8, retain, 10000, 1, 0), 0);   /* b's 8 chunks in use */
    uintptr_t c = take(8, &clean);
    ck_assert(c == a);
    ck_assert_int_eq(clean, 0);                                 /* built again from resident pages */
    ck_assert_int_eq(arena_release(c, 8, retain, 10000, 1, 0), 0);
    ck_assert_int_eq(arena_release(b, 8, retain, 10000, 1, 0), 1);   /* 16 would wait, none in use */
}
END_TEST

START_TEST(test_extend_and_free_chunks)
{
    /* A run grows in place into the free chunks after it, never over a taken one. */
    int clean;
    uintptr_t a = take(2, &clean), b = take(2, &clean);
    ck_assert(b == a + 2 * HAK_CHUNK_SIZE);
    ck_assert_int_eq(arena_extend(a, 2, 1), 0);                 /* b is in the way */
    ck_assert_int_eq(arena_chunk_free(b), 0);
    arena_release(b, 2, NEVER_PURGE, 0, 1, 0);
    ck_assert_int_eq(arena_chunk_free(b + HAK_CHUNK_SIZE), 1);
    ck_assert_int_eq(arena_extend(a, 2, 2), 1);                 /* now a holds b's chunks */
    ck_assert_int_eq(arena_chunk_free(b), 0);
    uintptr_t c = take(1, &clean);
    ck_assert(c >= a + 4 * HAK_CHUNK_SIZE || c + HAK_CHUNK_SIZE <= a);
    arena_release(a, 4, NEVER_PURGE, 0, 1, 0);
    arena_release(c, 1, NEVER_PURGE, 0, 1, 0);
    ck_assert_int_eq(arena_chunk_free(a), 1);
    ck_assert_int_eq(arena_chunk_free((uintptr_t)&clean), 0);  /* not in any arena */
}
END_TEST

/* The VmFlags of the mapping holding a, from /proc/self/smaps: 1 if advised for huge
 * pages ("hg"), 0 if not, -1 if a is in no mapping. */
static int mapping_has_hg(uintptr_t a)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    ck_assert_ptr_nonnull(f);
    char line[512];
    int in = 0, hg = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            in = a >= lo && a < hi;
        } else if (in && !strncmp(line, "VmFlags:", 8)) {
            hg = strstr(line, " hg") != NULL;
            break;
        }
    }
    fclose(f);
    return hg;
}

/* A kernel without transparent huge pages refuses the advice; nothing to see then. */
static int thp_kernel(void)
{
    return access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) == 0;
}

START_TEST(test_huge_arena_mapping)
{
    unsigned n;
    int huge = 1, small = 0;
    uintptr_t h = arena_map(1, &n, &huge), p = arena_map(1, &n, &small);
    ck_assert(h != 0 && p != 0);
    ck_assert_uint_eq(h & (OS_HUGE_PAGE - 1), 0);       /* huge pages need 2 MiB boundaries */
    ck_assert_uint_eq(p & (HAK_CHUNK_SIZE - 1), 0);
    if (thp_kernel())
        ck_assert_int_eq(mapping_has_hg(h), 1);
    ck_assert_int_eq(mapping_has_hg(p), 0);
    os_unmap((void *)h, (size_t)n << HAK_CHUNK_SHIFT);
    os_unmap((void *)p, (size_t)n << HAK_CHUNK_SHIFT);
}
END_TEST

/* [phases] phase94 (HAKMEM_PHASE94, set by the unit-arena-phase94 run) reaches the
 * arenas that blocks come from; off by default. */
START_TEST(test_phase94_policy)
{
    char v[16], src[128];
    ck_assert_int_eq(hak_policy_get("phases.phase94", v, sizeof v, src, sizeof src), 0);
    int on = !strcmp(v, "on");
    char *b = hak_malloc(100);
    ck_assert_ptr_nonnull(b);
    if (on && thp_kernel())
        ck_assert_int_eq(mapping_has_hg((uintptr_t)b), 1);
    if (!on)
        ck_assert_int_eq(mapping_has_hg((uintptr_t)b), 0);
    hak_free(b);
}
END_TEST

/* [phases] phase96 (HAKMEM_PHASE96=off in the unit-arena-phase96-off run): once 16 MiB
 * is in use, a region taken from fresh pages is resident whole before the first block is
 * touched, and so is a span (Phase 100); with the phase off only the pages touched are.
 * A small heap's never are. */
START_TEST(test_phase96_populate)
{
    char v[16], src[128];
    ck_assert_int_eq(hak_policy_get("phases.phase96", v, sizeof v, src, sizeof src), 0);
    int on = !strcmp(v, "on");
    ck_assert_int_eq(hak_policy_get("phases.phase94", v, sizeof v, src, sizeof src), 0);
    int huge = !strcmp(v, "on") && thp_kernel();    /* a huge page is resident whole anyway */
    char *small = hak_malloc(700);              /* a 64 KiB region, the heap still small */
    ck_assert_ptr_nonnull(small);
    if (!huge)
        ck_assert_uint_lt(resident_pages((uintptr_t)small & ~(uintptr_t)(HAK_CHUNK_SIZE - 1)), 16);
    void *big[17];
    for (unsigned i = 0; i < 17; i++)
        ck_assert_ptr_nonnull(big[i] = hak_malloc(1 << 20));    /* chunk runs: in use */
    char *b = hak_malloc(900);                  /* another 64 KiB class: a fresh region */
    ck_assert_ptr_nonnull(b);
    unsigned r = resident_pages((uintptr_t)b & ~(uintptr_t)(HAK_CHUNK_SIZE - 1));
    if (on)
        ck_assert_uint_eq(r, 16);
    else if (!huge)
        ck_assert_uint_lt(r, 16);
    char *m = hak_malloc(200 << 10);            /* the heap's first span, taken now */
    ck_assert_ptr_nonnull(m);
    struct region *sr = region_of_block(m);
    if (sr->cls == HAK_CLS_SPAN) {              /* Phase 100 on */
        unsigned rs = 0;
        for (unsigned k = 0; k < SPAN_CHUNKS; k++)
            rs += resident_pages((uintptr_t)sr + ((uintptr_t)k << HAK_CHUNK_SHIFT));
        if (on)
            ck_assert_uint_eq(rs, SPAN_CHUNKS * 16);
        else if (!huge)
            ck_assert_uint_lt(rs, SPAN_CHUNKS * 16);
    }
    for (unsigned i = 0; i < 17; i++)
        hak_free(big[i]);
    hak_free(m);
    hak_free(b);
    hak_free(small);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("arena");
    TCase *tc = tcase_create("arena");
    tcase_add_test(tc, test_phase94_policy);      /* first: before any test maps an arena itself */
    tcase_add_test(tc, test_runs_coalesce);
    tcase_add_test(tc, test_resident_first_then_purged);
    tcase_add_loop_test(tc, test_forced_purge_batch, 0, 2);
    tcase_add_test(tc, test_delayed_purge);
    tcase_add_test(tc, test_extend_and_free_chunks);
    tcase_add_test(tc, test_wait_follows_use);
    tcase_add_test(tc, test_huge_arena_mapping);
    tcase_add_test(tc, test_phase96_populate);
    suite_add_tcase(su, tc);
    return check_run(su);
}
