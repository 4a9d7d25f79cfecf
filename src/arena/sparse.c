/* Phase 101: every live tiny region and span on one list, and the pass that gives back the
 * free pages of those a few survivors keep sparse, by the purger or by malloc_trim. */
#include <pthread.h>
#include <string.h>
#include "arena.h"
#include "chunks.h"
#include "../os/os.h"
#include "../policy/policy.h"
#include "../stats/stats.h"

/* A leaf lock: a region joins and leaves the list under it, and the purger's sparse_takes
 * and sparse_ms fields of each are read and written under it. */
static pthread_mutex_t sparse_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct region *sparse_head;
static _Atomic size_t sparse_count;     /* regions on the list, read without the lock */
static struct region *sparse_cursor;    /* a pass's next region: a removal moves it on */
/* One pass at a time (the purger's, malloc_trim's), so one cursor serves. */
static pthread_mutex_t sparse_pass_mutex = PTHREAD_MUTEX_INITIALIZER;

/* A pass every SPARSE_PERIOD_MIN ms or [purge] delay, whichever is longer, while passes
 * give pages back; each that gives none back doubles the wait, up to SPARSE_PERIOD_MAX
 * or [purge] sparse_delay, whichever is shorter,
 * so a program that sits idle is not woken ten times a second for nothing. */
#define SPARSE_PERIOD_MIN 100u
#define SPARSE_PERIOD_MAX 1000u
static _Atomic uint32_t sparse_period = SPARSE_PERIOD_MIN;
static _Atomic uint32_t sparse_last_ms;

#define SPARSE_IOV 128u                 /* a span's 256 pages in ranges of two at worst */

/* What the layer above does after each of the purger's passes with the regions of threads
 * that have idled for the delay (cold/visit.c: takes in other threads' frees for them). */
static arena_visitor_fn sparse_visitor;

void arena_set_visitor(arena_visitor_fn fn)
{
    __atomic_store_n(&sparse_visitor, fn, __ATOMIC_RELEASE);
}

uint32_t arena_sparse_delay(const struct policy *p)
{
    return p->purge_sparse_ms > p->purge_delay_ms ? p->purge_sparse_ms : p->purge_delay_ms;
}

static int sparse_kind(const struct region *r)
{
    return r->cls < HAK_NTINY || r->cls == HAK_CLS_SPAN;
}

HAK_COLD void arena_sparse_add(struct region *r)
{
    atomic_store_explicit(&r->hold, REGION_HOLD_FREE, memory_order_relaxed);
    atomic_store_explicit(&r->takes, 0, memory_order_relaxed);
    region_purged_reset(r);
    if (!sparse_kind(r))
        return;
    pthread_mutex_lock(&sparse_mutex);
    r->sparse_takes = 0;
    r->sparse_ms = arena_now_ms();
    r->reg_prev = NULL;
    r->reg_next = sparse_head;
    if (sparse_head)
        sparse_head->reg_prev = r;
    sparse_head = r;
    atomic_fetch_add_explicit(&sparse_count, 1, memory_order_relaxed);
    pthread_mutex_unlock(&sparse_mutex);
}

/* The caller holds r (REGION_HOLD_OWNER: a pass that had it has finished); off the list,
 * no pass takes it again. */
HAK_COLD void arena_sparse_forget(struct region *r)
{
    if (!sparse_kind(r))
        return;
    pthread_mutex_lock(&sparse_mutex);
    if (sparse_cursor == r)
        sparse_cursor = r->reg_next;
    if (r->reg_prev)
        r->reg_prev->reg_next = r->reg_next;
    else
        sparse_head = r->reg_next;
    if (r->reg_next)
        r->reg_next->reg_prev = r->reg_prev;
    r->reg_next = r->reg_prev = NULL;
    atomic_fetch_sub_explicit(&sparse_count, 1, memory_order_relaxed);
    pthread_mutex_unlock(&sparse_mutex);
    if (r->purged_n)
        stats_sparse(0, 0, r->purged_n);
    __atomic_store_n(&r->purged_n, 0, __ATOMIC_RELAXED);
}

void arena_sparse_lock(void)
{
    pthread_mutex_lock(&sparse_mutex);
}

void arena_sparse_unlock(void)
{
    pthread_mutex_unlock(&sparse_mutex);
}

/* Only the forking thread came along: no pass holds a region in the child. */
void arena_sparse_after_fork_child(void)
{
    pthread_mutex_init(&sparse_mutex, NULL);
    pthread_mutex_init(&sparse_pass_mutex, NULL);
    sparse_cursor = NULL;
    for (struct region *r = sparse_head; r; r = r->reg_next)
        if (atomic_load_explicit(&r->hold, memory_order_relaxed) == REGION_HOLD_PURGER)
            atomic_store_explicit(&r->hold, REGION_HOLD_FREE, memory_order_relaxed);
}

