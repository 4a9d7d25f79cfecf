/* Cache misses of the hot path: refill a thread's slots or list from its regions, spill
 * them back when full, remote (cross-thread) frees, misuse detection and snapshot refresh. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include "cold.h"
#include "../region/map.h"
#include "../route/classes.h"

#define REFILL_SCAN 16      /* other owned regions looked at per refill before taking a new one */

/* Counts the tiny blocks other threads tagged TAG_HOME (Phase 97) as home, and moves the
 * blocks of r's remote-free stack onto its home list: they come linked, so they stay
 * linked (a tiny region's scan of home tags finds the others). */
static void region_collect(struct region *r)
{
    if (atomic_load_explicit(&r->remote_home, memory_order_relaxed)) {
        uint32_t k = atomic_exchange(&r->remote_home, 0);
        r->nhome = (uint16_t)(r->nhome + k);
        r->used = (uint16_t)(r->used - k);
    }
    void *p = atomic_exchange(&r->remote, NULL);
    while (p) {
        void *next = region_link_load(r, p, 1);
        region_home_link(r, p);
        r->used--;
        p = next;
    }
}

static int region_has_blocks(struct region *r)
{
    return r->nhome || r->carved < r->nblocks || region_remote_pending(r);
}

/* Takes up to `want` blocks out of r: its home blocks first, then remote frees, then
 * fresh carving: blocks other threads gave back are reused before untouched memory is. */
static unsigned region_take(struct region *r, void **out, unsigned want)
{
    unsigned n = region_home_take(r, out, want);
    if (n < want && region_remote_pending(r)) {
        region_collect(r);
        n += region_home_take(r, out + n, want - n);
    }
    if (n < want && r->carved < r->nblocks) {
        char *b = (char *)r + r->blocks_off + (size_t)r->carved * r->bsize;
        unsigned k = want - n;
        if (k > r->nblocks - r->carved)
            k = r->nblocks - r->carved;
        for (unsigned i = 0; i < k; i++, b += r->bsize)
            out[n++] = b;
        r->carved += k;
    }
    r->used += n;
    return n;
}

/* Phase 93's cache follows the heap's list of tiny regions exactly: noted when a region
 * joins, forgotten when it leaves (release or abandon), so a hit needs no owner check. */
static void rcache_note(struct heap *h, struct region *r)
{
#if HAK_PHASE93
    if (h->snap.phase93 && r->cls < HAK_NTINY) {
        unsigned i = heap_rcache_index((uintptr_t)r);
        h->rcache[i] = heap_rcache_key((uintptr_t)r);
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
        *e = RCACHE_EMPTY;
#else
    (void)h, (void)r;
#endif
}

/* After a snapshot change: empty, then (Phase 93 on) every owned tiny region again. */
void cold_heap_rcache_rebuild(struct heap *h)
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
HAK_COLD void cold_region_emptied(struct heap *h, struct region *r)
{
    if (r != h->regions[r->cls].cur) {
        heap_list_remove(h, r);
        region_pool_release(r);
    } else if (r->cls >= HAK_NTINY) {
        h->empty_cur |= (uint64_t)1 << r->cls;
    }
}

/* Any block of h's, its region found through the map, and its class marked for a scan. */
static void region_put(struct heap *h, void *p)
{
    region_put_home(h, region_of_block(p), p);
}

/* Before the heap takes a new region: the empty current regions of other mid classes go
 * back to the arenas.  A class's current region stays while it empties (a malloc/free loop
 * of one block must not take and release a region each time), but a program that has
 * moved on to other classes (realloc's growth) would keep one carved region per class it
 * passed through (4 MB of realloc's 42 MB peak).  The mask is a hint: used is checked. */
static void heap_release_empty_curs(struct heap *h, unsigned cls)
{
    uint64_t m = h->empty_cur & ~((uint64_t)1 << cls);
    h->empty_cur &= (uint64_t)1 << cls;
    while (m) {
        struct region *e = h->regions[__builtin_ctzll(m)].cur;
        m &= m - 1;
        if (e && e->used == 0) {
            heap_list_remove(h, e);
            region_pool_release(e);
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
    while ((s = region_adopt(cls, h)) != NULL) {
        heap_list_add(h, s);
        if ((n = region_take(s, out, want))) {
            cr->cur = s;
            return n;
        }
    }
    heap_release_empty_curs(h, cls);
    s = region_pool_take(cls, h);
    if (s == NULL)
        return 0;
    heap_list_add(h, s);
    cr->cur = s;
    return region_take(s, out, want);
}

HAK_COLD void *cold_alloc_class(struct heap *h, unsigned cls)
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
            cold_obs_sync(h);
            unsigned cap = slots_cap(h, cls);
            unsigned want = cap / 2 ? cap / 2 : 1;
            unsigned n = heap_refill(h, cls, buf, want);
            if (n == 0)
                goto oom;
            for (unsigned i = n - 1; i >= 1; i--)   /* lowest address pops first */
                *++*top = buf[i];
            p = buf[0];
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
            cold_obs_sync(h);
            unsigned want = l->max / 2 ? l->max / 2 : 1;
            unsigned n = heap_refill(h, cls, buf, want);
            if (n == 0)
                goto oom;
            for (unsigned i = n - 1; i >= 1; i--) {     /* n > 1: a tiny class */
                struct region *r = region_of_tiny(buf[i]);
                region_link_store(r, buf[i], l->head);
                l->head = buf[i];
            }
            l->count += n - 1;
            p = buf[0];
        }
    }
    region_tag_set_live(region_of_block(p), p);
    return p;
oom:
    errno = ENOMEM;
    return NULL;
}

