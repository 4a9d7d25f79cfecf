/* Unit tests of large blocks: alignment, usable size, the cache's bounds in count and
 * bytes, reuse from the cache, mremap growth, and memory going back to the OS. */
#include <check.h>
#include "check_run.h"
#include <stdlib.h>
#include "hakmem.h"
#include "testutil.h"
#include "cold/cold.h"
#include "region/map.h"

START_TEST(test_large_basic)
{
    for (size_t n = HAK_MID_MAX + 1; n < ((size_t)64 << 20); n = n * 3 + 17) {
        char *p = hak_malloc(n);
        ck_assert_ptr_nonnull(p);
        ck_assert_uint_eq((uintptr_t)p % 16, 0);
        ck_assert_uint_ge(hak_malloc_usable_size(p), n);
        p[0] = 1;
        p[n - 1] = 2;
        hak_free(p);
    }
}
END_TEST

START_TEST(test_cache_bounds)
{
    void *p[64];
    for (int i = 0; i < 64; i++)
        p[i] = hak_malloc((size_t)(300 + i * 7) << 10);
    for (int i = 0; i < 64; i++) {
        hak_free(p[i]);
        ck_assert_uint_le(large_cached_bytes(), policy_now()->large_cache_bytes);
    }
    ck_assert_uint_gt(large_cached_bytes(), 0);
    /* a block bigger than half the cache is never cached */
    size_t before = large_cached_bytes();
    void *huge = hak_malloc(policy_now()->large_cache_bytes);
    hak_free(huge);
    ck_assert_uint_le(large_cached_bytes(), before);
}
END_TEST

START_TEST(test_cache_reuse)
{
    void *a = hak_malloc(1 << 20);
    hak_free(a);
    void *b = hak_calloc(1, (1 << 20) - 100);   /* fits the cached mapping: reused, and zeroed */
    ck_assert_ptr_eq(a, b);
    for (size_t i = 0; i < (1 << 20) - 100; i += 4096)
        ck_assert_uint_eq(((unsigned char *)b)[i], 0);
    hak_free(b);
}
END_TEST

START_TEST(test_large_aligned)
{
    for (size_t al = 4096; al <= ((size_t)4 << 20); al <<= 1) {
        void *p = NULL;
        ck_assert_int_eq(hak_posix_memalign(&p, al, 600 << 10), 0);
        ck_assert_uint_eq((uintptr_t)p % al, 0);
        ck_assert_uint_ge(hak_malloc_usable_size(p), 600 << 10);
        memset(p, 7, 600 << 10);
        hak_free(p);
    }
}
END_TEST

START_TEST(test_large_realloc_remap)
{
    size_t n = 2 << 20;
    unsigned char *p = hak_malloc(n);
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 31);
    p = hak_realloc(p, 64 << 20);
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < n; i++)
        ck_assert_uint_eq(p[i], (unsigned char)(i * 31));
    p = hak_realloc(p, 1 << 20);
    for (size_t i = 0; i < (1 << 20); i++)
        ck_assert_uint_eq(p[i], (unsigned char)(i * 31));
    hak_free(p);
}
END_TEST

START_TEST(test_memory_returns)
{
    /* 1 GiB of 64 KiB - 1 MiB blocks, written, then freed: RSS falls back near the start. */
    enum { N = 2048 };
    static void *blk[N];
    size_t start = rss_bytes(), total = 0;
    unsigned i = 0;
    uint64_t x = 88172645463325252ull;
    for (; total < ((size_t)1 << 30) && i < N; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t n = (64 << 10) + x % (960 << 10);
        blk[i] = hak_malloc(n);
        ck_assert_ptr_nonnull(blk[i]);
        memset(blk[i], 0x5A, n);
        total += n;
    }
    size_t peak = rss_bytes();
    ck_assert_uint_gt(peak, start + ((size_t)900 << 20));
    while (i)
        hak_free(blk[--i]);
    size_t end = rss_bytes();
    /* what stays is bounded by the two retention caps of the policy, plus slack */
    size_t keep = policy_now()->purge_cap + policy_now()->large_cache_bytes + ((size_t)24 << 20);
    ck_assert_msg(end < start + keep, "RSS start %zu MiB, peak %zu MiB, after free %zu MiB (bound +%zu MiB)",
                  start >> 20, peak >> 20, end >> 20, keep >> 20);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("large");
    TCase *tc = tcase_create("large");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_large_basic);
    tcase_add_test(tc, test_cache_bounds);
    tcase_add_test(tc, test_cache_reuse);
    tcase_add_test(tc, test_large_aligned);
    tcase_add_test(tc, test_large_realloc_remap);
    tcase_add_test(tc, test_memory_returns);
    suite_add_tcase(su, tc);
    return check_run(su);
}
