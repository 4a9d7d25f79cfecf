/* The pieces of a huge block or free range, one kernel mapping each (large_maps.h). */
#include <check.h>
#include "check_run.h"
#include "large/large_maps.h"

#define MIB ((size_t)1 << 20)

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

int main(void)
{
    Suite *su = suite_create("maps");
    TCase *tc = tcase_create("maps");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_pieces_join_again);
    suite_add_tcase(su, tc);
    return check_run(su);
}
