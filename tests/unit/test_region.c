/* Unit tests of regions: pointer -> region by the map, the per-block tags, and
 * detection of foreign pointers, interior pointers and double frees (refused, reported). */
#define _GNU_SOURCE
#include <check.h>
#include "check_run.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include "hakmem.h"
#include "testutil.h"
#include "cold/cold.h"
#include "region/map.h"
#include "route/route.h"

static int global_var;
static char report[4096];

START_TEST(test_lookup_every_class)
{
    for (unsigned c = 0; c < HAK_NCLASSES; c++) {
        size_t n = class_table[c].size;
        char *p = hak_malloc(n);
        ck_assert_ptr_nonnull(p);
        unsigned b = region_map_get((uintptr_t)p);
        ck_assert_uint_ge(b, 1);
        ck_assert_uint_le(b, 254);
        struct region *r = region_from_map((uintptr_t)p, b);
        ck_assert_uint_eq(r->cls, c);
        ck_assert_uint_eq(r->bsize, n);
        ck_assert_ptr_eq(atomic_load(&r->owner), heap_tls);
        /* the last byte of the block maps to the same region */
        uintptr_t last = (uintptr_t)p + n - 1;
        ck_assert_ptr_eq(region_from_map(last, region_map_get(last)), r);
        uint8_t *t;
        ck_assert(region_tag_check_live(r, (uintptr_t)p, &t));
        ck_assert_uint_eq(*t, TAG_LIVE(c));
        if (c < HAK_NTINY) {
            /* the hot paths' tag address, from the pointer and the live tag alone */
            ck_assert_ptr_eq(region_tag_tiny(p, TAG_LIVE(c)), t);
            ck_assert_ptr_eq(region_tag_live_tiny(p, TAG_LIVE(c), (1u << r->gshift) - 1), t);
        }
        hak_free(p);
        ck_assert_uint_eq(*t, TAG_FREE);
        ck_assert(!region_tag_check_live(r, (uintptr_t)p, &t));
    }
}
END_TEST

START_TEST(test_large_not_region)
{
    void *p = hak_malloc(1 << 20);
    ck_assert_uint_eq(region_map_get((uintptr_t)p), MAP_LARGE);
    hak_free(p);
}
END_TEST

START_TEST(test_foreign_map_none)
{
    int local;
    void *g = malloc(100);          /* glibc's: this test binary does not override malloc */
    ck_assert_uint_eq(region_map_get((uintptr_t)&local), MAP_NONE);
    ck_assert_uint_eq(region_map_get((uintptr_t)&global_var), MAP_NONE);
    ck_assert_uint_eq(region_map_get((uintptr_t)g), MAP_NONE);
    ck_assert_uint_eq(region_map_get((uintptr_t)0x10000), MAP_NONE);
    ck_assert_uint_eq(region_map_get(~(uintptr_t)0 - 15), MAP_NONE);
    free(g);
}
END_TEST

/* Frees p with hak_free and returns what hakmem reported. */
static const char *free_reported(void *p)
{
    return hak_free_reported(p, report, sizeof report);
}

START_TEST(test_foreign_pointers_refused)
{
    int local;
    void *g = malloc(64);
    void *m = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    void *ptrs[] = { &local, &global_var, g, m, (void *)0x10000 };
    for (unsigned i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++) {
        ck_assert_ptr_nonnull(strstr(free_reported(ptrs[i]), "not allocated by hakmem"));
        ck_assert_ptr_nonnull(strstr(report, "hakmem: free(0x"));
    }
    ck_assert_str_eq(free_reported(NULL), "");
    munmap(m, 1 << 16);
    free(g);
}
END_TEST

START_TEST(test_double_free_refused)
{
    for (unsigned c = 0; c < HAK_NCLASSES; c += 3) {
        size_t n = class_table[c].size;
        char *p = hak_malloc(n);
        hak_free(p);
        ck_assert_ptr_nonnull(strstr(free_reported(p), "double free"));
        /* the heap stayed intact: the block is handed out once, not twice */
        char *a = hak_malloc(n), *b = hak_malloc(n);
        ck_assert_ptr_ne(a, b);
        hak_free(a);
        hak_free(b);
    }
    void *big = hak_malloc(3 << 20);
    hak_free(big);
    ck_assert_ptr_nonnull(strstr(free_reported(big), "double free (large block)"));
}
END_TEST

