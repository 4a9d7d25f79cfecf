/* Per-thread heap lifecycle: created on a thread's first allocation, released at thread
 * exit (regions to the arenas or abandoned for adoption), reused by later threads. */
#include <string.h>
#include "cold.h"

/* A size the Phase 91 table takes here (malloc(0): table91_max is 0) must find a live tag,
 * any one, since every top is the sentinel: the thread's first call then misses into the
 * cold path.  (A zero entry indexed 128 words before the tops: malloc(0) as a thread's
 * first call crashed.) */
struct heap heap_empty = {
    .slot_top = { [0 ... SLOT_NINDEX - 1] = &heap_empty.slot_none },
#if HAK_PHASE91
    .snap.table91 = { [0 ... ROUTE91_ENTRIES - 1] = 0x80u },
#endif
#if HAK_PHASE93
    .rcache = { [0 ... RCACHE_SIZE - 1] = RCACHE_EMPTY },
#endif
};
HAK_TLS struct heap_thread heap_thread = { .heap = &heap_empty };

static pthread_mutex_t heaps_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct heap *heaps_all;        /* every heap ever made, linked by next_heap */
static struct heap *heaps_free[1024]; /* released heaps waiting for a new thread */
static unsigned heaps_free_n;

void heap_lock(void)   { pthread_mutex_lock(&heaps_mutex); }
void heap_unlock(void) { pthread_mutex_unlock(&heaps_mutex); }

static size_t heap_bytes(void)
{
    return os_page_round(sizeof(struct heap));
}

static void heap_snapshot_locked(struct heap *h)
{
    policy_snapshot_build(&h->snap);
    slots_set_limits(h);
}

static void heap_setup(struct heap *h)
{
    slots_reset(h);                  /* a reused heap was flushed */
    pthread_mutex_lock(&heaps_mutex);
    __atomic_store_n(&h->live, 1, __ATOMIC_RELAXED);   /* before the snapshot: publishers now see this heap */
    heap_snapshot_locked(h);
    pthread_mutex_unlock(&heaps_mutex);
    heap_rcache_rebuild(h);
    for (unsigned c = 0; c < HAK_NCLASSES; c++) {
        h->lists[c].max = class_table[c].cache_max;
        h->refill_want[c] = REFILL_START;   /* a new thread's refills start small */
    }
}

/* Every live heap misses on its next malloc or free and rebuilds its snapshot. */
HAK_COLD void heap_invalidate_all(void)
{
    for (struct heap *h = heaps_all; h; h = h->next_heap) {
        if (!h->live)
            continue;
        for (unsigned c = 0; c < HAK_NCLASSES; c++) {
            __atomic_store_n(&h->snap.route[c], ROUTE_NONE, __ATOMIC_RELAXED);
            __atomic_store_n(&h->slot_lim[SLOT_INDEX(c)], NULL, __ATOMIC_RELAXED);
        }
        __atomic_store_n(&h->snap.phase100, 0, __ATOMIC_RELAXED);   /* mid mallocs take the class way */
#if HAK_PHASE91
        for (unsigned i = 0; i < ROUTE91_ENTRIES; i++)
            __atomic_store_n(&h->snap.table91[i], (uint8_t)TAG_LIVE(SLOT_CLASS_NONE), __ATOMIC_RELAXED);
#endif
    }
}

/* Rebuilding under the heap lock means a publisher's invalidation is either
 * before (and we read its policy) or after (and we miss again). */
HAK_COLD void heap_snapshot(struct heap *h)
{
    pthread_mutex_lock(&heaps_mutex);
    heap_snapshot_locked(h);
    pthread_mutex_unlock(&heaps_mutex);
}

