/* The process-wide counters: relaxed atomics, bumped on cold paths only, read by
 * hak_stats_get (api/stats.c). */
#include <stdatomic.h>
#include "stats.h"
#include "../policy/policy.h"

static _Atomic uint64_t stats_regions_mapped, stats_regions_purged;

void stats_region(int purged)
{
    atomic_fetch_add_explicit(purged ? &stats_regions_purged : &stats_regions_mapped, 1, memory_order_relaxed);
}

#if HAK_OBSERVE

static _Atomic uint64_t stats_remote[STATS_ROWS];
static _Atomic uint64_t stats_large_allocs, stats_large_frees;
static _Atomic int64_t stats_live, stats_peak;

void stats_live_add(int64_t delta)
{
    int64_t live = atomic_fetch_add(&stats_live, delta) + delta;
    int64_t peak = atomic_load_explicit(&stats_peak, memory_order_relaxed);
    while (live > peak && !atomic_compare_exchange_weak(&stats_peak, &peak, live))
        ;
}

void stats_remote_free(unsigned cls)
{
    if (!policy_now()->observe)
        return;
    atomic_fetch_add_explicit(&stats_remote[cls], 1, memory_order_relaxed);
    /* a block leaving: the peak cannot grow */
    atomic_fetch_sub(&stats_live, (int64_t)class_table[cls].size);
}

void stats_large(int is_alloc, size_t bytes)
{
    if (!policy_now()->observe)
        return;
    atomic_fetch_add_explicit(is_alloc ? &stats_large_allocs : &stats_large_frees, 1, memory_order_relaxed);
    stats_live_add(is_alloc ? (int64_t)bytes : -(int64_t)bytes);
}

#endif

void stats_read(struct stats_totals *t)
{
    *t = (struct stats_totals){ 0 };
    t->regions_mapped = atomic_load(&stats_regions_mapped);
    t->regions_purged = atomic_load(&stats_regions_purged);
#if HAK_OBSERVE
    t->large_allocs = atomic_load(&stats_large_allocs);
    t->large_frees = atomic_load(&stats_large_frees);
    for (unsigned c = 0; c < STATS_ROWS; c++)
        t->remote_frees[c] = atomic_load(&stats_remote[c]);
    t->live = atomic_load(&stats_live);
    t->peak = atomic_load(&stats_peak);
#endif
}