/* A region's home set, on a region of its own: a tiny region hands back the blocks its
 * owner sent home in address order on from where its last scan stopped, wrapping round
 * (TAG_HOME tags, across tag words, blocks several granules long); a mid region's list
 * is LIFO.  A block gone
 * home is a double free to free() like a cached one. */
static struct region *region_for_test(unsigned cls, unsigned carve)
{
    struct region *r = arena_region_take(cls, NULL);
    ck_assert_ptr_nonnull(r);
    ck_assert_uint_le(carve, r->nblocks);
    r->carved = (uint16_t)carve;
    r->used = (uint16_t)carve;
    return r;
}

static void *block_at(struct region *r, unsigned i)
{
    return (char *)r + r->blocks_off + (size_t)i * r->bsize;
}

START_TEST(test_home_take_order)
{
    static const unsigned sizes[] = { 16, 48, 80, 1024 };     /* 1, 3, 5 and 1 tags a block */
    for (unsigned s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        unsigned cls = class_of_size(sizes[s]);
        ck_assert_uint_lt(cls, HAK_NTINY);
        struct region *r = region_for_test(cls, 60);
        static const unsigned home[] = { 41, 5, 17, 59, 6 };
        for (unsigned i = 0; i < 5; i++) {
            region_home_put(r, block_at(r, home[i]));
            r->used--;
            ck_assert_uint_eq(*region_tag(r, (uintptr_t)block_at(r, home[i])), TAG_HOME);
        }
        ck_assert_uint_eq(r->nhome, 5);
        void *out[8];
        ck_assert_uint_eq(region_home_take(r, out, 2), 2);
        ck_assert_ptr_eq(out[0], block_at(r, 5));
        ck_assert_ptr_eq(out[1], block_at(r, 6));
        ck_assert_uint_eq(*region_tag(r, (uintptr_t)out[0]), TAG_FREE);
        region_home_put(r, block_at(r, 2));              /* behind where the scan stopped */
        ck_assert_uint_eq(region_home_take(r, out, 8), 4);
        ck_assert_ptr_eq(out[0], block_at(r, 17));
        ck_assert_ptr_eq(out[1], block_at(r, 41));
        ck_assert_ptr_eq(out[2], block_at(r, 59));
        ck_assert_ptr_eq(out[3], block_at(r, 2));          /* found wrapping round */
        ck_assert_uint_eq(r->nhome, 0);
        ck_assert_uint_eq(region_home_take(r, out, 8), 0);
        r->used = 0;
        arena_region_release(r);
    }
    struct region *m = region_for_test(class_of_size(2048), 3);
    ck_assert_uint_ge(m->cls, HAK_NTINY);
    for (unsigned i = 0; i < 3; i++)
        region_home_put(m, block_at(m, i));
    void *out[4];
    ck_assert_uint_eq(region_home_take(m, out, 1), 1);
    ck_assert_ptr_eq(out[0], block_at(m, 2));            /* freed last, taken first */
    ck_assert_uint_eq(region_home_take(m, out, 4), 2);
    m->used = 0;
    arena_region_release(m);
}
END_TEST

/* A tiny region's scan covers the tags of the blocks carved so far, not the whole region:
 * a home tag can only be a block handed out once.  A tag past the carved end is never
 * read (planted here to show it); carving on brings it into the scan, and a scan that
 * finds fewer blocks than nhome says (Phase 97's count may lag the tags) stops after one
 * round of the carved tags. */
START_TEST(test_home_scan_carved_only)
{
    static const unsigned sizes[] = { 8, 16, 48, 64, 1024 };
    for (unsigned s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        struct region *r = region_for_test(class_of_size(sizes[s]), 20);
        unsigned far = r->nblocks - 1;                  /* not carved */
        *region_tag(r, (uintptr_t)block_at(r, far)) = TAG_HOME;
        region_home_put(r, block_at(r, 19));
        region_home_put(r, block_at(r, 3));
        r->used -= 2;
        r->nhome++;                                     /* as if the planted tag counted */
        void *out[8];
        ck_assert_uint_eq(region_home_take(r, out, 8), 2);
        ck_assert_ptr_eq(out[0], block_at(r, 3));       /* address order from a fresh region's start */
        ck_assert_ptr_eq(out[1], block_at(r, 19));
        ck_assert_uint_eq(r->nhome, 0);                 /* fewer found than said: none left */
        ck_assert_uint_eq(*region_tag(r, (uintptr_t)block_at(r, far)), TAG_HOME);
        r->carved = (uint16_t)r->nblocks;               /* carving on reaches it */
        r->used = (uint16_t)(r->used + r->nblocks - 20);
        r->nhome = 1;
        ck_assert_uint_eq(region_home_take(r, out, 8), 1);
        ck_assert_ptr_eq(out[0], block_at(r, far));
        ck_assert_uint_eq(*region_tag(r, (uintptr_t)out[0]), TAG_FREE);
        r->used = 0;
        arena_region_release(r);
    }
}
END_TEST

