/* Refill and spill: a thread's slots and lists filled from its regions (its own, adopted
 * ones, or new ones from the arenas), blocks sent home when full, and the heap's regions. */
#include <errno.h>
#include <stdint.h>
#include "slots.h"
#include "../arena/arena.h"
#include "../os/os.h"

#define REFILL_SCAN 16      /* other owned regions looked at per refill before taking a new one */

/* Phase 93's cache follows the heap's list of tiny regions exactly: noted when a region
 * joins, forgotten when it leaves (release or abandon), so a hit needs no owner check. */
static void rcache_note(struct heap *h, struct region *r)
{
#if HAK_PHASE93
    if (h->snap.phase93 && r->cls < HAK_NTINY) {
        unsigned i = heap_rcache_index((uintptr_t)r);
        __atomic_store_n(&h->rcache[i], heap_rcache_key((uintptr_t)r), __ATOMIC_RELAXED);
        h->rinfo[i] = (struct rcache_info){ .live_tag = r->live_tag, .amask = r->gmask };
    }
#else
    (void)h, (void)r;
#endif
}

static void rcache_forget(struct heap *h, struct region *r)
{
#if HAK_PHASE93
    uintptr_t *e = heap_rcache_slot(h, (uintptr_t)r);
    if (*e == heap_rcache_key((uintptr_t)r))
        __atomic_store_n(e, RCACHE_EMPTY, __ATOMIC_RELAXED);   /* the owner's free may be reading it (a visit) */
#else
    (void)h, (void)r;
#endif
}

/* After a snapshot change: empty, then (Phase 93 on) every owned tiny region again. */
void heap_rcache_rebuild(struct heap *h)
{
#if HAK_PHASE93
    for (unsigned i = 0; i < RCACHE_SIZE; i++)
        h->rcache[i] = RCACHE_EMPTY;
    for (unsigned c = 0; c < HAK_NTINY; c++) {
        struct region *r = h->regions[c].list;
        for (unsigned i = 0; r && i < h->regions[c].n; i++, r = r->next)
            rcache_note(h, r);
    }
#else
    (void)h;
#endif
}

static void heap_list_add(struct heap *h, struct region *r)
{
    struct class_regions *cr = &h->regions[r->cls];
    rcache_note(h, r);
    region_ring_add(&cr->list, r);
    cr->n++;
}

static void heap_list_remove(struct heap *h, struct region *r)
{
    struct class_regions *cr = &h->regions[r->cls];
    rcache_forget(h, r);
    region_ring_remove(&cr->list, r);
    if (cr->cur == r)
        cr->cur = NULL;
    cr->n--;
}

/* r's last block came back: a region that is not the current one leaves the heap for
 * the pool; an emptied current mid region is noted (heap_release_empty_curs). */
HAK_COLD void heap_region_emptied(struct heap *h, struct region *r)
{
    if (r != h->regions[r->cls].cur) {
        heap_list_remove(h, r);
        arena_region_release(r);
    } else if (r->cls >= HAK_NTINY) {
        h->empty_cur |= (uint64_t)1 << r->cls;
    }
}

/* Any block of h's, its region found through the map, and its class marked for a scan. */
static void region_put(struct heap *h, void *p)
{
    heap_put_home(h, region_of_block(p), p);
}

/* Before the heap takes a new region: the empty current regions of other mid classes go
 * back to the arenas.  A class's current region stays while it empties (a malloc/free loop
 * of one block must not take and release a region each time), but a program that has
 * moved on to other classes (a buffer grown by realloc) would keep one carved region per
 * class it passed through.  The mask is a hint: used is checked. */
static void heap_release_empty_curs(struct heap *h, unsigned cls)
{
    uint64_t m = h->empty_cur & ~((uint64_t)1 << cls);
    h->empty_cur &= (uint64_t)1 << cls;
    while (m) {
        struct region *e = h->regions[__builtin_ctzll(m)].cur;
        m &= m - 1;
        if (e && e->used == 0) {
            heap_list_remove(h, e);
            arena_region_release(e);
        }
    }
}

static unsigned heap_refill(struct heap *h, unsigned cls, void **out, unsigned want)
{
    struct class_regions *cr = &h->regions[cls];
    struct region *r = cr->cur;
    unsigned n;
    if (r && (n = region_take(r, out, want)))
        return n;
    /* The remote hint is taken before the scan (seq_cst read-modify-writes here and in
     * the freer, after its push), so a push the scan cannot see leaves the hint set for
     * the next refill. */
    uint64_t bit = (uint64_t)1 << cls;
    if (cr->list && (cr->scan || ((atomic_load_explicit(&h->remote_scan, memory_order_relaxed) & bit)
                                  && (atomic_fetch_and(&h->remote_scan, ~bit) & bit)))) {
        struct region *start = r ? r->next : cr->list, *s = start;
        cr->scan = 0;
        for (unsigned i = 0; i < REFILL_SCAN; i++) {
            if (s != r && region_has_blocks(s) && (n = region_take(s, out, want))) {
                cr->cur = s;
                cr->scan = 1;   /* s may hold more, and so may the regions not seen */
                return n;
            }
            s = s->next;
            if (s == start)
                break;
        }
        if (s != start)
            cr->scan = 1;   /* stopped at the limit: the rest are seen next time */
        cr->list = s;       /* the next scan goes on from here: every region gets its turn */
    }
    struct region *s;
    while ((s = arena_region_adopt(cls, h)) != NULL) {
        heap_list_add(h, s);
        if ((n = region_take(s, out, want))) {
            cr->cur = s;
            return n;
        }
    }
    heap_release_empty_curs(h, cls);
    s = arena_region_take(cls, h);
    if (s == NULL)
        return 0;
    heap_list_add(h, s);
    cr->cur = s;
    return region_take(s, out, want);
}

