/* The slow paths of malloc and free: a thread's first call, a new policy to pick up, sizes
 * the hot path does not serve, frees of other threads' blocks and of pointers not live. */
#include <errno.h>
#include <stdint.h>
#include "cold.h"

static void heap_check_epoch(struct heap *h)
{
    if (h->snap.epoch != atomic_load_explicit(&policy_epoch, memory_order_relaxed))
        heap_refresh(h);
}

/* The thread's heap, made on its first call, with the current policy; NULL if none
 * could be made. */
static struct heap *heap_ready(struct heap *h)
{
    if (h == &heap_empty)
        h = heap_acquire();
    else
        heap_check_epoch(h);
    if (h == NULL)
        return NULL;
    heap_obs_sync(h);               /* OBSERVE: every cold entry samples the live bytes */
    if (HAK_PHASE107)
        heap_batch_poll(h);
    if (HAK_PHASE99)
        arena_purger_poll();
    return h;
}

static void *malloc_slow(struct heap *h, size_t n)
{
    if (unlikely(n > PTRDIFF_MAX) || (h = heap_ready(h)) == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    if (n > HAK_MID_MAX)
        return large_alloc(n, 0, 0);
    if (n > HAK_TINY_MAX && HAK_PHASE100 && HAK_LOAD_RELAXED(h->snap.phase100))
        return span_malloc(n, h);
    return heap_alloc_class(h, class_of_size(n));
}

/* A mid block of its size class, whatever Phase 100 says: the power-of-two classes are
 * naturally aligned, which memalign needs past a span's granule. */
static void *malloc_class_slow(struct heap *h, size_t n)
{
    if ((h = heap_ready(h)) == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    return heap_alloc_class(h, class_of_size(n));
}

/* The hot free's cache was full, or its route was ROUTE_NONE (a new policy). */
static void free_spill_slow(void *p, struct heap *h, struct region *r)
{
    heap_check_epoch(h);
    heap_cache_push(h, p, r);
}

/* A block the profiler sampled (TAG_SAMPLED) ends its sample and is live again, for the
 * free to go on; 0 if p is no such block.  The tag changes by compare-and-swap, so of two
 * racing frees of one block only one gets past here. */
static int heap_unsample(struct region *r, void *p, uint8_t *t)
{
    uint8_t expect = TAG_SAMPLED;
    if (*t != TAG_SAMPLED
        || !atomic_compare_exchange_strong((_Atomic uint8_t *)t, &expect, r->live_tag))
        return 0;
    prof_forget((uintptr_t)p);
    return 1;
}

/* Another thread's block: its tag flips atomically, so two racing frees of one block
 * cannot both succeed (a span block's turns TAG_REMOTE, which its owner's merges read as
 * neither free nor mergeable until it collects the block).  1 if it is the first pending
 * since r was last collected, 0 if not, -1 after reporting a double free.  *owner: r's
 * owner, read while the block still counts as in use: once it is pushed, the last free
 * may release r and its chunks become any block's, so r is not read after. */
static int remote_push(struct region *r, void *p, uint8_t *t, unsigned cls, int span,
                       struct heap **owner)
{
    uint8_t expect = r->live_tag;
    /* Phase 97: a tiny block goes home by its tag and a count, so neither this thread nor
     * the owner touches the block itself (a link written here is a line the owner's
     * collect must fetch back from this thread's cache). */
    int home = HAK_PHASE97 && cls < HAK_NTINY && policy_now()->phase97;
    uint8_t to = (uint8_t)(home ? TAG_HOME : span ? TAG_REMOTE : TAG_FREE);
    if (!atomic_compare_exchange_strong((_Atomic uint8_t *)t, &expect, to)) {
        class_misuse("free", p, "double free", span ? HAK_CLS_SPAN : (int)cls);
        return -1;
    }
    stats_remote_free(span ? class_of_size(span_block_size(r, p)) : cls);
    /* Acquire: the owner may be a heap just mapped by the thread that adopted r (its
     * seq_cst store of owner publishes the heap). */
    *owner = atomic_load_explicit(&r->owner, memory_order_acquire);
    if (home)
        return atomic_fetch_add(&r->remote_home, 1) == 0;
    void *head = atomic_load_explicit(&r->remote, memory_order_relaxed);
    do {
        region_link_store(r, p, head);
    } while (!atomic_compare_exchange_weak(&r->remote, &head, p));
    return head == NULL;
}

/* Another heap's block p of r, its tag still live, freed now: its tag is marked at once (the
 * way of a free that no batch takes, and of a batch's blocks whose owner is not there to
 * take them in). */
HAK_COLD void heap_free_remote_now(void *p, struct region *r)
{
    uint8_t *t = region_tag(r, (uintptr_t)p);
    unsigned cls = r->cls;
    int span = cls == HAK_CLS_SPAN;
    /* An abandoned region or span (no owner): the free is made under the abandoned lock, so
     * r can be neither adopted nor released meanwhile, and if r is listed its list may
     * follow the free (one without room may have some now), or, its last block back, r
     * goes.  r is not touched after the free otherwise: an adopter may collect it, empty
     * and release r at once. */
    int first;
    struct heap *o = NULL;
    if (atomic_load(&r->owner) == NULL) {
        arena_abandoned_lock();
        int listed = arena_abandoned_listed(r);
        first = remote_push(r, p, t, cls, span, &o);
        if (first >= 0 && arena_abandoned_release_empty(r))
            first = 0;                      /* its last block: r is gone, no owner to tell */
        else if (first > 0 && listed)
            arena_abandoned_freed(r);
        arena_abandoned_unlock();
    } else {
        first = remote_push(r, p, t, cls, span, &o);
    }
    /* The first pending block tells the owner's refill to look (heaps are never unmapped,
     * so a store into one that has let r go since is only a wasted scan). */
    if (first > 0 && o != NULL) {
        if (span)
            atomic_store(&o->span_remote, 1);
        else
            atomic_fetch_or(&o->remote_scan, (uint64_t)1 << cls);
    }
}

/* Hot-path free found p's tag not live, or p owned by another heap. */
HAK_COLD void heap_free_slow(void *p, struct heap *h, struct region *r)
{
    uint8_t *t;
    if (!region_tag_check_live(r, (uintptr_t)p, &t) && !heap_unsample(r, p, t)) {
        region_report_block("free", r, (uintptr_t)p, *t);
        return;
    }
    /* Acquire: the owner may be a heap just mapped by the thread that adopted r. */
    struct heap *o = atomic_load_explicit(&r->owner, memory_order_acquire);
    if (o == h) {
        uint32_t e = heap_enter();          /* h's own region: see cold/visit.c */
        HAK_POISON(p, r->bsize);
        __atomic_store_n(t, (uint8_t)TAG_FREE, __ATOMIC_RELAXED);
        if (r->cls == HAK_CLS_SPAN) {
            span_free(h, r, p);
        } else {
            OBS_INC(h, frees, r->cls);
            heap_check_epoch(h);
            heap_cache_push(h, p, r);
        }
        heap_leave(e);
        return;
    }
    /* Phase 107: a tiny block goes into a batch for its owner, in a heap of this thread's
     * own (one that has only freed so far gets one now, as for its first malloc, unless it
     * is past its heap's retirement: glibc frees after the key destructors have run, and a
     * heap made then would never be retired). */
    if (HAK_PHASE107 && r->cls < HAK_NTINY && o != NULL) {
        if (unlikely(h == &heap_empty) && !heap_thread.exited && policy_now()->phase107)
            h = heap_ready(h);
        if (h != NULL && h->snap.phase107 && heap_outbox_put(h, o, r, p))
            return;
    }
    HAK_POISON(p, r->bsize);
    heap_free_remote_now(p, r);
}

/* The entry points above, each inside heap_enter and heap_leave (cold/visit.c); a free
 * enters only for a block of the thread's own (heap_free_slow). */
HAK_COLD void *heap_malloc_slow(struct heap *h, size_t n)
{
    uint32_t e = heap_enter();
    void *p = malloc_slow(h, n);
    heap_leave(e);
    return p;
}

HAK_COLD void *heap_malloc_class_slow(struct heap *h, size_t n)
{
    uint32_t e = heap_enter();
    void *p = malloc_class_slow(h, n);
    heap_leave(e);
    return p;
}

HAK_COLD void heap_free_spill_slow(void *p, struct heap *h, struct region *r)
{
    uint32_t e = heap_enter();
    free_spill_slow(p, h, r);
    heap_leave(e);
}

/* Phase 93's cache knew p's tiny region, but p is not a live block's start there. */
HAK_COLD void heap_free_tiny_slow(void *p, struct heap *h)
{
    heap_free_slow(p, h, region_of_tiny(p));
}

HAK_COLD void heap_free_nonregion_slow(void *p, struct heap *h, unsigned mapbyte, const char *call)
{
    (void)h;
    if (p == NULL)
        return;
    if (mapbyte == MAP_LARGE) {
        large_free(p, call);
        return;
    }
    class_misuse(call, p, "invalid pointer (not allocated by hakmem)", -1);
}

/* The epoch moved: rebuild the snapshot.  Caches of classes whose route or
 * capacity changed are flushed first, so no block is stranded in a cache the
 * new routes never read. */
HAK_COLD void heap_refresh(struct heap *h)
{
    struct policy_snapshot old = h->snap;
    heap_snapshot(h);
    for (unsigned c = 0; c < HAK_NCLASSES; c++) {
        if (old.route[c] != h->snap.route[c] || slots_cap(h, c) < slots_count(h, c))
            heap_flush_class(h, c);
    }
    heap_rcache_rebuild(h);
}

