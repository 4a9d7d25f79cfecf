/* Process-wide counters that belong to no thread's heap: regions mapped and purged (always
 * counted), and with OBSERVE large blocks, remote frees and the live bytes with their peak. */
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
    uint64_t large_allocs, large_frees;
    uint64_t remote_frees[STATS_ROWS];
    int64_t  live, peak;
};

void stats_region(int purged);             /* cold and cheap: counted in every build */
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