/* How many blocks this refill takes: half the cache, once the class has been refilled
 * enough times for that to pay (struct heap's refill_want). */
static unsigned refill_want(struct heap *h, unsigned cls, unsigned max)
{
    unsigned w = h->refill_want[cls];
    if (w >= max)
        return max ? max : 1;
    h->refill_want[cls] = (uint16_t)(2 * w);
    return w;
}

/* Phase 102: slots that overflowed since the class's last refill and have run empty again
 * are narrower than the bursts the thread allocates and frees (a fixed 64 sent every block
 * past them home and took it back by a tag scan): they double, up to SLOTS_GROW_MAX blocks
 * and SLOTS_GROW_BYTES, and SLOTS_GROW_HEAP for all classes of the heap together.  They
 * are empty, so nothing moves: the top goes to the bigger array.  The limit is swapped by
 * a CAS, since a publisher may clear it meanwhile (heap_invalidate_all); then the owner's
 * next free misses and the refresh sets it from slot_grown.  Returns the capacity now. */
static unsigned slots_grow(struct heap *h, unsigned cls, unsigned cap)
{
    size_t size = class_table[cls].size, held = 0;
    for (unsigned c = 0; c < HAK_NTINY; c++)
        if (c != cls)
            held += (size_t)h->slot_grown[c] * class_table[c].size;
    unsigned most = SLOTS_GROW_BYTES / size;
    if (most > SLOTS_GROW_MAX)
        most = SLOTS_GROW_MAX;
    if (held + (size_t)most * size > SLOTS_GROW_HEAP)   /* what the other classes left */
        most = held < SLOTS_GROW_HEAP ? (unsigned)((SLOTS_GROW_HEAP - held) / size) : 0;
    void **lim = slots_lim(h, cls);
    if (cap >= most || lim == NULL)
        return cap;
    if (h->slot_big[cls] == NULL
        && (h->slot_big[cls] = os_map((SLOTS_GROW_MAX + 1) * sizeof(void *))) == NULL)
        return cap;                     /* item 0, zero, is the sentinel */
    unsigned grown = 2 * cap < most ? 2 * cap : most;
    h->slot_grown[cls] = (uint16_t)grown;
    h->slot_top[SLOT_INDEX(cls)] = h->slot_big[cls];
    __atomic_compare_exchange_n(&h->slot_lim[SLOT_INDEX(cls)], &lim, h->slot_big[cls] + grown, 0,
                                __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return grown;
}

HAK_COLD void *heap_alloc_class(struct heap *h, unsigned cls)
{
    void *buf[HAK_SLOTS_CAP_MAX > 256 ? HAK_SLOTS_CAP_MAX : 256];
    void *p;
    unsigned route = h->snap.route[cls];
    OBS_INC(h, allocs, cls);
    if (route == ROUTE_SLOTS && cls < HAK_NTINY) {
        void ***top = &h->slot_top[SLOT_INDEX(cls)];
        if (**top) {
            p = *(*top)--;
            OBS_INC(h, slot_hits, cls);
        } else {
            OBS_INC(h, refills, cls);
            heap_obs_sync(h);
            unsigned cap = slots_cap(h, cls);
            struct class_regions *cr = &h->regions[cls];
            if (cr->scan & SCAN_SPILLED) {
                cr->scan &= (uint8_t)~SCAN_SPILLED;
                if (HAK_PHASE102 && h->snap.phase102)
                    cap = slots_grow(h, cls, cap);
            }
            unsigned want = refill_want(h, cls, cap / 2);
            /* Straight into the empty slots, the last block taken on top: a carve puts
             * the lowest address there (region_take), so fresh blocks pop in address order. */
            void **s = *top;
            unsigned n = heap_refill(h, cls, s + 1, want);
            if (n == 0)
                goto oom;
            p = s[n];
            *top = s + n - 1;
        }
    } else {
        struct list_bin *l = &h->lists[cls];
        if (l->head) {                      /* lists hold tiny blocks only: regions by masking */
            struct region *r = region_of_tiny(l->head);
            p = l->head;
            l->head = region_link_load(r, p, 0);
            l->count--;
        } else {
            OBS_INC(h, refills, cls);
            heap_obs_sync(h);
            unsigned want = refill_want(h, cls, l->max / 2);
            unsigned n = heap_refill(h, cls, buf, want);
            if (n == 0)
                goto oom;
            for (unsigned i = 0; i + 1 < n; i++) {      /* n > 1: a tiny class */
                struct region *r = region_of_tiny(buf[i]);
                region_link_store(r, buf[i], l->head);
                l->head = buf[i];
            }
            l->count += n - 1;
            p = buf[n - 1];                 /* the last taken first, as from the slots */
        }
    }
    region_tag_set_live(region_of_block(p), p);
    return p;
oom:
    errno = ENOMEM;
    return NULL;
}

/* Pushes a freed block of h's own onto h's cache for its class.  A full slot cache
 * sends the block straight back to its region, as the hot free does; a full list spills
 * its older half. */
void heap_cache_push(struct heap *h, void *p, struct region *r)
{
    unsigned cls = r->cls;
    if (h->snap.route[cls] == ROUTE_SLOTS && cls < HAK_NTINY) {
        if (slots_count(h, cls) < slots_cap(h, cls)) {   /* a refresh left count <= cap */
            *++h->slot_top[SLOT_INDEX(cls)] = p;
            return;
        }
        OBS_INC(h, overflows, cls);
        heap_obs_sync(h);
    } else {
        struct list_bin *l = &h->lists[cls];
        if (l->max && l->count >= l->max) {   /* mid classes (max 0) go straight back */
            OBS_INC(h, overflows, cls);
            heap_obs_sync(h);
            unsigned half = l->count / 2 ? l->count / 2 : l->count;
            h->regions[cls].scan = 1;
            for (unsigned i = 0; i < half; i++) {   /* tiny blocks: regions by masking */
                void *q = l->head;
                struct region *qr = region_of_tiny(q);
                l->head = region_link_load(qr, q, 0);
                heap_put_in(h, qr, q);
            }
            l->count -= half;
        }
        if (l->count < l->max) {
            region_link_store(r, p, l->head);
            l->head = p;
            l->count++;
            return;
        }
    }
    heap_put_home(h, r, p);
}

void heap_flush_class(struct heap *h, unsigned cls)
{
    if (cls < HAK_NTINY)
        while (*h->slot_top[SLOT_INDEX(cls)])
            region_put(h, *h->slot_top[SLOT_INDEX(cls)]--);
    struct list_bin *l = &h->lists[cls];
    while (l->head) {
        void *q = l->head;
        l->head = region_link_load(region_of_block(q), q, 0);
        region_put(h, q);
    }
    l->count = 0;
}

/* Every cached block back to its region: at thread exit and when a route changes. */
HAK_COLD void heap_flush(struct heap *h)
{
    for (unsigned c = 0; c < HAK_NCLASSES; c++)
        heap_flush_class(h, c);
}

/* A visit (cold/visit.c): h's thread is out of its cold paths, but its hot free may be
 * sending tiny blocks home (heap_put_home_tiny) meanwhile.  So a tiny region is taken in
 * only if every block out of it has come home from other threads: none is in the
 * thread's slots or hands, and nothing of it can change until a refill, which waits for
 * the visit.  It leaves then; partly freed ones wait for their owner (their pages go
 * back meanwhile: region/purge.c).  A mid class's paths all wait for the visit. */
static int visit_may_collect(struct region *r)
{
    if (r->cls >= HAK_NTINY)
        return 1;
    uint16_t used = __atomic_load_n(&r->used, __ATOMIC_ACQUIRE);
    uint32_t home = atomic_load_explicit(&r->remote_home, memory_order_relaxed);
    /* the linked stack (Phase 97 off) counted: the owner, which alone pops it, is out */
    return home <= used && home + region_remote_stacked(r, used + 1u) == used;
}

/* What other threads freed into h's regions is collected, and a region it empties leaves
 * for the arenas, whose trim gives its pages back (a thread that only frees would otherwise
 * keep them until h's next refill of the class). */
static void collect_remote(struct heap *h, int visit)
{
    for (unsigned c = 0; c < HAK_NCLASSES; c++) {
        struct class_regions *cr = &h->regions[c];
        struct region *r = cr->list;
        for (unsigned i = cr->n; i; i--) {
            struct region *next = r->next;  /* r may leave the ring */
            if (region_remote_pending(r) && (!visit || visit_may_collect(r))) {
                region_hold(r);             /* Phase 101: the purger reads these tags too */
                region_collect(r);
                region_unhold(r);
                if (r->used == 0)
                    heap_region_emptied(h, r);
            }
            r = next;
        }
    }
}

/* malloc_trim in this thread. */
HAK_COLD void heap_collect_remote(struct heap *h)
{
    collect_remote(h, 0);
}

HAK_COLD void heap_visit_collect(struct heap *h)
{
    collect_remote(h, 1);
}

/* Thread exit: after the flush, every region goes to the arenas (empty) or is abandoned. */
HAK_COLD void heap_regions_release(struct heap *h)
{
    for (unsigned c = 0; c < HAK_NCLASSES; c++) {
        struct class_regions *cr = &h->regions[c];
        while (cr->list) {
            struct region *r = cr->list;
            heap_list_remove(h, r);
            region_collect(r);
            if (r->used == 0)
                arena_region_release(r);
            else
                arena_region_abandon(r);
        }
        cr->cur = NULL;
        cr->n = 0;
    }
}
