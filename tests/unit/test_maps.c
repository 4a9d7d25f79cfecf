/* The kernel mappings hakmem holds stay bounded however often huge blocks are replaced:
 * a huge block gathered from pieces spans at most LMAPS_MAX mappings, the large page cache
 * at most LCACHE_MAX, an arena at most ARENA_MAPS_MAX (past vm.max_map_count every mmap of
 * the process fails). */
#include <check.h>
#include "check_run.h"
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>
#include "hakmem.h"
#include "testutil.h"
#include "large/large.h"
#include "large/large_cache.h"
#include "large/large_maps.h"
#include "os/os.h"

#define MIB ((size_t)1 << 20)

/* The mappings in /proc/self/maps that overlap [lo, hi), read without allocating (stdio
 * would, and what it maps would count). */
static unsigned maps_each(uintptr_t lo, uintptr_t hi)
{
    static char buf[1 << 16];
    unsigned n = 0;
    size_t have = 0;
    int fd = open("/proc/self/maps", O_RDONLY);
    ck_assert_int_ge(fd, 0);
    for (;;) {
        ssize_t r = read(fd, buf + have, sizeof buf - 1 - have);
        if (r <= 0)
            break;
        have += (size_t)r;
        buf[have] = 0;
        char *line = buf, *nl;
        while ((nl = strchr(line, '\n')) != NULL) {
            unsigned long s, e;
            if (sscanf(line, "%lx-%lx", &s, &e) == 2 && e > lo && s < hi)
                n++;
            line = nl + 1;
        }
        have = (size_t)(buf + have - line);
        memmove(buf, line, have);
    }
    close(fd);
    return n;
}

static unsigned maps_lines(void)
{
    return maps_each(0, UINTPTR_MAX);
}

static uint64_t next(uint64_t *x)
{
    *x = *x * 6364136223846793005ull + 1442695040888963407ull;
    return *x >> 17;
}

/* Four buffers of 5-25 MiB, one replaced at random each step (freed, then a new one
 * allocated and written page by page, as bench/hugebuf does), a quarter of the steps by
 * realloc when `resize`: the pages of freed buffers move between blocks, the page cache
 * and the arenas' free chunks, and each move may cut a mapping.  The process's mappings
 * stay within 200 of where they started (the bounds would allow more: four blocks of
 * LMAPS_MAX, the cache's LCACHE_MAX, ARENA_MAPS_MAX per arena; a replacement's pieces are
 * few); without the bounds they grew with the replacements, without end. */
static void replace_huge(int resize)
{
    char *buf[4] = { 0 };
    uint64_t x = 42;
    unsigned base = maps_lines(), most = 0;
    for (unsigned s = 0; s < 3000; s++) {
        uint64_t r = next(&x);
        unsigned i = s < 4 ? s : (unsigned)(r % 4);
        size_t n = 5 * MIB + (size_t)((r >> 8) % (20 * MIB));
        if (resize && buf[i] && (r >> 40) % 4 == 0) {
            buf[i] = hak_realloc(buf[i], n);
        } else {
            hak_free(buf[i]);
            buf[i] = hak_malloc(n);
        }
        ck_assert_ptr_nonnull(buf[i]);
        for (size_t off = 0; off < n; off += 4096)
            buf[i][off] = 1;
        if (s % 100 == 99) {
            unsigned now = maps_lines();
            most = now > most ? now : most;
            ck_assert_msg(now <= base + 200, "%u mappings after %u replacements, %u before", now, s + 1, base);
        }
    }
    for (unsigned i = 0; i < 4; i++)
        hak_free(buf[i]);
    ck_assert_uint_gt(most, base);
}

START_TEST(test_replacements_bounded)
{
    replace_huge(0);
}
END_TEST

START_TEST(test_replacements_with_realloc_bounded)
{
    replace_huge(1);
}
END_TEST

