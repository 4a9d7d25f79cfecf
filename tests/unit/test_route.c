/* Unit tests of the class table and the router: every size 0..1 MiB maps to the
 * smallest class that fits, with the default route, with and without Phase 91. */
#include <check.h>
#include "check_run.h"
#include <stdlib.h>
#include "cold/cold.h"
#include "route/route.h"

static void setup(void)
{
    init_core();
}

START_TEST(test_class_table_shape)
{
    /* 8, 16, 32, then steps of 16 to 64 and four steps per doubling to 1 KiB */
    static const unsigned tiny[HAK_NTINY] = { 8, 16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224,
                                              256, 320, 384, 448, 512, 640, 768, 896, 1024 };
    for (unsigned c = 0; c < HAK_NTINY; c++) {
        ck_assert_uint_eq(class_table[c].size, tiny[c]);
        /* the granule: the largest power of two dividing the size */
        ck_assert_uint_eq(1u << class_table[c].gshift, tiny[c] & (0u - tiny[c]));
        /* the hot paths use a tiny class's live tag as its tag shift (Phase 91, 93):
         * 32-bit shifts read its low five bits */
        ck_assert_uint_eq(TAG_LIVE(c) & 31, class_table[c].gshift);
    }
    /* every class and the invalid class its own slot index, and the way back */
    for (unsigned c = 0; c <= HAK_NCLASSES; c++) {
        ck_assert_uint_lt(SLOT_INDEX(c), SLOT_NINDEX);
        ck_assert_uint_eq(SLOT_CLASS(SLOT_INDEX(c)), c);
        ck_assert_uint_eq(TAG_CLASS(TAG_LIVE(c)), c);
        for (unsigned d = 0; d < c; d++)
            ck_assert_uint_ne(SLOT_INDEX(c), SLOT_INDEX(d));
    }
    /* the tags: live 0x80 + index, unique per class (above); the free tag is none of them,
     * and neither is 0, the tag of no block */
    ck_assert_uint_ne(TAG_FREE, 0);
    for (unsigned c = 0; c <= HAK_NCLASSES; c++) {
        /* one byte in Phase 91's table, Phase 93's cache and the tags */
        ck_assert_uint_le(TAG_LIVE(c), 0xFFu);
        ck_assert_uint_eq(TAG_CLASS((uint8_t)TAG_LIVE(c)), c);
        ck_assert_uint_ne(TAG_LIVE(c), TAG_FREE);
    }
    for (unsigned c = 1; c < HAK_NCLASSES; c++)
        ck_assert_uint_gt(class_table[c].size, class_table[c - 1].size);
    ck_assert_uint_eq(class_table[HAK_NCLASSES - 1].size, HAK_MID_MAX);
    for (unsigned c = 0; c < HAK_NCLASSES; c++) {
        const struct size_class *rc = &class_table[c];
        size_t rsize = (size_t)rc->chunks << HAK_CHUNK_SHIFT;
        ck_assert_uint_ge(rc->nblocks, 4);
        ck_assert_uint_le(rc->blocks_off + (size_t)rc->nblocks * rc->size, rsize);
        ck_assert_uint_eq(rc->blocks_off % (1u << rc->gshift), 0);
        ck_assert_uint_eq(rc->size % (1u << rc->gshift), 0);
        /* the tag check's constant bound: granule starts index below it, others above */
        ck_assert_uint_le(rc->gshift, 15);
        ck_assert_uint_le(rsize >> rc->gshift, REGION_TAG_IDX_MAX);
        if (rc->size >= 16)
            ck_assert_uint_eq(rc->blocks_off % 16, 0);
    }
}
END_TEST

START_TEST(test_every_size_smallest_class)
{
    /* plain checks in the loop: a ck_assert per size would dominate the run time */
    for (size_t n = 0; n <= HAK_MID_MAX; n++) {
        unsigned c = class_of_size(n);
        if (c >= HAK_NCLASSES || class_table[c].size < n || (c > 0 && class_table[c - 1].size >= n)
            || class_table[c].tiny != (n <= HAK_TINY_MAX))
            ck_abort_msg("size %zu maps to class %u", n, c);
    }
}
END_TEST

static void check_default_routes(const struct policy_snapshot *s)
{
    for (size_t n = 0; n <= ((size_t)1 << 20); n++) {
        unsigned cls;
        unsigned r = route_lookup(s, n, &cls);
        unsigned want_cls = n > HAK_MID_MAX ? HAK_NCLASSES : class_of_size(n);
        /* default [slots] classes C0-C20: every size up to 1 KiB */
        unsigned want = n > HAK_MID_MAX ? ROUTE_LARGE : n <= HAK_TINY_MAX ? ROUTE_SLOTS : ROUTE_MID;
        if (cls != want_cls || r != want)
            ck_abort_msg("size %zu: class %u route %u, expected class %u route %u", n, cls, r, want_cls, want);
    }
}

START_TEST(test_routes_arithmetic)
{
    struct policy_snapshot s;
    policy_snapshot_build(&s);
    s.phase91 = 0;
    check_default_routes(&s);
}
END_TEST

START_TEST(test_routes_phase91_table)
{
#if HAK_PHASE91
    struct policy_snapshot s;
    policy_snapshot_build(&s);
    ck_assert_uint_eq(s.phase91, 1);
    check_default_routes(&s);
    /* an entry a publisher invalidated (heap_invalidate_all) routes nowhere */
    s.table91[100] = (uint8_t)TAG_LIVE(SLOT_CLASS_NONE);
    unsigned cls;
    ck_assert_uint_eq(route_lookup(&s, 100, &cls), ROUTE_NONE);
    ck_assert_uint_eq(cls, SLOT_CLASS_NONE);
#else
    /* compiled out: whatever the policy says, the snapshot never uses the table, and the
     * routes the arithmetic gives are the right ones */
    struct policy p = *policy_now();
    p.phase91 = 1;
    policy_install_initial(&p);
    struct policy_snapshot s;
    policy_snapshot_build(&s);
    ck_assert_uint_eq(s.phase91, 0);
    ck_assert_uint_eq(s.table91_max, 0);
    check_default_routes(&s);
#endif
}
END_TEST

START_TEST(test_slots_never_route_mid_classes)
{
    struct policy p = *policy_now();
    for (unsigned c = 0; c < HAK_NCLASSES; c++)
        p.route[c] = ROUTE_SLOTS;
    policy_install_initial(&p);
    struct policy_snapshot s;
    policy_snapshot_build(&s);
    for (unsigned c = HAK_NTINY; c < HAK_NCLASSES; c++)
        ck_assert_uint_ne(s.route[c], ROUTE_SLOTS);
    for (unsigned c = 0; c < HAK_NTINY; c++)
        ck_assert_uint_eq(s.route[c], ROUTE_SLOTS);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("route");
    TCase *tc = tcase_create("route");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_class_table_shape);
    tcase_add_test(tc, test_every_size_smallest_class);
    tcase_add_test(tc, test_routes_arithmetic);
    tcase_add_test(tc, test_routes_phase91_table);
    tcase_add_test(tc, test_slots_never_route_mid_classes);
    suite_add_tcase(su, tc);
    return check_run(su);
}
