/* The hot paths of malloc and free: policy snapshot -> route -> slots or list -> (miss) cold.
 * No locks, no calls on a hit; everything rare is one out-of-line call into src/cold. */
#ifndef HAK_API_HOT_H
#define HAK_API_HOT_H

#include "../cold/cold.h"
#include "../route/route.h"

void *api_malloc_mid(size_t n, struct heap *h);
void *api_malloc_tiny_miss(size_t n, struct heap *h);
/* A free into the heap's own region or span, out of line: inside heap_enter and heap_leave
 * (cold/visit.c), whose registers the hot free then never saves. */
void  api_region_emptied(struct heap *h, struct region *r);
void  api_free_span(struct heap *h, struct region *r, void *p, uint8_t *tag);   /* tag still live */
void  api_free_home(struct heap *h, struct region *r, void *p);

/* Returns p, so that with Phase 90 off at run time the call is a tail call.  Either
 * way the tiny tag's address comes from the pointer and the class's live tag t (its low
 * bits the tag shift), not the header. */
HAK_INLINE void *hot_tag_live_tiny(struct heap *h, void *p, size_t t)
{
#if HAK_PHASE90
    if (unlikely(!h->snap.phase90))
        return region_tag_set_live_call(region_of_tiny(p), p);
#else
    (void)h;
#endif
    HAK_STORE_HINT(*region_tag_tiny(p, (unsigned)t), (uint8_t)t);
    HAK_UNPOISON(p, class_table[TAG_CLASS(t)].size);
    region_mark_clear(p);
    return p;
}

/* Phase 90 compiled in: the tag write is forced inline, or with the phase off at run
 * time an out-of-line call (the A/B pair).  Compiled out: the compiler decides. */
HAK_INLINE void *hot_tag_live(struct heap *h, struct region *r, void *p)
{
#if HAK_PHASE90
    if (unlikely(!h->snap.phase90))
        return region_tag_set_live_call(r, p);
#else
    (void)h;
#endif
    region_tag_set_live(r, p);
    return p;
}

/* A tiny request of the class with live tag t: a slot hit, or a miss (the TLIST route
 * included) out of line, so the hit keeps no state for it. */
HAK_INLINE void *hot_malloc_tiny(struct heap *h, size_t n, size_t t)
{
    void *p = slots_pop(h, t);
    if (likely(p != NULL)) {
        HAK_IN_RET_REG(p);
        return hot_tag_live_tiny(h, p, t);
    }
    return api_malloc_tiny_miss(n, h);
}

/* Tiny blocks: with Phase 91 the table entry gives the class; without it the class is
 * computed.  The snapshot's table91_max is HAK_TINY_MAX with the phase on and 0 with it
 * off, so one compare checks both the size and the phase. */
HAK_INLINE void *hot_malloc(size_t n)
{
    struct heap *h = heap_tls;
#if HAK_PHASE91
    if (likely(n <= h->snap.table91_max)) {
        size_t t = HAK_LOAD_RELAXED(h->snap.table91[ROUTE91_INDEX(n)]);
        HAK_IN_SHIFT_REG(t);
        return hot_malloc_tiny(h, n, t);
    }
#endif
    if (likely(n <= HAK_TINY_MAX))
        return hot_malloc_tiny(h, n, TAG_LIVE(class_of_size(n)));
    if (n <= HAK_MID_MAX)
        return api_malloc_mid(n, h);
    return heap_malloc_slow(h, n);
}

/* A live block of h's own region r, of the class with live tag t, whose tag is *tag:
 * into the thread's cache. */
HAK_INLINE void hot_free_owned(struct heap *h, void *ptr, struct region *r, size_t t, uint8_t *tag)
{
    HAK_STORE_HINT(*tag, (uint8_t)TAG_FREE);
    HAK_POISON(ptr, r->bsize);
    OBS_INC(h, frees, TAG_CLASS(t));
    if (likely(slots_push(h, t, ptr)))
        return;
    /* Full slots (a NULL limit is no slots route, or a policy change to pick up): the block
     * goes back to its region now, while its line is hot from the caller's last use.
     * Caching it and spilling older blocks instead wrote links into lines long gone from
     * the cache.  Only tiny classes have slots, so the tag in hand is the one to turn home
     * and the route need not be read.  The limit is reloaded, so the hit's compare keeps
     * its memory operand. */
    if (__atomic_load_n(&HEAP_LIM(h, t), __ATOMIC_RELAXED) != NULL) {
        OBS_INC(h, overflows, TAG_CLASS(t));
        if (heap_put_home_tiny(h, r, tag))
            api_region_emptied(h, r);
        return;
    }
    size_t cls = TAG_CLASS(t);
    unsigned route = route_of_class(&h->snap, cls);
    if (route == ROUTE_MID) {               /* keeps no cache: home at once */
        api_free_home(h, r, ptr);
        return;
    }
    struct list_bin *l = &h->lists[cls];
    if (likely(route == ROUTE_TLIST && l->count < l->max)) {
        region_link_store(r, ptr, l->head);
        l->head = ptr;
        l->count++;
        return;
    }
    heap_free_spill_slow(ptr, h, r);
}

#if HAK_PHASE93
/* Phase 93: the entry of h's region cache for p if p lies in one of h's own tiny regions,
 * known without the map; NULL if not. */
HAK_INLINE const struct rcache_info *hot_own_tiny(struct heap *h, uintptr_t p)
{
    unsigned i = heap_rcache_index(p);
    return likely(HAK_LOAD_RELAXED(h->rcache[i]) == heap_rcache_key(p)) ? &h->rinfo[i] : NULL;   /* a visit may clear it */
}
#endif

HAK_INLINE void hot_free(void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    struct heap *h = heap_tls;
    struct region *r;
    uint8_t *tag;
#if HAK_PHASE93
    const struct rcache_info *ri = hot_own_tiny(h, p);
    if (likely(ri != NULL)) {
        size_t t = ri->live_tag;
        HAK_IN_SHIFT_REG(t);
        if (likely((tag = region_tag_live_tiny(ptr, (unsigned)t, ri->amask)) != NULL)) {
            hot_free_owned(h, ptr, region_of_tiny(ptr), t, tag);
            return;
        }
        heap_free_tiny_slow(ptr, h);                /* misuse: reported there (it finds the
                                                  region, so the hit finds it only if needed) */
        return;
    }
#endif
    unsigned b = region_map_get(p);
    if (unlikely(!region_map_is_region(b))) {          /* not a region: NULL, large or foreign */
        heap_free_nonregion_slow(ptr, h, b, "free");
        return;
    }
    r = region_from_map(p, b);
    if (unlikely(!region_tag_check_live(r, p, &tag)
                 || atomic_load_explicit(&r->owner, memory_order_relaxed) != h)) {
        heap_free_slow(ptr, h, r);           /* misuse, or a block of another thread */
        return;
    }
    if (r->live_tag == TAG_LIVE_SPAN) {     /* Phase 100: merges with its free neighbours */
        api_free_span(h, r, ptr, tag);
        return;
    }
    hot_free_owned(h, ptr, r, r->live_tag, tag);
}

#endif