START_TEST(test_pieces_join_again)
{
    /* A range cut in two and put together again is still one mapping; pages moved in are a
     * mapping of their own, and past `max` nothing is placed. */
    struct lmaps m, head, tail, p;
    lmaps_fresh(&m, 10 * MIB);
    lmaps_split(&m, 4 * MIB, &head, &tail);
    ck_assert_uint_eq(lmaps_count(&head), 1);
    ck_assert_uint_eq(lmaps_count(&tail), 1);
    ck_assert_uint_eq(head.end[0], 4 * MIB);
    ck_assert_uint_eq(tail.end[0], 6 * MIB);
    ck_assert(lmaps_overlay(&head, 4 * MIB, &tail, LMAPS_MAX));
    ck_assert_uint_eq(lmaps_count(&head), 1);
    ck_assert_uint_eq(head.end[0], 10 * MIB);
    lmaps_fresh(&p, MIB);                       /* moved in over [2, 3) MiB: three pieces */
    ck_assert(lmaps_overlay(&head, 2 * MIB, &p, LMAPS_MAX));
    ck_assert_uint_eq(lmaps_count(&head), 3);
    ck_assert_uint_eq(lmaps_count_head(&head, 2 * MIB), 1);
    ck_assert_uint_eq(lmaps_count_head(&head, 2 * MIB + 1), 2);
    ck_assert(!lmaps_overlay(&head, 6 * MIB, &p, 4));   /* 5 > 4: refused, unchanged */
    ck_assert_uint_eq(lmaps_count(&head), 3);
    lmaps_moved(&tail);                         /* moved elsewhere: no longer one with head */
    lmaps_split(&head, 4 * MIB, &head, NULL);
    ck_assert(lmaps_overlay(&head, 4 * MIB, &tail, LMAPS_MAX));
    ck_assert_uint_eq(lmaps_count(&head), 4);
}
END_TEST

START_TEST(test_gathered_block_bounded)
{
    /* Every large block a mapping of its own (arena_max 0), a page cache big enough for all:
     * 80 free ranges of 512 KiB, none next to another.  A block of 40 MiB gathers their pages
     * but spans at most LMAPS_MAX mappings, the cache keeps at most LCACHE_MAX, and the
     * block grown and shrunk by realloc stays within LMAPS_MAX. */
    ck_assert_int_eq(policy_load_text("[large]\narena_max = 0\n[purge]\nlarge_cache = 256M\n"), 0);
    char *a[80], *keep[80];
    for (unsigned i = 0; i < 80; i++) {
        a[i] = hak_malloc(MIB / 2);
        keep[i] = hak_malloc(MIB / 2);
        memset(a[i], 1, MIB / 2);
    }
    for (unsigned i = 0; i < 80; i++)
        hak_free(a[i]);
    ck_assert_uint_le(large_cached_bytes(), (size_t)LCACHE_MAX * MIB / 2);
    char *b = hak_malloc(40 * MIB);
    ck_assert_ptr_nonnull(b);
    memset(b, 2, 40 * MIB);
    ck_assert_uint_le(maps_each((uintptr_t)b, (uintptr_t)b + 40 * MIB), LMAPS_MAX);
    ck_assert_uint_lt(large_cached_bytes(), (size_t)LCACHE_MAX * MIB / 2);  /* some pages moved */
    b = hak_realloc(b, 60 * MIB);
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(b[40 * MIB - 1], 2);
    ck_assert_uint_le(maps_each((uintptr_t)b, (uintptr_t)b + 60 * MIB), LMAPS_MAX);
    b = hak_realloc(b, 10 * MIB);
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(b[10 * MIB - 1], 2);
    ck_assert_uint_le(maps_each((uintptr_t)b, (uintptr_t)b + 10 * MIB), LMAPS_MAX);
    hak_free(b);
    for (unsigned i = 0; i < 80; i++)
        hak_free(keep[i]);
}
END_TEST

/* Pages of [p, p + len) the kernel holds (mincore). */
static size_t resident(const char *p, size_t len)
{
    static unsigned char v[(8 * MIB) / 4096];
    ck_assert_uint_le(len, 8 * MIB);
    ck_assert_int_eq(mincore((void *)p, len, v), 0);
    size_t n = 0;
    for (size_t k = 0; k < len / 4096; k++)
        n += v[k] & 1;
    return n;
}

/* How a heal goes: the kernel remaps the lent pages as part of the arena; refuses and keeps
 * them mapped (they are only purged); refuses after unmapping them (kernels before 6.12)
 * and maps them afresh; or after unmapping them cannot map them again. */
enum heal { HEALED, REFUSED, REFUSED_UNMAPPED, GONE };