/* region_take hands home blocks first, in the scan's order, then fresh ones in descending
 * address order: a refill writes them straight into the slots, which pop from the end, so
 * fresh blocks go out lowest address first. */
START_TEST(test_take_order_for_slots)
{
    struct region *r = region_for_test(class_of_size(32), 4);
    region_home_put(r, block_at(r, 1));
    region_home_put(r, block_at(r, 3));
    r->used -= 2;
    void *out[8];
    ck_assert_uint_eq(region_take(r, out, 6), 6);
    ck_assert_ptr_eq(out[0], block_at(r, 1));
    ck_assert_ptr_eq(out[1], block_at(r, 3));
    for (unsigned i = 0; i < 4; i++)                 /* carved 4..7, the lowest last */
        ck_assert_ptr_eq(out[2 + i], block_at(r, 7 - i));
    ck_assert_uint_eq(r->carved, 8);
    ck_assert_uint_eq(r->used, 8);
    r->used = 0;
    arena_region_release(r);
}
END_TEST

START_TEST(test_home_block_double_free)
{
    unsigned c = class_of_size(64);
    void *blk[2 * HAK_SLOTS_CAP_MAX + 2];
    unsigned n = 0;
    blk[n++] = hak_malloc(64);
    struct heap *h = heap_tls;
    unsigned cap = slots_cap(h, c);
    while (n < cap + 1 || slots_count(h, c))    /* cap + 1 blocks, and an empty cache */
        blk[n++] = hak_malloc(64);
    for (unsigned i = 0; i < cap; i++)
        hak_free(blk[i]);
    ck_assert_uint_eq(slots_count(h, c), cap);
    void *p = blk[cap];
    struct region *r = region_of_tiny(p);
    unsigned nhome = r->nhome, used = r->used;
    hak_free(p);                                    /* the slots are full: home */
    ck_assert_uint_eq(*region_tag(r, (uintptr_t)p), TAG_HOME);
    ck_assert_uint_eq(r->nhome, nhome + 1);         /* counted home, out of use */
    ck_assert_uint_eq(r->used, used - 1);
    ck_assert_uint_eq(h->regions[c].scan & SCAN_REGIONS, SCAN_REGIONS);   /* the class's refill looks */
    ck_assert_ptr_nonnull(strstr(free_reported(p), "double free"));
    for (unsigned i = cap + 1; i < n; i++)
        hak_free(blk[i]);
}
END_TEST

/* Another thread's free.  Phase 107 (on by default): a tiny block waits in that thread's
 * batch for its owner, its tag still live and its first word the owner's mark, and comes
 * home when the owner takes the batch in (the thread's exit sent it; malloc_trim takes it
 * in).  Phase 97 (HAKMEM_PHASE97=off in the unit-region-phase97-off run), or a tiny block
 * with Phase 107 off: it goes home by its tag and the region's remote_home count, with
 * nothing written into the block; Phase 97 off, and for mid blocks always, it is pushed
 * onto the region's linked remote stack.  Either way a second free is a double free, and
 * the owner's next refill of the class hands the block out again before carving new ones. */
