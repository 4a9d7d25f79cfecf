/* Process-wide counters that belong to no thread's heap: in every build the process totals
 * (bytes mapped, in use, retained, purged, their peak; regions; large blocks), and with
 * OBSERVE large blocks, remote frees and the live bytes with their peak. */
#ifndef HAK_STATS_H
#define HAK_STATS_H

#include <stddef.h>
#include <stdint.h>
#include "../common/common.h"
#include "../class/class.h"

/* Per-class rows: every size class, the large row (HAK_NCLASSES) and the spans' own id. */
#define STATS_ROWS (HAK_CLS_SPAN + 1)

struct stats_totals {
    uint64_t regions_mapped, regions_purged;
    /* Always counted, each where memory changes hands on a cold path (a region or extent
     * taken or released, a large block mapped or freed), never on a hot one. */
    uint64_t mapped;          /* bytes of every mapping hakmem holds (os/ counts them) */
    uint64_t purged;          /* bytes given back with madvise, since start (os/ counts them) */
    uint64_t in_use;          /* bytes of arena chunks in regions, spans and large blocks, and
                               * of large blocks' own mappings */
    uint64_t retained;        /* free bytes kept resident: arena chunks and the large page cache */
    uint64_t peak_resident;   /* the most in_use + retained has been */
    uint64_t large_blocks, large_bytes;   /* live large blocks */
    uint64_t large_allocs, large_frees;
    uint64_t sparse_purged, sparse_refaulted, sparse_out;   /* Phase 101: pages (stats_sparse) */
    uint64_t visits;          /* idle or busy threads' heaps visited (cold/visit.c) */
    uint64_t remote_frees[STATS_ROWS];
    int64_t  live, peak;
};

void stats_region(int purged);             /* cold and cheap: counted in every build */
/* The arenas' bytes in use and free resident, after each change (arena/pool.c, under its lock). */
void stats_arena(size_t in_use, size_t resident_free);
/* A large block registered (+1) or removed (-1), of `bytes`; `own`: a mapping of its own. */
void stats_large_block(int delta, size_t bytes, int own);
/* The large page cache's bytes, after each change (large/, under its lock). */
void stats_large_cache(size_t bytes);
/* Phase 101: pages of live regions and spans given back, faulted in again by a block
 * handed out over them, and dropped from the count as their chunks left the span or region. */
void stats_sparse(unsigned purged, unsigned refaulted, unsigned dropped);
void stats_visit(void);                    /* a heap visited for its sleeping thread (cold/visit.c) */
void stats_read(struct stats_totals *t);

#if HAK_OBSERVE
/* Each counts only while [observe] enabled is on. */
void stats_large(int is_alloc, size_t bytes);
void stats_remote_free(unsigned cls);
void stats_live_add(int64_t delta);        /* bytes now live changed by delta: the peak follows */
#else
static inline void stats_large(int is_alloc, size_t bytes) { (void)is_alloc; (void)bytes; }
static inline void stats_remote_free(unsigned cls) { (void)cls; }
static inline void stats_live_add(int64_t delta) { (void)delta; }
#endif

#endif