/* A block of fresh arena chunks takes the page cache's resident pages (a mapping of its
 * own inside the arena's); freed and purged, the chunks become the arena's own mapping again.
 * When the kernel refuses that remap, they are only purged (or mapped afresh): they read as
 * zero and serve the next block.  When they are gone, no block is ever placed there. */
static void lent_pages_purged(enum heal how)
{
    ck_assert_int_eq(policy_load_text("[large]\narena_max = 8M\n[purge]\nretain = 0\ndelay = 0\n"
                                      "large_cache = 256M\n"), 0);
    char *h = hak_malloc(20 * MIB);
    ck_assert_ptr_nonnull(h);
    memset(h, 3, 20 * MIB);
    hak_free(h);
    size_t cached = large_cached_bytes();
    char *b = hak_malloc(4 * MIB);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(large_cached_bytes(), cached - 4 * MIB);     /* the pages were lent */
    ck_assert_uint_gt(maps_each((uintptr_t)b, (uintptr_t)b + 4 * MIB), 0);
    memset(b, 5, 4 * MIB);
    os_fail_heal_unmaps(how >= REFUSED_UNMAPPED);
    if (how == GONE)
        os_fail_after(0);               /* the mmap that would map them again fails too */
    else if (how != HEALED)
        os_fail_once_after(0);
    hak_free(b);
    os_fail_after(-1);
    os_fail_heal_unmaps(0);
    /* the block and the page after it: b may be its arena's first chunk, and whatever lies
     * below an arena is not its mapping */
    unsigned around = maps_each((uintptr_t)b, (uintptr_t)b + 4 * MIB + 4096);
    if (how == GONE) {
        /* a hole; blocks as big keep coming from the arenas, never from it */
        ck_assert_uint_eq(maps_each((uintptr_t)b, (uintptr_t)b + 4 * MIB), 0);
        char *c[8];
        for (unsigned k = 0; k < 8; k++) {
            c[k] = hak_calloc(1, 4 * MIB);
            ck_assert_ptr_nonnull(c[k]);
            ck_assert(c[k] + 4 * MIB <= b || c[k] >= b + 4 * MIB);
            memset(c[k], 7, 4 * MIB);
        }
        for (unsigned k = 0; k < 8; k++)
            hak_free(c[k]);
    } else {
        /* Healed: one with the arena's mapping after it; refused: apart (mapped afresh, the
         * kernel may join them or not) */
        ck_assert_uint_eq(resident(b, 4 * MIB), 0);
        if (how == HEALED)
            ck_assert_uint_eq(around, 1);
        else if (how == REFUSED)
            ck_assert_uint_gt(around, 1);
        else
            ck_assert_uint_gt(maps_each((uintptr_t)b, (uintptr_t)b + 4 * MIB), 0);
        char *c = hak_calloc(1, 4 * MIB);
        ck_assert_ptr_nonnull(c);
        for (size_t off = 0; off < 4 * MIB; off += 512)
            ck_assert_int_eq(c[off], 0);
        memset(c, 7, 4 * MIB);
        hak_free(c);
        ck_assert_uint_eq(resident(c, 4 * MIB), 0);
    }
    ck_assert_int_eq(policy_load_text(""), 0);
    large_trim(0);
}

START_TEST(test_lent_pages_healed)
{
    lent_pages_purged(HEALED);
}
END_TEST

START_TEST(test_lent_pages_heal_refused)
{
    lent_pages_purged(REFUSED);
}
END_TEST

START_TEST(test_lent_pages_heal_refused_unmapped)
{
    lent_pages_purged(REFUSED_UNMAPPED);
}
END_TEST

START_TEST(test_lent_pages_heal_gone)
{
    lent_pages_purged(GONE);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("maps");
    TCase *tc = tcase_create("maps");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_pieces_join_again);
    tcase_add_test(tc, test_gathered_block_bounded);
    tcase_add_test(tc, test_lent_pages_healed);
    tcase_add_test(tc, test_lent_pages_heal_refused);
    tcase_add_test(tc, test_lent_pages_heal_refused_unmapped);
    tcase_add_test(tc, test_lent_pages_heal_gone);
    tcase_add_test(tc, test_replacements_bounded);
    tcase_add_test(tc, test_replacements_with_realloc_bounded);
    suite_add_tcase(su, tc);
    return check_run(su);
}