static void heap_check_epoch(struct heap *h)
{
    if (h->snap.epoch != atomic_load_explicit(&policy_epoch, memory_order_relaxed))
        cold_heap_refresh(h);
}

/* The thread's heap, made on its first call, with the current policy; NULL if none
 * could be made. */
static struct heap *cold_heap_ready(struct heap *h)
{
    if (h == &heap_empty)
        h = cold_heap_acquire();
    else
        heap_check_epoch(h);
    if (h == NULL)
        return NULL;
    cold_obs_sync(h);               /* OBSERVE: every cold entry samples the live bytes */
    if (HAK_PHASE99)
        cold_purger_poll();
    return h;
}

HAK_COLD void *cold_malloc(struct heap *h, size_t n)
{
    if (unlikely(n > PTRDIFF_MAX) || (h = cold_heap_ready(h)) == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    if (n > HAK_MID_MAX)
        return large_alloc(n, 0, 0);
    if (n > HAK_TINY_MAX && HAK_PHASE100 && HAK_LOAD_RELAXED(h->snap.phase100))
        return span_malloc(n, h);
    return cold_alloc_class(h, route_class_of(n));
}

/* A mid block of its size class, whatever Phase 100 says: the power-of-two classes are
 * naturally aligned, which memalign needs past a span's granule. */
HAK_COLD void *cold_malloc_mid_class(struct heap *h, size_t n)
{
    if ((h = cold_heap_ready(h)) == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    return cold_alloc_class(h, route_class_of(n));
}

/* Pushes a freed block of h's own onto h's cache for its class.  A full slot cache
 * sends the block straight back to its region, as the hot free does; a full list spills
 * its older half. */
static void heap_cache_push(struct heap *h, void *p, struct region *r)
{
    unsigned cls = r->cls;
    if (h->snap.route[cls] == ROUTE_SLOTS && cls < HAK_NTINY) {
        if (slots_count(h, cls) < slots_cap(h, cls)) {   /* a refresh left count <= cap */
            *++h->slot_top[SLOT_INDEX(cls)] = p;
            return;
        }
        OBS_INC(h, overflows, cls);
        cold_obs_sync(h);
    } else {
        struct list_bin *l = &h->lists[cls];
        if (l->max && l->count >= l->max) {   /* mid classes (max 0) go straight back */
            OBS_INC(h, overflows, cls);
            cold_obs_sync(h);
            unsigned half = l->count / 2 ? l->count / 2 : l->count;
            h->regions[cls].scan = 1;
            for (unsigned i = 0; i < half; i++) {   /* tiny blocks: regions by masking */
                void *q = l->head;
                struct region *qr = region_of_tiny(q);
                l->head = region_link_load(qr, q, 0);
                region_put_in(h, qr, q);
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
    region_put_home(h, r, p);
}

/* The hot free's cache was full, or its route was ROUTE_NONE (a new policy). */
HAK_COLD void cold_free_spill(void *p, struct heap *h, struct region *r)
{
    heap_check_epoch(h);
    heap_cache_push(h, p, r);
}

HAK_COLD void cold_report_block(const char *call, struct region *r, uintptr_t p, uint8_t tag)
{
    uintptr_t off = p - (uintptr_t)r;
    int cls = r->cls;
    if ((off & (((uintptr_t)1 << r->gshift) - 1)) || off < r->blocks_off)
        cold_misuse(call, (void *)p, "invalid pointer (not the start of a block)", cls);
    else if (tag == TAG_FREE || tag == TAG_HOME || (r->cls == HAK_CLS_SPAN && (tag == TAG_REMOTE || tag == TAG_CACHED)))
        cold_misuse(call, (void *)p, strcmp(call, "free") ? "use after free (block already freed)" : "double free", cls);
    else
        cold_misuse(call, (void *)p, "invalid pointer (not the start of an allocated block)", cls);
}

/* Hot-path free found p's tag not live, or p owned by another heap. */
HAK_COLD void cold_free_region(void *p, struct heap *h, struct region *r)
{
    uint8_t *t;
    if (!region_tag_check_live(r, (uintptr_t)p, &t)) {
        cold_report_block("free", r, (uintptr_t)p, *t);
        return;
    }
    unsigned cls = r->cls;
    int span = cls == HAK_CLS_SPAN;
    HAK_POISON(p, r->bsize);
    if (atomic_load_explicit(&r->owner, memory_order_relaxed) == h) {
        *t = (uint8_t)TAG_FREE;
        if (span) {
            span_free(h, r, p);
            return;
        }
        OBS_INC(h, frees, cls);
        heap_check_epoch(h);
        heap_cache_push(h, p, r);
        return;
    }
    /* Remote free: the tag flips atomically, so two racing frees of one block
     * cannot both succeed.  A span block's tag turns TAG_REMOTE, which its owner's merges
     * read as neither free nor mergeable until it collects the block. */
    uint8_t expect = r->live_tag;
    /* Phase 97: a tiny block goes home by its tag and a count, so neither this thread nor
     * the owner touches the block itself (a link written here is a line the owner's
     * collect must fetch back: larson spent 16 % of its time there). */
    int home = HAK_PHASE97 && cls < HAK_NTINY && policy_now()->phase97;
    uint8_t to = (uint8_t)(home ? TAG_HOME : span ? TAG_REMOTE : TAG_FREE);
    if (!atomic_compare_exchange_strong((_Atomic uint8_t *)t, &expect, to)) {
        cold_misuse("free", p, "double free", span ? HAK_CLS_SPAN : (int)cls);
        return;
    }
    cold_obs_remote_free(span ? route_class_of(span_block_size(r, p)) : cls);
    int first;
    if (home) {
        first = atomic_fetch_add(&r->remote_home, 1) == 0;
    } else {
        void *head = atomic_load_explicit(&r->remote, memory_order_relaxed);
        do {
            region_link_store(r, p, head);
        } while (!atomic_compare_exchange_weak(&r->remote, &head, p));
        first = head == NULL;
    }
    /* The first pending block tells the owner's refill to look (heaps are never unmapped,
     * so a store into one that just let r go is only a wasted scan).  Acquire: the owner
     * may be a heap just mapped by the thread that adopted r (its seq_cst store of owner
     * publishes the heap). */
    struct heap *o = atomic_load_explicit(&r->owner, memory_order_acquire);
    if (first && o != NULL) {
        if (span)
            atomic_store(&o->span_remote, 1);
        else
            atomic_fetch_or(&o->remote_scan, (uint64_t)1 << cls);
    }
}

/* Phase 93's cache knew p's tiny region, but p is not a live block's start there. */
HAK_COLD void cold_free_tiny(void *p, struct heap *h)
{
    cold_free_region(p, h, region_of_tiny(p));
}

HAK_COLD void cold_free_nonregion(void *p, struct heap *h, unsigned mapbyte, const char *call)
{
    (void)h;
    if (p == NULL)
        return;
    if (mapbyte == MAP_LARGE) {
        large_free(p, call);
        return;
    }
    cold_misuse(call, p, "invalid pointer (not allocated by hakmem)", -1);
}

static void heap_flush_class(struct heap *h, unsigned cls)
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
HAK_COLD void cold_heap_flush(struct heap *h)
{
    for (unsigned c = 0; c < HAK_NCLASSES; c++)
        heap_flush_class(h, c);
}

/* The epoch moved: rebuild the snapshot.  Caches of classes whose route or
 * capacity changed are flushed first, so no block is stranded in a cache the
 * new routes never read. */
HAK_COLD void cold_heap_refresh(struct heap *h)
{
    struct policy_snapshot old = h->snap;
    cold_heap_snapshot(h);
    for (unsigned c = 0; c < HAK_NCLASSES; c++) {
        if (old.route[c] != h->snap.route[c] || slots_cap(h, c) < slots_count(h, c))
            heap_flush_class(h, c);
    }
    cold_heap_rcache_rebuild(h);
}

/* Thread exit: after the flush, every region goes to the pool (empty) or is abandoned. */
HAK_COLD void cold_heap_release_regions(struct heap *h)
{
    for (unsigned c = 0; c < HAK_NCLASSES; c++) {
        struct class_regions *cr = &h->regions[c];
        while (cr->list) {
            struct region *r = cr->list;
            heap_list_remove(h, r);
            region_collect(r);
            if (r->used == 0)
                region_pool_release(r);
            else
                region_abandon(r);
        }
        cr->cur = NULL;
        cr->n = 0;
    }
    cold_span_release_all(h);
}
