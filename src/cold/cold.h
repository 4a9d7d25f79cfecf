/* Declarations shared by the cold-path files and the entry points, grouped by defining file.
 * Everything here is out of line; the hot path calls in only on a miss or a rare case. */
#ifndef HAK_COLD_H
#define HAK_COLD_H

#include <pthread.h>
#include <stddef.h>
#include <sys/uio.h>
#include "../common/attrs.h"
#include "../slots/heap.h"

/* init.c */
void cold_init(void);
void cold_init_core(void);   /* never allocates */
void cold_init_late(void);   /* may allocate: call with a heap in place */
extern pthread_key_t cold_thread_key;
extern _Atomic int cold_key_ready;

/* alloc.c: misses, refill and spill */
void *cold_malloc(struct heap *h, size_t n);
void *cold_malloc_mid_class(struct heap *h, size_t n);   /* by size class, Phase 100 or not */
void *cold_alloc_class(struct heap *h, unsigned cls);
void  cold_free_nonregion(void *p, struct heap *h, unsigned mapbyte, const char *call);
void  cold_free_region(void *p, struct heap *h, struct region *r);
void  cold_free_tiny(void *p, struct heap *h);
void  cold_report_block(const char *call, struct region *r, uintptr_t p, uint8_t tag);
void  cold_free_spill(void *p, struct heap *h, struct region *r);
void  cold_region_emptied(struct heap *h, struct region *r);

/* A block of h's own region r goes back home (the caller marks its class for a refill
 * scan).  Inline: the hot free takes it when the slots are full. */
HAK_INLINE void region_put_in(struct heap *h, struct region *r, void *p)
{
    region_home_put(r, p);
    if (unlikely(--r->used == 0))
        cold_region_emptied(h, r);
}

/* One block home, its class marked for a scan (a spill of many marks once and uses
 * region_put_in). */
HAK_INLINE void region_put_home(struct heap *h, struct region *r, void *p)
{
    h->regions[r->cls].scan = 1;
    region_put_in(h, r, p);
}
void  cold_heap_flush(struct heap *h);
void  cold_heap_refresh(struct heap *h);
void  cold_heap_release_regions(struct heap *h);   /* thread exit: every region on */
void  cold_heap_rcache_rebuild(struct heap *h);

/* region_pool.c: whole regions between heaps, the pool and the OS */
struct region *region_pool_take(unsigned cls, struct heap *h);
void  region_pool_release(struct region *r);
void  region_abandon(struct region *r);
struct region *region_adopt(unsigned cls, struct heap *h);
/* ... and runs of chunks for large blocks (no region header; the caller keeps the map) */
uintptr_t region_pool_chunks(unsigned chunks, int *clean);
void  region_pool_chunks_release(uintptr_t a, unsigned chunks);
void  region_pool_runs_release(const struct iovec *runs, unsigned n);   /* several, one lock */
int   region_pool_chunks_extend(uintptr_t a, unsigned chunks, unsigned more);   /* 1: grown in place */
int   region_pool_chunk_free(uintptr_t a);                                       /* a's chunk is free */
void  region_pool_lock(void);
void  region_pool_unlock(void);
void  region_pool_after_fork_child(void);   /* fresh locks; the purger's runs free again */
/* Phase 99, for the purger: waits for runs due for purging and takes them out of the free
 * ones (*batched: Phase 95 for them); then gives them back, purged. */
unsigned region_pool_purge_next(struct iovec *runs, unsigned max, int *batched);
void  region_pool_purge_done(const struct iovec *runs, unsigned n);

/* span_pool.c (Phase 100): spans joining and leaving a heap */
int   cold_span_refill(struct heap *h);              /* 0: out of memory */
int   cold_span_merge_pending(struct heap *h);       /* remote frees merged: 1 if any */
void  cold_span_emptied(struct heap *h, struct region *r);  /* nothing left in r: it may go */
int   cold_span_idle(struct heap *h, struct region *r);     /* nothing live in r: 1 if it stays */
void  cold_span_lend(struct heap *h, struct region *r);    /* r has just come down to little */
void  cold_span_release_all(struct heap *h);         /* thread exit */
struct region *region_pool_take_span(struct heap *h);   /* region_pool.c */

/* purger.c (Phase 99): a thread that purges, so the freeing thread need not */
void  cold_purger_want(void);          /* purges are coming: start the purger at the next safe point */
void  cold_purger_poll(void);          /* a safe point: no heap state held, an allocation may nest */
int   cold_purger_running(void);
void  cold_purger_after_fork_child(void);

/* heap.c: per-thread heap lifecycle */
struct heap *cold_heap_acquire(void);
void  cold_heap_thread_exit(void *heap);
void  cold_heap_lock(void);
void  cold_heap_unlock(void);
void  cold_heap_snapshot(struct heap *h);
void  cold_heap_after_fork_child(void);

/* large.c: allocations above the mid classes, straight from the OS */
void  *large_alloc(size_t n, size_t align, int zero);
int    large_free(void *p, const char *call);   /* 0: not a live large block (reported) */
size_t large_usable(void *p);                   /* 0: not a live large block */
void  *large_realloc(void *p, size_t n);
void   large_lock(void);
void   large_unlock(void);
void   large_reset_lock(void);
size_t large_cached_bytes(void);
/* large_share.c: resident free pages between the large spans and the arenas */
int    large_donate(uintptr_t dst, size_t len);   /* 1: a free span's pages now back dst */

/* publish.c: loading and publishing policies */
void cold_policy_initial(void);
void cold_policy_load_config(void);
void cold_heap_invalidate_all(void);     /* heap.c; caller holds the heap lock */

/* observe.c: OBSERVE counters that live outside the heaps, and the report */
#if HAK_OBSERVE
void cold_obs_sync(struct heap *h);
void cold_obs_retire(struct heap *h);
void cold_obs_remote_free(unsigned cls);
void cold_obs_large(int is_alloc, size_t bytes);
#else
static inline void cold_obs_sync(struct heap *h) { (void)h; }
static inline void cold_obs_retire(struct heap *h) { (void)h; }
static inline void cold_obs_remote_free(unsigned cls) { (void)cls; }
static inline void cold_obs_large(int is_alloc, size_t bytes) { (void)is_alloc; (void)bytes; }
#endif
void cold_obs_region(int purged);          /* counted always: cold and cheap */
void cold_heap_foreach(void (*fn)(struct heap *h, void *ctx), void *ctx);

/* error.c: misuse reports */
void cold_misuse(const char *call, const void *p, const char *what, int cls);

#endif