START_TEST(test_remote_free_goes_home)
{
    char v[16], src[128];
    ck_assert_int_eq(hak_policy_get("phases.phase97", v, sizeof v, src, sizeof src), 0);
    int on = !strcmp(v, "on");
    ck_assert_int_eq(hak_policy_get("phases.phase107", v, sizeof v, src, sizeof src), 0);
    int batched_on = !strcmp(v, "on");
    static const size_t sizes[] = { 64, 1024, 3000 };      /* tiny, the largest tiny, mid */
    for (unsigned s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        unsigned cls = class_of_size(sizes[s]);
        int batched = batched_on && cls < HAK_NTINY;
        int home = !batched && on && cls < HAK_NTINY;
        char *p = hak_malloc(sizes[s]);
        ck_assert_ptr_nonnull(p);
        memset(p, 0x5a, sizes[s]);
        struct region *r = region_of_block(p);
        ck_assert_str_eq(hak_free_elsewhere(p, report, sizeof report), "");
        if (batched) {
            ck_assert_uint_eq(*region_tag(r, (uintptr_t)p), r->live_tag);   /* not taken in yet */
            ck_assert_ptr_nonnull(atomic_load(&heap_tls->inbox));
        } else {
            ck_assert_uint_eq(*region_tag(r, (uintptr_t)p), home ? TAG_HOME : TAG_FREE);
        }
        ck_assert_uint_eq(atomic_load(&r->remote_home), home ? 1 : 0);
        ck_assert_ptr_eq(atomic_load(&r->remote), home || batched ? NULL : (void *)p);
#ifndef __SANITIZE_ADDRESS__                                 /* a freed block is poisoned */
        if (home)
            ck_assert_uint_eq((unsigned char)p[0], 0x5a);   /* no link written into it */
#endif
        ck_assert_ptr_nonnull(strstr(hak_free_elsewhere(p, report, sizeof report), "double free"));
        if (batched) {
            hak_malloc_trim(0);                             /* the owner takes its batches in */
            ck_assert_ptr_null(atomic_load(&heap_tls->inbox));
            ck_assert_uint_eq(*region_tag(r, (uintptr_t)p), TAG_FREE);    /* in its slots */
        }
        ck_assert_ptr_nonnull(strstr(free_reported(p), "double free"));
        /* Held live, the class's blocks come from its regions' home and remote blocks
         * before fresh ones: p is among the first few regions' worth. */
        unsigned max = 4 * class_table[cls].nblocks, n = 0;
        void **held = malloc(max * sizeof *held);
        ck_assert_ptr_nonnull(held);
        int found = 0;
        while (n < max && !found) {
            held[n] = hak_malloc(sizes[s]);
            ck_assert_ptr_nonnull(held[n]);
            found = held[n++] == p;
        }
        ck_assert_msg(found, "%zu B: the block freed by another thread was not reused in %u mallocs", sizes[s], n);
        ck_assert_uint_eq(atomic_load(&r->remote_home), 0);
        for (unsigned i = 0; i < n; i++)
            hak_free(held[i]);
        free(held);
    }
}
END_TEST

/* Phase 107: another thread frees p, then its owner frees it too before taking the batch
 * in.  The owner's free finds the tag live and caches p; the double free is reported when
 * the batch comes in (naming p), whether p is still cached then (its tag free) or has
 * been handed out again (the hand-out cleared the mark): never freed a second time. */
START_TEST(test_remote_then_owner_free)
{
    char v[16], src[128];
    ck_assert_int_eq(hak_policy_get("phases.phase107", v, sizeof v, src, sizeof src), 0);
    if (strcmp(v, "on") != 0)
        return;                             /* the tag is marked at once: test_remote_free_goes_home */
    for (int reuse = 0; reuse < 2; reuse++) {
        char *p = hak_malloc(96);
        ck_assert_ptr_nonnull(p);
        ck_assert_str_eq(hak_free_elsewhere(p, report, sizeof report), "");
        ck_assert_str_eq(free_reported(p), "");             /* seen later, not here */
        char *q = reuse ? hak_malloc(96) : NULL;
        if (reuse) {
            ck_assert_ptr_eq(q, p);                         /* the slots give it back first */
            memset(q, 0x11, 96);
        }
        struct capture c;
        stderr_capture_begin(&c);
        hak_malloc_trim(0);
        stderr_capture_end(&c, report, sizeof report);
        ck_assert_ptr_nonnull(strstr(report, "double free"));
        char addr[32];
        snprintf(addr, sizeof addr, "%p", (void *)p);
        ck_assert_ptr_nonnull(strstr(report, addr));
        if (reuse) {                                        /* still q's, whole */
            ck_assert_uint_eq(*region_tag(region_of_block(q), (uintptr_t)q), region_of_block(q)->live_tag);
            for (int i = 0; i < 96; i++)
                ck_assert_int_eq(q[i], 0x11);
            ck_assert_str_eq(free_reported(q), "");
        }
    }
}
END_TEST

