/* The memory backend's contract: whole regions and extents of chunks taken from and given back
 * to the chunk arenas, the retained-memory cap and its purge, and the purger thread. */
#ifndef HAK_ARENA_H
#define HAK_ARENA_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include "../common/common.h"
#include "../region/region.h"

/* pool.c: whole regions between heaps, the arenas and the OS.  A heap is only recorded as
 * a region's owner here, never read. */
struct region *arena_region_take(unsigned cls, struct heap *h);   /* a new region of cls, owned by h */
struct region *arena_span_take(struct heap *h);                   /* a new span (Phase 100) */
void  arena_region_release(struct region *r);                     /* an empty region goes back */
void  arena_region_abandon(struct region *r);                     /* thread exit: live blocks in it */
struct region *arena_region_adopt(unsigned cls, struct heap *h);  /* an abandoned one, or NULL */
/* Spans: abandoned by their longest free run (granules), so an adopter takes one that fits. */
void  arena_span_abandon(struct region *r, uint32_t longest);
/* An abandoned span another thread freed into since (tried first), else one whose longest
 * run holds `want` granules; NULL if none: a span that fits nothing is never walked. */
struct region *arena_span_adopt(struct heap *h, uint32_t want);
/* A free into a region or span without an owner is made holding this lock, so that r is
 * neither adopted nor released meanwhile.  arena_abandoned_listed: r is on an abandoned
 * list (read before the free); arena_abandoned_freed: the free was the first pending since
 * r was last collected, so a listed r without room may have some now;
 * arena_abandoned_release_empty: a listed tiny r whose every block has come home by its
 * tag goes back to the arenas at once (1), where it waited for an adopter. */
void  arena_abandoned_lock(void);
void  arena_abandoned_unlock(void);
int   arena_abandoned_listed(struct region *r);
void  arena_abandoned_freed(struct region *r);
int   arena_abandoned_release_empty(struct region *r);
/* ... and extents of chunks for large blocks (no region header; the caller keeps the map) */
uintptr_t arena_chunks_take(unsigned chunks, int *clean);
void  arena_chunks_release(uintptr_t a, unsigned chunks);
void  arena_extents_release(const struct iovec *extents, unsigned n);   /* several, one lock */
int   arena_chunks_extend(uintptr_t a, unsigned chunks, unsigned more);   /* 1: grown in place */
int   arena_chunk_is_free(uintptr_t a);                           /* a's chunk is free */
void  arena_pool_lock(void);
void  arena_pool_unlock(void);
void  arena_pool_after_fork_child(void);   /* fresh locks; the purger's extents free again */
/* Phase 99, for the purger: waits for extents due for purging and takes them out of the free
 * ones (*batched: Phase 95 for them); then gives them back, purged.  Or returns 0 with
 * *sparse saying which pass over regions is due: Phase 101's, or the idle decay's (every
 * free chunk is purged by then). */
enum { ARENA_PASS_NONE, ARENA_PASS_SPARSE, ARENA_PASS_IDLE };
unsigned arena_pool_purge_next(struct iovec *extents, unsigned max, int *batched, int *sparse);
size_t arena_pool_resident_free(void);   /* bytes of free chunks that may be resident */
void  arena_pool_purge_done(const struct iovec *extents, unsigned n);
int   arena_pool_purger_idle(void);   /* test hook: the purger waits with no deadline */
unsigned arena_pool_busy(void);       /* test hook: chunks the purger or a donation holds */
/* malloc_trim: free chunks purged now, whatever their delay, until at most `pad` bytes of
 * them stay resident; returns the bytes purged, and in *left what stays. */
size_t arena_trim(size_t pad, size_t *left);
void  arena_exit_purge(void);         /* Phase 106: every free chunk purged, if the lock is free */
/* A layer above with resident free pages of its own (the large page cache) may
 * lend them to an extent of fresh chunks about to be faulted in: fn moves pages over
 * [dst, dst + len) and returns 1, or returns 0.  Registered once at start-up.  The pages
 * moved in are a kernel mapping of their own inside the arena's: fn asks arena_foreign
 * first, and moves pages of one mapping only. */
typedef int (*arena_donor_fn)(uintptr_t dst, size_t len);
void  arena_set_donor(arena_donor_fn fn);
/* The extent [a, a + len) of the arenas is about to take pages moved in from elsewhere, one
 * kernel mapping: 1 if its arena may be cut there (recorded until the chunks are purged),
 * 0 if the arena spans as many mappings as it may (ARENA_MAPS_MAX). */
int   arena_foreign(uintptr_t a, size_t len);
/* The other way: a block the layer above maps itself (a huge one) about to fault fresh pages
 * over [dst, dst + len) takes the resident pages of free chunks instead, which stay free and
 * read as zero.  Only runs of at least ARENA_DONATE_MIN bytes within one kernel mapping are
 * moved, at most `max` of them, one after the other from dst: each becomes one kernel
 * mapping of the block.  Returns how many, their lengths in runs[]. */
#define ARENA_DONATE_MIN ((size_t)1 << 20)
unsigned arena_donate(uintptr_t dst, size_t len, size_t *runs, unsigned max);

/* sparse.c (Phase 101): free pages inside live tiny regions and spans given back */
void   arena_sparse_forget(struct region *r);   /* r, held, is about to leave (region_hold) */
/* One pass over the regions: with `trim` (malloc_trim) every free page now, until at most
 * `keep` bytes of them stay; else the pages of those that have stayed sparse (half or less
 * live) and untouched for [purge] sparse_delay, while they and the free chunks exceed `keep`
 * ([purge] retain; 0 once the program is idle).  Returns the bytes given back. */
size_t arena_sparse_pass(int trim, size_t keep);
/* Called after each pass but malloc_trim's with the time and the delay: the layer above
 * visits the heaps of threads idle that long (cold/visit.c). */
typedef void (*arena_visitor_fn)(uint32_t now_ms, uint32_t idle_ms);
void   arena_set_visitor(arena_visitor_fn fn);

/* Idle decay ([purge] idle): a region, span or large block taken or given back is a use of
 * memory.  Once none has come for [purge] idle ms, the purger gives back every free page
 * hakmem retains: the free chunks, the free pages of regions and spans untouched for
 * [purge] sparse_delay, and (the hook) the large page cache.  pool.c notes its own takes and
 * releases; large/ notes the blocks it maps itself. */
void  arena_note_use(void);
typedef void (*arena_idle_fn)(void);
void  arena_set_idle(arena_idle_fn fn);  /* registered at start-up: large/'s cache trim */

/* purger.c (Phase 99): a thread that purges, so the freeing thread need not */
/* Start the purger at the next safe point: `purges`, purges past `retain` are coming and it
 * takes them over there from the freeing threads; else only the idle decay wants it. */
void  arena_purger_want(int purges);
void  arena_purger_poll(void);          /* a safe point: no heap state held, an allocation may nest */
int   arena_purger_running(void);
int   arena_purger_purges(void);        /* running, and the purges past `retain` are its */
void  arena_purger_pause(unsigned ms);  /* test hook: the purger holds each batch this long */
void  arena_purger_after_fork_child(void);

#endif
