/* The usable-size contract on every allocation path: every byte malloc_usable_size reports
 * is writable, lies inside one mapping, disturbs no neighbour, and survives a realloc. */
#define _GNU_SOURCE
#include <check.h>
#include "check_run.h"
#include "config.h"
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

/* The end of the mapped range of /proc/self/maps that holds p, 0 if none does: the kernel
 * splits one mapping where part of it was advised differently (huge pages), so adjacent
 * entries count as one. */
static uintptr_t mapping_end(const void *p)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    uintptr_t lo, hi, end = 0;
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "%lx-%lx", &lo, &hi) != 2)
            continue;
        if (end == 0 && (uintptr_t)p >= lo && (uintptr_t)p < hi)
            end = hi;
        else if (end != 0 && lo == end)
            end = hi;
        else if (end != 0)
            break;
    }
    fclose(f);
    return end;
}

static unsigned char pat(const void *p, size_t i)
{
    return (unsigned char)(((uintptr_t)p >> 4) + i * 7u + (i >> 8));
}

static void fill(unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = pat(p, i);
}

static int intact(const unsigned char *p, size_t n, const void *seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != pat(seed, i))
            return 0;
    return 1;
}

enum path { P_MALLOC, P_CALLOC, P_REALLOC, P_POSIX_MEMALIGN, P_ALIGNED_ALLOC, P_MEMALIGN, P_VALLOC,
            P_PVALLOC, P_COUNT };
static const char *const path_name[P_COUNT] = { "malloc", "calloc", "realloc", "posix_memalign",
                                                "aligned_alloc", "memalign", "valloc", "pvalloc" };

/* A block of n bytes by path, aligned to `align` where the path takes one; NULL if the path
 * refuses the pair (aligned_alloc: a size not a multiple of the alignment). */
static void *get(enum path k, size_t n, size_t align)
{
    void *p = NULL;
    switch (k) {
    case P_MALLOC:        return malloc(n);
    case P_CALLOC:        return calloc(1, n);
    case P_REALLOC:       return realloc(malloc(n / 2 + 1), n);
    case P_POSIX_MEMALIGN: return posix_memalign(&p, align, n) == 0 ? p : NULL;
    case P_ALIGNED_ALLOC: return n % align ? NULL : aligned_alloc(align, n);
    case P_MEMALIGN:      return memalign(align, n);
    case P_VALLOC:        return valloc(n);
    case P_PVALLOC:       return pvalloc(n);
    default:              return NULL;
    }
}

/* The alignment promised: the one asked for, a page for valloc, and 16 bytes for requests
 * of 16 bytes or more (8 below: the smallest class is 8 bytes). */
static size_t align_of(enum path k, size_t n, size_t align)
{
    long page = sysconf(_SC_PAGESIZE);
    if (k == P_VALLOC || k == P_PVALLOC)
        return (size_t)page;
    size_t base = n >= 16 ? 16 : 8;
    if (k == P_POSIX_MEMALIGN || k == P_ALIGNED_ALLOC || k == P_MEMALIGN)
        return align > base ? align : base;
    return base;
}

/* One block between two neighbours of the same path: p's whole usable size written, the
 * neighbours read back, p + usable inside p's mapping, then p grown and shrunk by realloc
 * with its bytes kept. */
static void check_one(enum path k, size_t n, size_t align)
{
    void *left = get(k, n, align), *p = get(k, n, align), *right = get(k, n, align);
    if (p == NULL) {
        ck_assert_msg(k == P_ALIGNED_ALLOC, "%s(%zu, align %zu) failed", path_name[k], n, align);
        free(left);
        free(right);
        return;
    }
    ck_assert_ptr_nonnull(left);
    ck_assert_ptr_nonnull(right);
    size_t ul = malloc_usable_size(left), ur = malloc_usable_size(right), u = malloc_usable_size(p);
    size_t want = k == P_PVALLOC ? (n + 4095) & ~(size_t)4095 : n;
    ck_assert_msg(u >= want, "%s(%zu, align %zu): usable %zu", path_name[k], n, align, u);
    ck_assert_msg((uintptr_t)p % align_of(k, n, align) == 0, "%s(%zu, align %zu) = %p", path_name[k], n, align, p);
    /* Not overstated: the block does not run past its mapping, nor past the request by more
     * than the alignment's padding and rounding (a size class, a span's granules, pages). */
    uintptr_t end = mapping_end(p);
    ck_assert_msg(end != 0 && (uintptr_t)p + u <= end, "%s(%zu, align %zu): %p + %zu runs past its mapping (%#lx)",
                  path_name[k], n, align, p, u, (unsigned long)end);
    ck_assert_msg(u <= want + align_of(k, n, align) + 64 * KiB + (want >= MiB ? want / 8 : 0),
                  "%s(%zu, align %zu): usable %zu overstates the block", path_name[k], n, align, u);
    fill(left, ul);
    fill(right, ur);
    if (k == P_CALLOC)
        for (size_t i = 0; i < n; i++)
            ck_assert_msg(((unsigned char *)p)[i] == 0, "calloc(%zu): byte %zu not zero", n, i);
    fill(p, u);
    ck_assert_msg(intact(left, ul, left) && intact(right, ur, right),
                  "%s(%zu, align %zu): writing its %zu usable bytes changed a neighbour", path_name[k], n, align, u);
    ck_assert(intact(p, u, p));
    void *q = realloc(p, 2 * u + 1);
    ck_assert_ptr_nonnull(q);
    ck_assert_msg(intact(q, u, p), "%s(%zu, align %zu): realloc lost the bytes", path_name[k], n, align);
    void *r = realloc(q, u / 2 + 1);
    ck_assert_ptr_nonnull(r);
    ck_assert(intact(r, u / 2 + 1, p));
    free(r);
    free(left);
    free(right);
}

/* Both sides of each route's limits: tiny (1 KiB), mid (256 KiB), the large cache's
 * arenas (8 MiB), and a few sizes between. */
static const size_t sizes[] = { 1, 8, 15, 16, 17, 48, 100, 1023, 1024, 1025, 4095, 4096, 4097, 65536,
                                65537, 262143, 262144, 262145, 614400, MiB, 3 * MiB + 5,
                                8 * MiB - 1, 8 * MiB + 1 };

START_TEST(test_usable_every_path)
{
    enum path k = (enum path)_i;
    for (size_t align = 8; align <= 4 * MiB; align *= 2)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            if (k < P_POSIX_MEMALIGN && align > 8)
                break;                      /* these take no alignment: one pass */
            if ((k == P_VALLOC || k == P_PVALLOC) && align > 8)
                break;
            if (k == P_POSIX_MEMALIGN && align < sizeof(void *))
                continue;
            check_one(k, sizes[s], align);
        }
}
END_TEST

int main(void)
{
    Suite *su = suite_create("usable");
    TCase *tc = tcase_create("usable");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_usable_every_path, 0, P_COUNT);
    suite_add_tcase(su, tc);
    return check_run(su);
}
