/* Chunk arenas: big chunk-aligned mappings that every region is carved from, as a run of
 * free 64 KiB chunks; a released region's chunks coalesce with their free neighbours. */
#ifndef HAK_COLD_ARENA_H
#define HAK_COLD_ARENA_H

#include <stddef.h>
#include <stdint.h>

/* All calls: the caller holds the region pool's lock (region_pool.c). */

/* A run of `chunks` free chunks, preferring chunks whose pages are still resident (no
 * page faults) over purged or fresh ones; 0 when no arena has such a run.  *clean says
 * the whole run reads as zero. */
uintptr_t arena_take(unsigned chunks, int *clean);

/* Gives a region's chunks back.  Their pages stay resident while the arenas' resident
 * free bytes are within `retain`; beyond that, chunks free for at least `delay` ms are
 * purged (in address order).  When more waits than an eighth past the bound (twice
 * `retain`, or what is in use if more), those that have waited go down to `retain` and
 * then any down to the bound, all at once (delay 0: every run past `retain` at once).
 * `batched` (Phase 95): each sweep's runs go back in one call.  Purges happen under the
 * lock, so no taker sees a run before it reads as zero.  An arena left wholly free is
 * unmapped when the other arenas have at least as much free room. */
int  arena_release(uintptr_t a, unsigned chunks, size_t retain, uint32_t delay, int batched);   /* 1: purged or unmapped */

/* Bytes of chunks in regions and large blocks. */
size_t arena_in_use(void);

/* Takes the `more` chunks right after the run [a, a + chunks) if they are all free: 1. */
int  arena_extend(uintptr_t a, unsigned chunks, unsigned more);

/* 1 when a lies in a free chunk of an arena. */
int  arena_chunk_free(uintptr_t a);

/* Maps one more arena able to hold `chunks`; 0 when the OS refuses.  Call without the
 * lock, then arena_add() with it.  `huge` (Phase 94): on 2 MiB boundaries, advised for
 * transparent huge pages. */
uintptr_t arena_map(unsigned chunks, unsigned *nchunks, int huge);
int       arena_add(uintptr_t base, unsigned nchunks);   /* 0: table full (caller unmaps) */

#endif