/* A class whose size is not a power of two has block starts every few granules: a
 * granule inside a block (48 B blocks: offsets 16 and 32 of every block) is refused. */
START_TEST(test_interior_granules_refused)
{
    for (unsigned c = 0; c < HAK_NCLASSES; c++) {
        size_t n = class_table[c].size, g = (size_t)1 << class_table[c].gshift;
        char *p = hak_malloc(n);
        for (size_t off = g; off < n && off <= 4 * g; off += g)
            ck_assert_msg(strstr(free_reported(p + off), "not the start") != NULL,
                          "class C%u: free of block + %zu not refused", c, off);
        /* and inside a granule: the cache's alignment mask, or the map path's rotation */
        size_t odd[] = { 1, g / 2, g - 1, g + 1, n - 1 };
        for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++)
            if (odd[i] % g != 0)
                ck_assert_msg(strstr(free_reported(p + odd[i]), "not the start") != NULL,
                              "class C%u: free of block + %zu not refused", c, odd[i]);
        uint8_t *t;                      /* the block itself is still live */
        ck_assert(region_tag_check_live(region_of_block(p), (uintptr_t)p, &t));
        hak_free(p);
    }
}
END_TEST

START_TEST(test_interior_pointers_refused)
{
    char *p = hak_malloc(256);
    ck_assert_ptr_nonnull(strstr(free_reported(p + 1), "not the start of a block"));
    ck_assert_ptr_nonnull(strstr(free_reported(p + 16), "not the start"));
    char *m = hak_malloc(5000);        /* mid block spanning several tag granules */
    ck_assert_ptr_nonnull(strstr(free_reported(m + 1024), "not the start"));
    char *big = hak_malloc(1 << 20);
    ck_assert_ptr_nonnull(strstr(free_reported(big + 4096), "not allocated by hakmem"));
    /* still live after all of that */
    uint8_t *t;
    ck_assert(region_tag_check_live(region_of_block(p), (uintptr_t)p, &t));
    memset(p, 1, 256);
    memset(m, 2, 5000);
    memset(big, 3, 1 << 20);
    ck_assert_str_eq(free_reported(p), "");
    ck_assert_str_eq(free_reported(m), "");
    ck_assert_str_eq(free_reported(big), "");
}
END_TEST

START_TEST(test_usable_size_of_bad_pointers)
{
    int local;
    struct capture c;
    stderr_capture_begin(&c);
    size_t a = hak_malloc_usable_size(&local);
    char *p = hak_malloc(100);
    hak_free(p);
    size_t b = hak_malloc_usable_size(p);
    void *r = hak_realloc(p, 200);
    stderr_capture_end(&c, report, sizeof report);
    ck_assert_uint_eq(a, 0);
    ck_assert_uint_eq(b, 0);
    ck_assert_ptr_null(r);
    ck_assert_ptr_nonnull(strstr(report, "malloc_usable_size(0x"));
    ck_assert_ptr_nonnull(strstr(report, "realloc(0x"));
    ck_assert_ptr_nonnull(strstr(report, "use after free (block already freed) (class C"));
    /* realloc of a foreign pointer: refused, reported, the pointer untouched */
    char foreign[32] = "not hakmem's";
    stderr_capture_begin(&c);
    void *q = hak_realloc(foreign, 64);
    stderr_capture_end(&c, report, sizeof report);
    ck_assert_ptr_null(q);
    ck_assert_str_eq(foreign, "not hakmem's");
    ck_assert_ptr_nonnull(strstr(report, "hakmem: realloc(0x"));
    ck_assert_ptr_nonnull(strstr(report, "not allocated by hakmem"));
}
END_TEST

#if HAK_PHASE93
/* Phase 93's cache holds exactly the heap's own tiny regions: noted when one joins,
 * forgotten when it leaves, rebuilt when the phase is switched. */
