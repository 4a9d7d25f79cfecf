/* The hot paths of malloc and free: policy snapshot -> route -> slots or list -> (miss) cold.
 * No locks, no calls on a hit; everything rare is one out-of-line call into src/cold. */
#ifndef HAK_API_HOT_H
#define HAK_API_HOT_H

#include "../cold/cold.h"
#include "../region/map.h"
#include "../route/route.h"

void *api_malloc_mid(struct heap *h, size_t n);

/* Phase 90 compiled in: the tag write is forced inline, or with the phase off at run
 * time an out-of-line call (the A/B pair).  Compiled out: the compiler decides. */
HAK_INLINE void hot_tag_live(struct heap *h, struct region *r, void *p, unsigned cls)
{
#if HAK_PHASE90
    if (likely(h->snap.phase90))
        region_tag_set_live(r, p, cls);
    else
        region_tag_set_live_call(r, p, cls);
#else
    (void)h;
    region_tag_set_live(r, p, cls);
#endif
}

HAK_INLINE void *hot_malloc(size_t n)
{
    struct heap *h = heap_tls;
    if (likely(n <= HAK_TINY_MAX)) {
        unsigned cls, route = route_lookup_tiny(&h->snap, n, &cls);
        if (likely(route == ROUTE_SLOTS)) {
            struct slots_bin *s = &h->slots[cls];
            if (likely(s->count != 0)) {
                void *p = s->items[--s->count];
                hot_tag_live(h, region_of_tiny(p), p, cls);
                OBS_INC(h, allocs, cls);
                OBS_INC(h, slot_hits, cls);
                return p;
            }
        } else if (route >= ROUTE_TLIST) {
            struct list_bin *l = &h->lists[cls];
            void *p = l->head;
            if (likely(p != NULL)) {
                struct region *r = region_of_tiny(p);
                l->head = region_link_decode(r, p, *(void **)p);
                l->count--;
                hot_tag_live(h, r, p, cls);
                OBS_INC(h, allocs, cls);
                return p;
            }
        }
        return cold_malloc(h, n);
    }
    if (n <= HAK_MID_MAX)
        return api_malloc_mid(h, n);
    return cold_malloc(h, n);
}

HAK_INLINE void hot_free(void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    unsigned b = region_map_get(p);
    struct heap *h = heap_tls;
    if (unlikely(b - 1u >= 0xFEu)) {          /* not a region: NULL, large or foreign */
        cold_free_nonregion(h, ptr, b, "free");
        return;
    }
    struct region *r = region_from_map(p, b);
    uint8_t *tag;
    if (unlikely(!region_tag_check_live(r, p, &tag)
                 || atomic_load_explicit(&r->owner, memory_order_relaxed) != h)) {
        cold_free_region(h, ptr, r);           /* misuse, or a block of another thread */
        return;
    }
    unsigned cls = r->cls;
    unsigned route = route_of_class(&h->snap, cls);
    *tag = (uint8_t)TAG_FREE(cls);
    OBS_INC(h, frees, cls);
    if (likely(route == ROUTE_SLOTS)) {
        struct slots_bin *s = &h->slots[cls];
        if (likely(s->count < s->cap)) {
            s->items[s->count++] = ptr;
            return;
        }
    } else if (likely(route != ROUTE_NONE)) {
        struct list_bin *l = &h->lists[cls];
        if (likely(l->count < l->max)) {
            *(void **)ptr = region_link_encode(r, ptr, l->head);
            l->head = ptr;
            l->count++;
            return;
        }
    }
    cold_free_spill(h, ptr, r);
}

#endif