uint32_t arena_sparse_wait(const struct policy *p, size_t in_use)
{
    if (!HAK_PHASE101 || !p->phase101 || in_use <= p->purge_cap
        || atomic_load_explicit(&sparse_count, memory_order_relaxed) == 0)
        return UINT32_MAX;
    uint32_t period = atomic_load_explicit(&sparse_period, memory_order_relaxed);
    if (period < p->purge_delay_ms)
        period = p->purge_delay_ms;
    uint32_t most = arena_sparse_delay(p) > SPARSE_PERIOD_MIN ? arena_sparse_delay(p) : SPARSE_PERIOD_MIN;
    if (period > most)
        period = most;                      /* a region is looked at again within its delay */
    uint32_t since = arena_now_ms() - atomic_load_explicit(&sparse_last_ms, memory_order_relaxed);
    return since >= period ? 0 : period - since;
}

/* r may be purged now (sparse_mutex held): with `trim` any region; else one
 * half empty or less whose owner has handed nothing out of it for `delay` ms. */
static int sparse_candidate(struct region *r, uint32_t now, uint32_t delay, int trim, size_t *free_bytes)
{
    uint32_t t = atomic_load_explicit(&r->takes, memory_order_relaxed);
    int sparse = region_sparse(r, free_bytes);
    if (trim)
        return 1;
    if (t != r->sparse_takes) {
        r->sparse_takes = t;
        r->sparse_ms = now;
        return 0;
    }
    return sparse && now - r->sparse_ms >= delay;
}

HAK_COLD size_t arena_sparse_pass(int trim, size_t keep)
{
    const struct policy *p = policy_now();
    if (!HAK_PHASE101 || !p->phase101)
        return 0;
    pthread_mutex_lock(&sparse_pass_mutex);
    uint32_t now = arena_now_ms(), delay = arena_sparse_delay(p);
    size_t waiting = 0, f;
    pthread_mutex_lock(&sparse_mutex);
    for (struct region *r = sparse_head; r; r = r->reg_next)
        if (sparse_candidate(r, now, delay, trim, &f))
            waiting += f;
    pthread_mutex_unlock(&sparse_mutex);
    /* The cap covers free memory wherever it is: the free chunks first (what they hold past
     * the cap the arenas purge themselves), then these pages in the room they leave. */
    size_t limit = keep;
    size_t chunks = trim ? 0 : arena_pool_resident_free();
    size_t total = waiting + (chunks < limit ? chunks : limit);
    size_t purged = 0;
    if (total > limit) {
        /* Regions are taken until their estimates cover the excess (what they give back
         * may differ: other threads' frees not merged yet count as in use); malloc_trim(0)
         * takes them all. */
        size_t excess = trim && keep == 0 ? SIZE_MAX : total - limit, taken = 0;
        int batched = HAK_PHASE95 && p->phase95;
        struct iovec iov[SPARSE_IOV];
        pthread_mutex_lock(&sparse_mutex);
        sparse_cursor = sparse_head;
        while (sparse_cursor && taken < excess) {
            struct region *r = sparse_cursor;
            sparse_cursor = r->reg_next;
            uint8_t expect = REGION_HOLD_FREE;
            if (!sparse_candidate(r, now, delay, trim, &f)
                || !atomic_compare_exchange_strong_explicit(&r->hold, &expect, REGION_HOLD_PURGER,
                                                            memory_order_acquire, memory_order_relaxed))
                continue;                   /* its owner is handing memory out: next time */
            taken += f;
            pthread_mutex_unlock(&sparse_mutex);
            unsigned pages, n = region_free_pages(r, iov, SPARSE_IOV, &pages);
            if (n && p->purge_sparse_lazy)
                os_purge_lazy(iov, n);
            else if (n)
                os_purge_many(iov, n, batched);
            atomic_store_explicit(&r->hold, REGION_HOLD_FREE, memory_order_release);
            if (pages)
                stats_sparse(pages, 0, 0);
            purged += (size_t)pages * OS_PAGE;
            pthread_mutex_lock(&sparse_mutex);
        }
        sparse_cursor = NULL;
        pthread_mutex_unlock(&sparse_mutex);
    }
    if (!trim) {
        uint32_t period = atomic_load_explicit(&sparse_period, memory_order_relaxed);
        period = purged ? SPARSE_PERIOD_MIN : period * 2 > SPARSE_PERIOD_MAX ? SPARSE_PERIOD_MAX : period * 2;
        atomic_store_explicit(&sparse_period, period, memory_order_relaxed);
        atomic_store_explicit(&sparse_last_ms, arena_now_ms(), memory_order_relaxed);
    }
    pthread_mutex_unlock(&sparse_pass_mutex);
    arena_visitor_fn visit = __atomic_load_n(&sparse_visitor, __ATOMIC_ACQUIRE);
    if (!trim && visit)
        visit(arena_now_ms(), delay);
    return purged;
}
