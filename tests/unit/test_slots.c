/* Unit tests of the per-thread caches: inline slots push/pop LIFO, a free into full slots
 * goes straight back to its region, an empty cache refills (a few blocks at first, then
 * half its capacity); lists spill half when full. */
#include <check.h>
#include "check_run.h"
#include <stdlib.h>
#include <string.h>
#include "hakmem.h"
#include "testutil.h"
#include "cold/cold.h"
#include "route/route.h"

static struct heap *heap_now(void)
{
    hak_free(hak_malloc(1));        /* make sure this thread has its heap */
    return heap_tls;
}

START_TEST(test_slots_lifo)
{
    struct heap *h = heap_now();
    ck_assert_ptr_ne(h, &heap_empty);
    void *a = hak_malloc(200);      /* C11 (224 B): inline slots by default */
    unsigned c = class_of_size(200);
    ck_assert_uint_eq(h->snap.route[c], ROUTE_SLOTS);
    ck_assert_uint_eq(slots_cap(h, c), 64);
    uint32_t before = slots_count(h, c);
    hak_free(a);
    ck_assert_uint_eq(slots_count(h, c), before + 1);
    ck_assert_ptr_eq(h->slot_items[c][before + 1], a);     /* item 0 is the sentinel */
    ck_assert_ptr_eq(h->slot_items[c][0], NULL);
    void *b = hak_malloc(224);      /* same class: the slot just pushed pops first */
    ck_assert_ptr_eq(a, b);
    ck_assert_uint_eq(slots_count(h, c), before);
    hak_free(b);
}
END_TEST

START_TEST(test_slots_refill_slow_start)
{
    /* A heap's first refill of a class takes REFILL_START blocks, each next one twice as
     * many, up to half the cache, which every refill after takes. */
    struct heap *h = heap_now();
    unsigned c = class_of_size(100);
    unsigned cap = slots_cap(h, c);
    void *keep[1024];
    unsigned n = 0, want = REFILL_START;
    ck_assert_uint_eq(slots_count(h, c), 0);
    for (int refill = 0; refill < 6; refill++) {
        while (slots_count(h, c))               /* drain the cache */
            keep[n++] = hak_malloc(100);
        keep[n++] = hak_malloc(100);            /* miss: refill, hand one out */
        ck_assert_ptr_nonnull(keep[n - 1]);
        ck_assert_uint_eq(slots_count(h, c), want - 1);
        want = 2 * want < cap / 2 ? 2 * want : cap / 2;
    }
    ck_assert_uint_eq(want, cap / 2);
    /* refilled blocks pop in address order within a fresh region */
    void *p = hak_malloc(100), *q = hak_malloc(100);
    ck_assert_ptr_eq(q, (char *)p + class_size(c));
    hak_free(q);
    hak_free(p);
    while (n)
        hak_free(keep[--n]);
}
END_TEST

START_TEST(test_slots_overflow_to_region)
{
    struct heap *h = heap_now();
    unsigned c = class_of_size(128);
    unsigned cap = slots_cap(h, c);
    void *blk[2 * HAK_SLOTS_CAP_MAX + 2];
    unsigned n = 2 * cap + 1;
    for (unsigned i = 0; i < n; i++)
        blk[i] = hak_malloc(128);
    while (slots_count(h, c))                   /* start from an empty cache */
        blk[n++] = hak_malloc(128);
    for (unsigned i = 0; i < cap; i++)
        hak_free(blk[i]);
    ck_assert_uint_eq(slots_count(h, c), cap);
    struct region *r = region_of_tiny(blk[cap]);
    uint32_t used = r->used, nhome = r->nhome;
    hak_free(blk[cap]);              /* full: the block goes back to its region */
    ck_assert_uint_eq(slots_count(h, c), cap);
    ck_assert_ptr_eq(*h->slot_top[SLOT_INDEX(c)], blk[cap - 1]);
    ck_assert_uint_eq(*region_tag(r, (uintptr_t)blk[cap]), TAG_HOME);
    ck_assert_uint_eq(r->nhome, nhome + 1);
    ck_assert_uint_eq(r->used, used - 1);
    for (unsigned i = cap + 1; i < n; i++)
        hak_free(blk[i]);
    ck_assert_uint_eq(slots_count(h, c), cap);
    void *q = hak_malloc(128);       /* the cache still pops first: the last block it took */
    ck_assert_ptr_eq(q, blk[cap - 1]);
    hak_free(q);
}
END_TEST

/* Bursts of `width` blocks of `size`, each allocated and then freed in order, `rounds` times;
 * the slots' capacity after each round is checked against `most` and returned. */
static unsigned bursts(struct heap *h, size_t size, unsigned width, unsigned rounds, unsigned most)
{
    static void *blk[3000];
    unsigned c = class_of_size(size);
    ck_assert_uint_le(width, 3000);
    for (unsigned r = 0; r < rounds; r++) {
        for (unsigned i = 0; i < width; i++) {
            blk[i] = hak_malloc(size);
            ck_assert_ptr_nonnull(blk[i]);
            memset(blk[i], (int)i, size);
        }
        for (unsigned i = 0; i < width; i++)
            hak_free(blk[i]);
        ck_assert_uint_le(slots_cap(h, c), most);
        ck_assert_uint_le(slots_count(h, c), slots_cap(h, c));
    }
    return slots_cap(h, c);
}

