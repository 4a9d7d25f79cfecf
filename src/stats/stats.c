/* The process-wide counters: relaxed atomics, bumped on cold paths only, read by
 * hak_stats_get and the totals' report (api/stats.c). */
#include <stdatomic.h>
#include "stats.h"
#include "../os/os.h"
#include "../policy/policy.h"

static _Atomic uint64_t stats_regions_mapped, stats_regions_purged;
static _Atomic uint64_t stats_arena_used, stats_arena_free, stats_lcache;
static _Atomic uint64_t stats_large_n, stats_large_total, stats_large_own;
static _Atomic uint64_t stats_peak_resident;
static _Atomic uint64_t stats_sparse_purged, stats_sparse_refaulted, stats_sparse_dropped;
static _Atomic uint64_t stats_visits;

/* Pages of live regions given back and not faulted in again (Phase 101). */
static uint64_t stats_sparse_out_bytes(void)
{
    uint64_t purged = atomic_load_explicit(&stats_sparse_purged, memory_order_relaxed);
    uint64_t back = atomic_load_explicit(&stats_sparse_refaulted, memory_order_relaxed)
                  + atomic_load_explicit(&stats_sparse_dropped, memory_order_relaxed);
    return purged > back ? (purged - back) * OS_PAGE : 0;
}

/* The peak of what is resident (in use + retained - the pages given back inside regions),
 * sampled at every change of what it sums, so exact up to racing updaters. */
static void stats_peak_update(void)
{
    uint64_t r = atomic_load_explicit(&stats_arena_used, memory_order_relaxed)
               + atomic_load_explicit(&stats_arena_free, memory_order_relaxed)
               + atomic_load_explicit(&stats_large_own, memory_order_relaxed)
               + atomic_load_explicit(&stats_lcache, memory_order_relaxed);
    uint64_t out = stats_sparse_out_bytes();
    r = r > out ? r - out : 0;
    uint64_t peak = atomic_load_explicit(&stats_peak_resident, memory_order_relaxed);
    while (r > peak && !atomic_compare_exchange_weak_explicit(&stats_peak_resident, &peak, r,
                                                              memory_order_relaxed, memory_order_relaxed))
        ;
}

void stats_arena(size_t in_use, size_t resident_free)
{
    atomic_store_explicit(&stats_arena_used, in_use, memory_order_relaxed);
    atomic_store_explicit(&stats_arena_free, resident_free, memory_order_relaxed);
    stats_peak_update();
}

void stats_large_block(int delta, size_t bytes, int own)
{
    atomic_fetch_add_explicit(&stats_large_n, (uint64_t)(int64_t)delta, memory_order_relaxed);
    uint64_t d = delta > 0 ? bytes : -(uint64_t)bytes;
    atomic_fetch_add_explicit(&stats_large_total, d, memory_order_relaxed);
    if (own) {
        atomic_fetch_add_explicit(&stats_large_own, d, memory_order_relaxed);
        stats_peak_update();
    }
}

void stats_large_cache(size_t bytes)
{
    if (atomic_load_explicit(&stats_lcache, memory_order_relaxed) == bytes)
        return;
    atomic_store_explicit(&stats_lcache, bytes, memory_order_relaxed);
    stats_peak_update();
}

void stats_region(int purged)
{
    atomic_fetch_add_explicit(purged ? &stats_regions_purged : &stats_regions_mapped, 1, memory_order_relaxed);
}

void stats_sparse(unsigned purged, unsigned refaulted, unsigned dropped)
{
    if (purged)
        atomic_fetch_add_explicit(&stats_sparse_purged, purged, memory_order_relaxed);
    if (refaulted)
        atomic_fetch_add_explicit(&stats_sparse_refaulted, refaulted, memory_order_relaxed);
    if (dropped)
        atomic_fetch_add_explicit(&stats_sparse_dropped, dropped, memory_order_relaxed);
    if (refaulted || dropped)
        stats_peak_update();            /* resident again */
}

void stats_visit(void)
{
    atomic_fetch_add_explicit(&stats_visits, 1, memory_order_relaxed);
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
    t->mapped = os_mapped_bytes();
    t->purged = os_purged_bytes();
    t->in_use = atomic_load(&stats_arena_used) + atomic_load(&stats_large_own);
    t->retained = atomic_load(&stats_arena_free) + atomic_load(&stats_lcache);
    t->peak_resident = atomic_load(&stats_peak_resident);
    t->large_blocks = atomic_load(&stats_large_n);
    t->large_bytes = atomic_load(&stats_large_total);
    t->sparse_purged = atomic_load(&stats_sparse_purged);
    t->sparse_refaulted = atomic_load(&stats_sparse_refaulted);
    t->visits = atomic_load(&stats_visits);
    t->sparse_out = stats_sparse_out_bytes() / OS_PAGE;
    uint64_t resident = t->in_use + t->retained > t->sparse_out * OS_PAGE
                      ? t->in_use + t->retained - t->sparse_out * OS_PAGE : 0;
    if (t->peak_resident < resident)
        t->peak_resident = resident;
#if HAK_OBSERVE
    t->large_allocs = atomic_load(&stats_large_allocs);
    t->large_frees = atomic_load(&stats_large_frees);
    for (unsigned c = 0; c < STATS_ROWS; c++)
        t->remote_frees[c] = atomic_load(&stats_remote[c]);
    t->live = atomic_load(&stats_live);
    t->peak = atomic_load(&stats_peak);
#endif
}
