/* OBSERVE counters add up on a known sequence of allocations: per class, in slots and
 * lists, for large blocks, for remote frees, and across threads that have exited. */
#include <check.h>
#include "check_run.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "hakmem.h"
#include "testutil.h"
#include "cold/cold.h"
#include "route/route.h"

static struct hak_stats before, after;

static void snap(struct hak_stats *s)
{
    ck_assert_int_eq(hak_stats_get(s), 0);
}

#define DELTA(field, c) (after.cls[c].field - before.cls[c].field)

static void *slots_sequence(void *arg)
{
    (void)arg;
    void *p[1000];
    for (int i = 0; i < 1000; i++)
        p[i] = hak_malloc(200);
    for (int i = 0; i < 1000; i++)
        hak_free(p[i]);
    for (int i = 0; i < 500; i++)
        hak_free(hak_malloc(220));      /* the same class as 200 (224 B) */
    return NULL;
}

START_TEST(test_slots_class_counts)
{
    unsigned c = class_of_size(200);
    snap(&before);
    pthread_t t;
    pthread_create(&t, NULL, slots_sequence, NULL);
    pthread_join(t, NULL);              /* the thread's counters survive its exit */
    snap(&after);
    ck_assert_uint_eq(DELTA(allocs, c), 1500);
    ck_assert_uint_eq(DELTA(frees, c), 1500);
    /* every allocation is a slot hit or the miss that refilled */
    ck_assert_uint_eq(DELTA(slot_hits, c) + DELTA(refills, c), 1500);
    ck_assert_uint_ge(DELTA(refills, c), 1000 / 32);
    /* 1000 frees into 64 slots, some left from the last refill: every free that finds
     * them full goes to its region */
    ck_assert_uint_ge(DELTA(overflows, c), 1000 - 64);
    ck_assert_uint_le(DELTA(overflows, c), 1000 - 64 + 32);
    ck_assert_uint_eq(DELTA(remote_frees, c), 0);
}
END_TEST

START_TEST(test_list_and_mid_counts)
{
    unsigned tiny = class_of_size(40), mid = class_of_size(3000);
    ck_assert_int_eq(policy_load_text("[route]\nC3 = tlist\n"), 0);   /* slots by default */
    snap(&before);
    void *p[300];
    for (int i = 0; i < 300; i++)
        p[i] = hak_malloc(i % 2 ? 40 : 3000);
    for (int i = 0; i < 300; i++)
        hak_free(p[i]);
    snap(&after);
    ck_assert_uint_eq(DELTA(allocs, tiny), 150);
    ck_assert_uint_eq(DELTA(frees, tiny), 150);
    ck_assert_uint_eq(DELTA(allocs, mid), 150);
    ck_assert_uint_eq(DELTA(frees, mid), 150);
    ck_assert_uint_eq(DELTA(slot_hits, tiny), 0);      /* a list class, not slots */
    ck_assert_int_eq(policy_load_text(""), 0);
}
END_TEST

START_TEST(test_large_counts)
{
    snap(&before);
    for (int i = 0; i < 10; i++)
        hak_free(hak_malloc((size_t)(1 + i) << 20));
    snap(&after);
    ck_assert_uint_eq(DELTA(allocs, HAK_NCLASSES), 10);
    ck_assert_uint_eq(DELTA(frees, HAK_NCLASSES), 10);
}
END_TEST

static void *alloc_many(void *arg)
{
    void **p = arg;
    for (int i = 0; i < 100; i++)
        p[i] = hak_malloc(100);
    return NULL;
}

START_TEST(test_remote_counts)
{
    unsigned c = class_of_size(100);
    void *p[100];
    snap(&before);
    pthread_t t;
    pthread_create(&t, NULL, alloc_many, p);
    pthread_join(t, NULL);
    for (int i = 0; i < 100; i++)
        hak_free(p[i]);                 /* the owner has exited: all remote */
    snap(&after);
    ck_assert_uint_eq(DELTA(allocs, c), 100);
    ck_assert_uint_eq(DELTA(remote_frees, c), 100);
    ck_assert_uint_eq(DELTA(frees, c), 100);
}
END_TEST

START_TEST(test_bytes_live_and_peak)
{
    snap(&before);
    void *p[4096];
    for (int i = 0; i < 4096; i++)
        p[i] = hak_malloc(1024);
    hak_free(hak_malloc(1 << 20));      /* a cold-path entry samples the peak */
    for (int i = 0; i < 4096; i++)
        hak_free(p[i]);
    hak_free(hak_malloc(1 << 20));
    snap(&after);
    ck_assert_uint_ge(after.bytes_peak, before.bytes_live + (4u << 20) - (64u << 10));
    ck_assert_uint_le(after.bytes_live, before.bytes_live + (256u << 10));
    ck_assert_uint_ge(after.regions_mapped, 1);
}
END_TEST

START_TEST(test_report_prints)
{
    struct capture cap;
    char out[8192];
    hak_free(hak_malloc(64));           /* C4 */
    stderr_capture_begin(&cap);
    hak_stats_print();
    stderr_capture_end(&cap, out, sizeof out);
    ck_assert_ptr_nonnull(strstr(out, "hakmem OBSERVE"));
    ck_assert_ptr_nonnull(strstr(out, "overflow rate"));
    ck_assert_ptr_nonnull(strstr(out, "PUSH TOTAL"));
    ck_assert_ptr_nonnull(strstr(out, "\nC4 "));
}
END_TEST

int main(void)
{
    Suite *su = suite_create("observe");
    TCase *tc = tcase_create("observe");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_slots_class_counts);
    tcase_add_test(tc, test_list_and_mid_counts);
    tcase_add_test(tc, test_large_counts);
    tcase_add_test(tc, test_remote_counts);
    tcase_add_test(tc, test_bytes_live_and_peak);
    tcase_add_test(tc, test_report_prints);
    suite_add_tcase(su, tc);
    return check_run(su);
}