START_TEST(test_slots_grow)
{
    /* Phase 102: slots that overflowed and then ran empty double, up to SLOTS_GROW_MAX
     * blocks and SLOTS_GROW_BYTES, and a burst that fits then stays in them whole: no block
     * goes home, none is taken back.  With the phase off (unit-slots-phase102-off) the
     * capacity stays [slots] capacity. */
    struct heap *h = heap_now();
    char v[8], src[64];
    ck_assert_int_eq(hak_policy_get("phases.phase102", v, sizeof v, src, sizeof src), 0);
    int on = HAK_PHASE102 && strcmp(v, "on") == 0;
    unsigned c = class_of_size(32), cap0 = slots_cap(h, c);
    unsigned most = SLOTS_GROW_BYTES / class_size(c) < SLOTS_GROW_MAX ? SLOTS_GROW_BYTES / class_size(c) : SLOTS_GROW_MAX;
    ck_assert_uint_eq(bursts(h, 32, 3000, 12, on ? most : cap0), on ? most : cap0);
    ck_assert_uint_eq(slots_count(h, c), on ? most : cap0);     /* full after the frees */
    /* grown: a burst narrower than the slots is served and taken back by them alone */
    struct region *r = region_of_tiny(h->slot_top[SLOT_INDEX(c)][0]);
    uint32_t nhome = r->nhome;
    bursts(h, 32, on ? most / 2 : cap0, 3, on ? most : cap0);
    ck_assert_uint_eq(slots_count(h, c), on ? most : cap0);
    if (on)
        ck_assert_uint_eq(r->nhome, nhome);
    /* the bound by bytes: 1 KiB blocks grow to 128 */
    c = class_of_size(1024);
    cap0 = slots_cap(h, c);
    most = SLOTS_GROW_BYTES / class_size(c);
    ck_assert_uint_eq(bursts(h, 1024, 300, 6, on ? most : cap0), on ? most : cap0);
    /* and by the heap: bursts in four classes more, all grown together hold no more than
     * SLOTS_GROW_HEAP */
    static const size_t more[] = { 64, 128, 256, 512 };
    for (unsigned k = 0; k < 4; k++)
        bursts(h, more[k], 3000, 12, SLOTS_GROW_MAX);
    size_t held = 0;
    for (unsigned k = 0; k < HAK_NTINY; k++)
        held += slots_cap(h, k) > cap0 ? (size_t)slots_cap(h, k) * class_size(k) : 0;
    ck_assert_uint_le(held, SLOTS_GROW_HEAP);
    if (on)
        ck_assert_uint_ge(held, SLOTS_GROW_HEAP / 2);
}
END_TEST

START_TEST(test_list_route_bounded)
{
    ck_assert_int_eq(policy_load_text("[route]\nC2 = tlist\n"), 0);   /* slots by default */
    struct heap *h = heap_now();
    unsigned c = class_of_size(24);     /* C2 */
    ck_assert_uint_eq(h->snap.route[c], ROUTE_TLIST);
    ck_assert_uint_eq(slots_cap(h, c), 0);
    struct list_bin *l = &h->lists[c];
    unsigned n = 3 * l->max;
    void **blk = calloc(n, sizeof *blk);
    for (unsigned i = 0; i < n; i++) {
        blk[i] = hak_malloc(24);
        ck_assert_ptr_nonnull(blk[i]);
        memset(blk[i], 0xAB, 24);
    }
    for (unsigned i = 0; i < n; i++) {
        hak_free(blk[i]);
        ck_assert_uint_le(l->count, l->max);
    }
    ck_assert_uint_gt(l->count, 0);
    void *p = hak_malloc(20);            /* pops the most recently freed */
    ck_assert_ptr_eq(p, blk[n - 1]);
    hak_free(p);
    free(blk);
    ck_assert_int_eq(policy_load_text(""), 0);   /* back to the defaults */
}
END_TEST

START_TEST(test_mid_route_list)
{
    struct heap *h = heap_now();
    unsigned c = class_of_size(3000);
    ck_assert_uint_eq(h->snap.route[c], ROUTE_MID);
    void *a = hak_malloc(3000);
    ck_assert_uint_eq(hak_malloc_usable_size(a), class_table[c].size);
    /* mid classes keep no thread cache: the block goes straight back to its region,
     * whose free list hands it out again first */
    hak_free(a);
    ck_assert_uint_eq(h->lists[c].count, 0);
    ck_assert_ptr_eq(hak_malloc(2900), a);
    hak_free(a);
}
END_TEST

START_TEST(test_flush_returns_everything)
{
    struct heap *h = heap_now();
    void *blk[3000];
    for (unsigned i = 0; i < 3000; i++)
        blk[i] = hak_malloc(16 + (i * 37) % 2000);
    for (unsigned i = 0; i < 3000; i++)
        hak_free(blk[i]);
    heap_flush(h);
    for (unsigned c = 0; c < HAK_NCLASSES; c++) {
        ck_assert_uint_eq(h->lists[c].count, 0);
        if (c < HAK_NTINY)
            ck_assert_uint_eq(slots_count(h, c), 0);
        /* every block is home, so only the current region stays with the heap */
        struct class_regions *cr = &h->regions[c];
        if (cr->list) {
            ck_assert_ptr_eq(cr->list, cr->cur);
            ck_assert_ptr_eq(cr->list->next, cr->list);
            ck_assert_uint_eq(cr->cur->used, 0);
        }
    }
}
END_TEST

int main(void)
{
    Suite *su = suite_create("slots");
    TCase *tc = tcase_create("slots");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_slots_lifo);
    tcase_add_test(tc, test_slots_refill_slow_start);
    tcase_add_test(tc, test_slots_overflow_to_region);
    tcase_add_test(tc, test_slots_grow);
    tcase_add_test(tc, test_list_route_bounded);
    tcase_add_test(tc, test_mid_route_list);
    tcase_add_test(tc, test_flush_returns_everything);
    suite_add_tcase(su, tc);
    return check_run(su);
}
