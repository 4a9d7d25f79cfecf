/* Chunk arenas: big chunk-aligned mappings that every region is carved from, as an extent of
 * free 64 KiB chunks; a released region's chunks coalesce with their free neighbours. */
#ifndef HAK_ARENA_CHUNKS_H
#define HAK_ARENA_CHUNKS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include "../region/region.h"

struct policy;

/* Internal to arena/: every call expects the pool's lock held (pool.c). */

/* An extent of `chunks` free chunks, preferring chunks whose pages are still resident (no
 * page faults) over purged or fresh ones; 0 when no arena has such an extent.  *clean says
 * the whole extent reads as zero. */
uintptr_t arena_take(unsigned chunks, int *clean);

/* Gives a region's chunks back.  Their pages stay resident while the arenas' resident
 * free bytes are within `retain`; beyond that, chunks free for at least `delay` ms are
 * purged (in address order).  When more waits than an eighth past the bound (twice
 * `retain`, or what is in use if more), those that have waited go down to `retain` and
 * then any down to the bound, all at once (delay 0: every extent past `retain` at once).
 * `batched` (Phase 95): each sweep's extents go back in one call.  `deferred` (Phase 99):
 * the sweep is left to the purger thread (ARENA_SWEEP_DUE).  Purges happen under the
 * lock, or on extents taken out of the free ones, so no taker sees an extent before it reads as
 * zero.  An arena left wholly free is
 * unmapped when the other arenas have at least as much free room. */
int  arena_release(uintptr_t a, unsigned chunks, size_t retain, uint32_t delay, int batched, int deferred);
#define ARENA_PURGED    1   /* arena_release purged or unmapped */
#define ARENA_SWEEP_DUE 2   /* `deferred` (Phase 99): a sweep is due, for the purger to run */
/* A deferred sweep runs on the freeing thread after all once this many times the bound waits. */
#define ARENA_BEHIND    8u

/* Phase 99, for the purger thread: the extents one sweep would purge (up to max), taken out
 * of the free chunks until arena_purge_done() gives them back, now reading as zero.
 * *age_ms: when none is due yet but some will be, how long until then (else 0). */
unsigned arena_purge_collect(struct iovec *out, unsigned max, size_t retain, uint32_t delay, uint32_t *age_ms);
void     arena_purge_done(const struct iovec *extents, unsigned n);
/* For arena_donate: up to `chunks` free resident chunks, in address order, in at most `max`
 * runs of at least `min` chunks within one kernel mapping, taken out of the free ones like
 * the purger's (arena_purge_done gives them back, reading as zero by then). */
unsigned arena_donate_collect(struct iovec *out, unsigned max, size_t chunks, unsigned min);
/* Pages moved into [a, a + chunks) (the large page cache's, lent to a fresh extent) are a
 * kernel mapping of their own, cutting the arena's, until they are purged (the chunks then
 * become the arena's own mapping again, os_heal).  Records them and returns 1, or 0 when the
 * arena would then span more than ARENA_MAPS_MAX mappings. */
#define ARENA_MAPS_MAX 32u
int  arena_foreign_add(uintptr_t a, unsigned chunks);
/* In a fork child (no purger there): extents the purger held are free again, maybe resident. */
void     arena_after_fork_child(void);

/* Test hook: with `frozen`, the arenas' clock reads `ms` until set again. */
void arena_clock_set(int frozen, uint32_t ms);
/* The arenas' clock in milliseconds (no lock needed). */
uint32_t arena_now_ms(void);

/* sparse.c (Phase 101): every live tiny region and span, for the purger's pass over them */
void arena_sparse_add(struct region *r);        /* a region or span just made */
void arena_sparse_lock(void);                   /* fork: the list stays whole in the child */
void arena_sparse_unlock(void);
void arena_sparse_after_fork_child(void);
/* Under the pool's lock, for the purger: milliseconds until its next pass over sparse
 * regions, 0 if one is due, UINT32_MAX if none is wanted (the phase off, or a heap within
 * `retain`, in which free pages inside regions cannot exceed the cap). */
uint32_t arena_sparse_wait(const struct policy *p, size_t in_use);
/* [purge] sparse_delay, never shorter than [purge] delay: how long a region must stay untouched. */
uint32_t arena_sparse_delay(const struct policy *p);

/* malloc_trim: purges free resident chunks, whatever their age, until at most `keep` bytes
 * stay resident.  Returns the bytes purged. */
size_t arena_purge_now(size_t keep, int batched);

/* Bytes of chunks in regions and large blocks. */
size_t arena_in_use(void);
/* Bytes of free chunks whose pages may be resident. */
size_t arena_resident_free(void);
/* Chunks handed to the purger or to a donation and not back yet (their pages on the way
 * out). */
unsigned arena_busy(void);

/* Takes the `more` chunks right after the extent [a, a + chunks) if they are all free: 1. */
int  arena_extend(uintptr_t a, unsigned chunks, unsigned more);

/* 1 when a lies in a free chunk of an arena. */
int  arena_chunk_free(uintptr_t a);

/* Maps one more arena able to hold `chunks`; 0 when the OS refuses.  Call without the
 * lock, then arena_add() with it.  *huge (Phase 94): on 2 MiB boundaries, advised for
 * transparent huge pages (left 1 if it was, for arena_add, which purges the same way). */
uintptr_t arena_map(unsigned chunks, unsigned *nchunks, int *huge);
int       arena_add(uintptr_t base, unsigned nchunks, int huge);   /* 0: table full (caller unmaps) */

#endif