START_TEST(test_phase93_cache_coherent)
{
    struct heap *h;
    char *p = hak_malloc(24);                       /* C2 */
    h = heap_tls;
    uintptr_t base = (uintptr_t)p & ~(uintptr_t)0xFFFF;
    ck_assert_uint_eq(*heap_rcache_slot(h, base), heap_rcache_key(base));
    /* a second region of the same class; the first empties and leaves the heap */
    enum { N = 2100 };                              /* > one region of 32-byte blocks */
    static char *blk[N];
    for (int i = 0; i < N; i++)
        blk[i] = hak_malloc(24);
    hak_free(p);
    for (int i = 0; i < N; i++)
        hak_free(blk[i]);
    heap_flush(h);
    for (unsigned i = 0; i < RCACHE_SIZE; i++) {
        uintptr_t e = h->rcache[i];
        if (e == RCACHE_EMPTY)
            continue;
        struct region *r = (struct region *)(e << 16);  /* every entry: a live region of this heap */
        ck_assert_uint_eq(region_map_get((uintptr_t)r), 1);
        ck_assert_ptr_eq(atomic_load(&r->owner), h);
        ck_assert_uint_eq(r->chunks, 1);
        ck_assert_uint_eq(h->rinfo[i].live_tag, r->live_tag);
        ck_assert_uint_eq(h->rinfo[i].amask, (1u << r->gshift) - 1);
    }
    /* switched off: the cache empties and frees still work */
    char path[] = "/tmp/hak-p93-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_eq(write(fd, "[phases]\nphase93 = off\n", 23), 23);
    close(fd);
    ck_assert_int_eq(hak_policy_load(path), 0);
    unlink(path);
    hak_free(hak_malloc(24));
    for (unsigned i = 0; i < RCACHE_SIZE; i++)
        ck_assert_uint_eq(h->rcache[i], RCACHE_EMPTY);
    char *q = hak_malloc(24);
    ck_assert_ptr_nonnull(strstr(free_reported(q + 8), "not the start"));   /* the map path checks */
    hak_free(q);
}
END_TEST
#endif

/* [safety] on_misuse = abort: the report, then abort(), as glibc does. */
START_TEST(test_abort_setting)
{
    pid_t pid = fork();
    if (pid == 0) {
        char path[] = "/tmp/hak-abort-XXXXXX";
        int fd = mkstemp(path);
        const char text[] = "[safety]\non_misuse = abort\n";
        if (write(fd, text, sizeof text - 1) != (ssize_t)(sizeof text - 1))
            _exit(2);
        close(fd);
        unsetenv("HAKMEM_ON_MISUSE");
        if (hak_policy_load(path) != 0)
            _exit(3);
        unlink(path);
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 2);
        char *p = hak_malloc(40);
        hak_free(p);
        hak_free(p);
        _exit(0);
    }
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "status %d", st);
}
END_TEST

START_TEST(test_empty_current_regions_released)
{
    /* A mid class's current region stays while it empties (a malloc/free loop of one block
     * keeps it), and goes back to the arenas once the heap takes a region for another class. */
    void *a = hak_malloc(40 << 10);
    uintptr_t ra = (uintptr_t)region_of_block(a);
    hak_free(a);
    void *b = hak_malloc(40 << 10);                          /* the same region again */
    ck_assert_uint_eq((uintptr_t)region_of_block(b), ra);
    hak_free(b);
    ck_assert_uint_ne(region_map_get(ra), MAP_NONE);
    /* another class takes a new region: from the chunks the empty one gave back (the
     * arenas take the lowest free run), not from the ones after it */
    void *c = hak_malloc(100 << 10);
    ck_assert_uint_eq((uintptr_t)region_of_block(c), ra);
    ck_assert_uint_ne(class_of_size(100 << 10), class_of_size(40 << 10));
    hak_free(c);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("region");
    TCase *tc = tcase_create("region");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_lookup_every_class);
    tcase_add_test(tc, test_large_not_region);
    tcase_add_test(tc, test_foreign_map_none);
    tcase_add_test(tc, test_foreign_pointers_refused);
    tcase_add_test(tc, test_double_free_refused);
    tcase_add_test(tc, test_home_take_order);
    tcase_add_test(tc, test_home_scan_carved_only);
    tcase_add_test(tc, test_take_order_for_slots);
    tcase_add_test(tc, test_home_block_double_free);
    tcase_add_test(tc, test_remote_free_goes_home);
    tcase_add_test(tc, test_remote_then_owner_free);
    tcase_add_test(tc, test_interior_pointers_refused);
    tcase_add_test(tc, test_interior_granules_refused);
    tcase_add_test(tc, test_usable_size_of_bad_pointers);
    tcase_add_test(tc, test_abort_setting);
    tcase_add_test(tc, test_empty_current_regions_released);
#if HAK_PHASE93
    tcase_add_test(tc, test_phase93_cache_coherent);
#endif
    suite_add_tcase(su, tc);
    return check_run(su);
}