HAK_COLD struct heap *heap_acquire(void)
{
    init_core();
    struct heap *h = NULL;
    pthread_mutex_lock(&heaps_mutex);
    if (heaps_free_n)
        h = heaps_free[--heaps_free_n];
    pthread_mutex_unlock(&heaps_mutex);
    if (h == NULL) {
        h = os_map(heap_bytes());
        if (h == NULL)
            return NULL;
        pthread_mutex_lock(&heaps_mutex);
        h->next_heap = heaps_all;
        heaps_all = h;
        pthread_mutex_unlock(&heaps_mutex);
    }
    heap_setup(h);
    heap_tls = h;
    /* Only now, with a heap in place, may we call what can allocate. */
    init_late();
    if (atomic_load(&init_key_ready) && pthread_setspecific(init_thread_key, h) == 0) {
        /* Its thread's exit will retire it (heap_thread_exit), so the purger may visit it
         * until then through the thread's words (cold/visit.c). */
        pthread_mutex_lock(&heaps_mutex);
        h->thread = &heap_thread;
        h->visit_cold = atomic_load_explicit(&heap_thread.cold, memory_order_relaxed);
        pthread_mutex_unlock(&heaps_mutex);
    }
    return h;
}

void heap_foreach(void (*fn)(struct heap *h, void *ctx), void *ctx)
{
    pthread_mutex_lock(&heaps_mutex);
    for (struct heap *h = heaps_all; h; h = h->next_heap)
        fn(h, ctx);
    pthread_mutex_unlock(&heaps_mutex);
}

static void heap_retire(struct heap *h, int reusable)
{
    if (HAK_PHASE107)
        heap_batch_retire(h);
    heap_flush(h);
    heap_regions_release(h);
    span_release_all(h);
    heap_obs_retire(h);
    pthread_mutex_lock(&heaps_mutex);
    __atomic_store_n(&h->live, 0, __ATOMIC_RELAXED);   /* other threads' frees read it (cold/batch.c) */
    h->thread = NULL;                /* its thread's words go with the thread */
    if (reusable && heaps_free_n < sizeof heaps_free / sizeof heaps_free[0])
        heaps_free[heaps_free_n++] = h;
    pthread_mutex_unlock(&heaps_mutex);
}

/* pthread key destructor.  Later destructors that allocate get a fresh heap and
 * re-arm the key, so glibc calls us again for it. */
HAK_COLD void heap_thread_exit(void *arg)
{
    struct heap *h = arg;
    uint32_t e = heap_enter();
    heap_thread.exited = 1;
    if (heap_tls == h)
        heap_tls = &heap_empty;
    heap_retire(h, 1);
    heap_leave(e);
}

/* malloc_trim: the regions and spans of the calling thread, and of every other thread not
 * in a cold path just now (a visit, cold/visit.c), take in what other threads freed into
 * them, so those they empty go back to the arenas before the trim. */
HAK_COLD void heap_trim(void)
{
    struct heap *h = heap_tls;
    if (h != &heap_empty && HAK_PHASE107) {
        uint32_t e = heap_enter();
        heap_outbox_flush(h);           /* Phase 107: first, for the visits to find them */
        heap_leave(e);
    }
    heap_visit_others(h);
    if (h != &heap_empty) {
        uint32_t e = heap_enter();
        if (HAK_PHASE107)
            heap_inbox_take(h);
        heap_collect_remote(h);
        span_merge_pending(h);
        heap_leave(e);
    }
}

/* In a child after fork only the forking thread survives.  Other heaps may have
 * been caught mid-operation, so their caches are not trusted: they are retired
 * without reuse and their regions stay with them (a bounded leak in the child,
 * never a corruption); frees of their blocks go the remote way. */
HAK_COLD void heap_after_fork_child(void)
{
    pthread_mutex_init(&heaps_mutex, NULL);
    for (struct heap *h = heaps_all; h; h = h->next_heap) {
        if (h != heap_tls && h->live) {
            __atomic_store_n(&h->live, 0, __ATOMIC_RELAXED);
            h->thread = NULL;
            for (unsigned i = 0; i < heaps_free_n; i++)
                if (heaps_free[i] == h)
                    heaps_free[i] = heaps_free[--heaps_free_n];
        }
    }
}
