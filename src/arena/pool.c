/* Whole regions moving between heaps, the chunk arenas and the OS: carving, releasing
 * (purging past the retained-memory cap), abandoning at thread exit and adopting. */
#define _GNU_SOURCE                         /* pthread_cond_clockwait */
#include <pthread.h>
#include <string.h>
#include <time.h>
#include "arena.h"
#include "chunks.h"
#include "../os/os.h"
#include "../policy/policy.h"
#include "../stats/stats.h"

/* Empty regions go back to the chunk arenas (chunks.c), which keep up to the policy's
 * purge cap of free chunks resident and purge the rest. */
static pthread_mutex_t pool_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t purge_cv = PTHREAD_COND_INITIALIZER;   /* the purger waits on it (Phase 99) */
static pthread_cond_t busy_cv = PTHREAD_COND_INITIALIZER;    /* busy chunks came back (arena_trim waits) */
/* The purger sleeps with no deadline (nothing past `retain` was resident when it looked).
 * A release that then brings more than `retain` must wake it: the arenas signal a due
 * sweep at most once per tick, and one signalled while the purger was busy is lost, so
 * the memory would stay resident in a program that goes idle.  Under pool_mutex. */
static int purger_idle;
/* Idle decay: uses of memory (takes and releases) counted, the time of the last, and the count
 * the purger last decayed at (its own).  purger_asleep: it waits with no deadline, so a use
 * must wake it for the decay to come (set under pool_mutex; a user reads it without, after
 * its count, the purger it before reading the count: one of the two sees the other). */
static _Atomic uint32_t pool_uses;
static _Atomic uint32_t pool_used_ms;
static uint32_t purger_decayed;
static _Atomic int purger_asleep;

HAK_COLD void arena_note_use(void)
{
    atomic_store_explicit(&pool_used_ms, arena_now_ms(), memory_order_relaxed);
    atomic_fetch_add(&pool_uses, 1);
    if (atomic_load(&purger_asleep)) {
        pthread_mutex_lock(&pool_mutex);
        pthread_cond_signal(&purge_cv);
        pthread_mutex_unlock(&pool_mutex);
    }
}

static pthread_mutex_t abandoned_mutex = PTHREAD_MUTEX_INITIALIZER;
/* Abandoned regions by class: with a block to hand out (adopted), and without (not, until
 * another thread frees into one, arena_abandoned_freed: a refill then adopts one that has
 * a block instead of each in turn).  Heads written under abandoned_mutex, read without it
 * by a refill's first look (atomically). */
static struct region *abandoned_room[HAK_NCLASSES];
static struct region *abandoned_full[HAK_NCLASSES];
#define ABANDONED_ROOM 0u
#define ABANDONED_FULL 1u
static size_t abandoned_n;
/* Abandoned spans: list k holds those whose longest free run had 2^k to 2^(k+1) - 1
 * granules when abandoned; the last, those another thread has freed into since (how much
 * they hold now is unknown).  An adopter takes one that fits, not each in turn: an exiting
 * thread abandons again all it adopted, so walking them would make every new thread pay for
 * all its predecessors'.  Under abandoned_mutex. */
#define SPAN_LISTS 14u                      /* 2^13 granules > a span's 4096 */
#define SPAN_FREED (SPAN_LISTS - 1)
static struct region *abandoned_spans[SPAN_LISTS];

/* Every change of the arenas' bytes in use or free resident happens under the pool's lock:
 * leaving it hands them to the statistics, so the totals cost nothing on the hot paths. */
static void pool_unlock(void)
{
    stats_arena(arena_in_use(), arena_resident_free());
    pthread_mutex_unlock(&pool_mutex);
}

void arena_pool_lock(void)
{
    pthread_mutex_lock(&abandoned_mutex);
    pthread_mutex_lock(&pool_mutex);
    arena_sparse_lock();
}

void arena_pool_unlock(void)
{
    arena_sparse_unlock();
    pool_unlock();
    pthread_mutex_unlock(&abandoned_mutex);
}

void arena_pool_after_fork_child(void)
{
    pthread_mutex_init(&pool_mutex, NULL);
    purger_idle = 0;                        /* the purger did not come along */
    atomic_store(&purger_asleep, 0);
    purger_decayed = atomic_load(&pool_uses);
    pthread_mutex_init(&abandoned_mutex, NULL);
    pthread_cond_init(&purge_cv, NULL);
    pthread_cond_init(&busy_cv, NULL);
    arena_after_fork_child();
    arena_sparse_after_fork_child();
}

static arena_donor_fn pool_donor;

void arena_set_donor(arena_donor_fn fn)
{
    __atomic_store_n(&pool_donor, fn, __ATOMIC_RELEASE);
}

HAK_COLD int arena_foreign(uintptr_t a, size_t len)
{
    pthread_mutex_lock(&pool_mutex);
    int ok = arena_foreign_add(a, (unsigned)(len >> HAK_CHUNK_SHIFT));
    pool_unlock();
    return ok;
}

#define DONATE_RUNS 16u                 /* runs one donation moves at most */

HAK_COLD unsigned arena_donate(uintptr_t dst, size_t len, size_t *runs, unsigned max)
{
    struct iovec v[DONATE_RUNS];
    if (max > DONATE_RUNS)
        max = DONATE_RUNS;
    if (max == 0 || os_move_keep_refused())
        return 0;
    pthread_mutex_lock(&pool_mutex);
    unsigned n = arena_donate_collect(v, max, len >> HAK_CHUNK_SHIFT, (unsigned)(ARENA_DONATE_MIN >> HAK_CHUNK_SHIFT));
    pool_unlock();
    if (n == 0)
        return 0;
    /* Out of the free chunks meanwhile: nobody takes them while their pages move. */
    size_t done = 0;
    unsigned moved = 0;
    for (unsigned k = 0; k < n; k++) {
        if (os_move_keep(v[k].iov_base, v[k].iov_len, (void *)(dst + done))) {
            runs[moved++] = v[k].iov_len;
            done += v[k].iov_len;
        } else {                        /* a kernel before 5.13, found out once: purged */
            os_purge(v[k].iov_base, v[k].iov_len);
        }
    }
    arena_pool_purge_done(v, n);
    return moved;
}

/* Phase 96 populates a fresh region only once this much is in use: a small program's
 * regions, most of them barely used, keep faulting in page by page (its RSS stays
 * mimalloc's), while a big heap's few partly used regions are a small share of it. */
#define POOL_POPULATE_MIN ((size_t)16 << 20)

/* With [purge] idle, the purger is started once this much free memory is resident (or
 * `retain`, if less), not only past `retain`: a smaller program's retained memory, kept for
 * its next allocations, must still go back once it idles, and only a thread can see that. */
#define POOL_IDLE_MIN ((size_t)16 << 20)

/* Takes `chunks` free chunks from the arenas, mapping a new arena (outside the lock) when
 * none has room; *clean says the memory reads as zero.  `populate` (Phase 96): fresh
 * pages of a big heap are faulted in with one call. */
static HAK_COLD uintptr_t pool_get(unsigned chunks, int *clean, int populate)
{
    for (;;) {
        pthread_mutex_lock(&pool_mutex);
        uintptr_t r = arena_take(chunks, clean);
        size_t in_use = arena_in_use();
        populate = populate && in_use >= POOL_POPULATE_MIN;
        pool_unlock();
        /* Phase 101: a heap past twice `retain` may come to hold more than that free inside
         * its regions, with no chunk ever freed: the purger will have to look.  (Started for
         * any heap past `retain`, it made large's frees leave their purges to it, and large's
         * peak RSS grew 4.5 %.) */
        const struct policy *p = policy_now();
        if (HAK_PHASE101 && p->phase101 && HAK_PHASE99 && p->phase99 && in_use / 2 > p->purge_cap
            && !arena_purger_purges())
            arena_purger_want(1);
        /* Pages that would fault in: take the large page cache's resident ones instead (the donor). */
        arena_donor_fn donor = __atomic_load_n(&pool_donor, __ATOMIC_ACQUIRE);
        if (r && *clean && donor && donor(r, (size_t)chunks << HAK_CHUNK_SHIFT))
            *clean = 0;
        if (r && *clean && populate)
            os_populate((void *)r, (size_t)chunks << HAK_CHUNK_SHIFT);
        if (r) {
            arena_note_use();
            return r;
        }
        unsigned n;
        int huge = HAK_PHASE94 && policy_now()->phase94;
        uintptr_t m = arena_map(chunks, &n, &huge);
        if (m == 0)
            return 0;
        pthread_mutex_lock(&pool_mutex);
        int ok = arena_add(m, n, huge);
        pool_unlock();
        if (!ok) {
            os_unmap((void *)m, (size_t)n << HAK_CHUNK_SHIFT);
            return 0;
        }
    }
}

/* Large blocks up to [large] arena_max are chunk extents too, so their pages and the
 * regions' are one pool under one purge policy (large.c keeps the registry). */
HAK_COLD uintptr_t arena_chunks_take(unsigned chunks, int *clean)
{
    return pool_get(chunks, clean, 0);     /* a big block may be touched sparsely */
}

/* Runs of chunks (iov_len a multiple of a chunk) back to their arenas, under one lock. */
HAK_COLD void arena_extents_release(const struct iovec *extents, unsigned n)
{
    for (unsigned k = 0; k < n; k++)
        HAK_UNPOISON(extents[k].iov_base, extents[k].iov_len);
    const struct policy *p = policy_now();
    int phase99 = HAK_PHASE99 && p->phase99, purged = 0, due = 0;
    pthread_mutex_lock(&pool_mutex);
    int running = phase99 && arena_purger_purges();
    for (unsigned k = 0; k < n; k++) {
        int r = arena_release((uintptr_t)extents[k].iov_base, (unsigned)(extents[k].iov_len >> HAK_CHUNK_SHIFT),
                              p->purge_cap, p->purge_delay_ms, HAK_PHASE95 && p->phase95, running);
        purged |= r == ARENA_PURGED;
        due |= r == ARENA_SWEEP_DUE;
    }
    if (due || (purger_idle && arena_resident_free() > p->purge_cap))
        pthread_cond_signal(&purge_cv);
    /* More free memory than `retain` is resident: purges will come, so start the purger
     * (at the next safe point) before a program frees its heap in one go (frag's end).  With
     * idle decay, already past POOL_IDLE_MIN: a program that goes idle then gets it back. */
    size_t free_now = arena_resident_free();
    int want_purges = phase99 && !running && free_now > p->purge_cap;
    int want_idle = phase99 && p->purge_idle_ms && free_now > POOL_IDLE_MIN && !arena_purger_running();
    pool_unlock();
    arena_note_use();
    if (purged)
        stats_region(1);
    if (want_purges || want_idle)
        arena_purger_want(want_purges);
}

HAK_COLD void arena_chunks_release(uintptr_t a, unsigned chunks)
{
    struct iovec extent = { (void *)a, (size_t)chunks << HAK_CHUNK_SHIFT };
    arena_extents_release(&extent, 1);
}

HAK_COLD unsigned arena_pool_purge_next(struct iovec *extents, unsigned max, int *batched, int *sparse)
{
    *sparse = ARENA_PASS_NONE;
    pthread_mutex_lock(&pool_mutex);
    for (;;) {
        const struct policy *p = policy_now();
        /* Idle decay: a use came since the last decay, then none for [purge] idle ms: the cap
         * is 0 and nothing waits for [purge] delay, then the passes over regions come. */
        uint32_t uses = atomic_load(&pool_uses), idle_wait = UINT32_MAX;
        int decay = 0;
        if (p->purge_idle_ms && uses != purger_decayed) {
            uint32_t since = arena_now_ms() - atomic_load_explicit(&pool_used_ms, memory_order_relaxed);
            if (since >= p->purge_idle_ms)
                decay = 1;
            else
                idle_wait = p->purge_idle_ms - since;
        }
        /* Started for the decay alone, it leaves the purges past `retain` to the frees. */
        int purges = decay || arena_purger_purges();
        uint32_t age = 0;
        unsigned n = !purges ? 0 : arena_purge_collect(extents, max, decay ? 0 : p->purge_cap,
                                                       decay ? 0 : p->purge_delay_ms, &age);
        if (n) {
            *batched = HAK_PHASE95 && p->phase95;
            pool_unlock();
            return n;
        }
        if (decay) {
            purger_decayed = uses;
            *sparse = ARENA_PASS_IDLE;
            pool_unlock();
            return 0;
        }
        /* Phase 101: free pages inside regions are looked for now and then, also idle */
        uint32_t wait = purges ? arena_sparse_wait(p, arena_in_use()) : UINT32_MAX;
        if (wait == 0) {
            *sparse = ARENA_PASS_SPARSE;
            pool_unlock();
            return 0;
        }
        if (idle_wait < wait)
            wait = idle_wait;
        if (age == 0 && wait == UINT32_MAX) {
            purger_idle = 1;
            atomic_store(&purger_asleep, 1);
            /* a use counted before that store is seen here, one after it sees the store */
            if (!p->purge_idle_ms || atomic_load(&pool_uses) == purger_decayed)
                pthread_cond_wait(&purge_cv, &pool_mutex);
            atomic_store(&purger_asleep, 0);
            purger_idle = 0;
            continue;
        }
        /* Runs past `retain` are still young: purge them when they are due even if no
         * release comes (the program went idle).  With none waiting, only a sparse pass
         * is: a release must still wake the purger (purger_idle). */
        int idle = age == 0;
        if (idle || wait < age)
            age = wait;
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        uint64_t ns = (uint64_t)t.tv_nsec + ((uint64_t)age + 1) * 1000000u;
        t.tv_sec += (time_t)(ns / 1000000000u);
        t.tv_nsec = (long)(ns % 1000000000u);
        purger_idle = idle;
        pthread_cond_clockwait(&purge_cv, &pool_mutex, CLOCK_MONOTONIC, &t);
        purger_idle = 0;
    }
}

/* How long malloc_trim waits for the purger's batch in flight: it is on its way to the OS,
 * and a trim that returned before it left it resident (a purger descheduled between taking
 * a batch and its madvise, under load, left a trim past its bound). */
#define TRIM_WAIT_S 2

/* The free chunks purged now, down to `pad` bytes resident.  At exit (Phase 106) without
 * waiting for the purger's batch in flight, and only if the lock is free: exit may come
 * from a signal handler that interrupted this thread inside the pool, and then nothing is
 * given back rather than the exit hanging. */
static size_t pool_trim(size_t pad, size_t *left, int at_exit)
{
    const struct policy *p = policy_now();
    if (!at_exit)
        pthread_mutex_lock(&pool_mutex);
    else if (pthread_mutex_trylock(&pool_mutex) != 0)
        return 0;
    size_t purged = arena_purge_now(pad, HAK_PHASE95 && p->phase95);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += TRIM_WAIT_S;
    while (!at_exit && arena_busy() && pthread_cond_timedwait(&busy_cv, &pool_mutex, &until) == 0)
        ;
    *left = arena_resident_free();
    pool_unlock();
    if (purged)
        stats_region(1);
    return purged;
}

HAK_COLD size_t arena_trim(size_t pad, size_t *left)
{
    return pool_trim(pad, left, 0);
}

HAK_COLD void arena_exit_purge(void)
{
    size_t left;
    pool_trim(0, &left, 1);
}

HAK_COLD size_t arena_pool_resident_free(void)
{
    pthread_mutex_lock(&pool_mutex);
    size_t f = arena_resident_free();
    pool_unlock();
    return f;
}

unsigned arena_pool_busy(void)
{
    pthread_mutex_lock(&pool_mutex);
    unsigned n = arena_busy();
    pool_unlock();
    return n;
}

int arena_pool_purger_idle(void)
{
    pthread_mutex_lock(&pool_mutex);
    int idle = purger_idle;
    pool_unlock();
    return idle;
}

HAK_COLD void arena_pool_purge_done(const struct iovec *extents, unsigned n)
{
    pthread_mutex_lock(&pool_mutex);
    arena_purge_done(extents, n);
    pthread_cond_broadcast(&busy_cv);
    pool_unlock();
}

HAK_COLD int arena_chunks_extend(uintptr_t a, unsigned chunks, unsigned more)
{
    pthread_mutex_lock(&pool_mutex);
    int ok = arena_extend(a, chunks, more);
    pool_unlock();
    return ok;
}

HAK_COLD int arena_chunk_is_free(uintptr_t a)
{
    pthread_mutex_lock(&pool_mutex);
    int f = arena_chunk_free(a);
    pool_unlock();
    return f;
}

static uint64_t region_secret(uintptr_t r)
{
    uint64_t x = r ^ (uint64_t)(uintptr_t)&pool_mutex ^ 0x9E3779B97F4A7C15ull;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    return x | 1;
}

/* A region's header and map bytes at a, laid out as rc says; its tags (rc->ntags bytes)
 * are cleared unless the memory reads as zero already. */
static struct region *region_init(uintptr_t a, int clean, unsigned cls, const struct size_class *rc,
                                  unsigned live_tag, struct heap *h)
{
    struct region *r = (struct region *)a;
    size_t len = (size_t)rc->chunks << HAK_CHUNK_SHIFT;
    if (!clean)
        memset(r->tags, 0, rc->ntags);
    r->cls = (uint8_t)cls;
    r->gshift = rc->gshift;
    r->live_tag = (uint8_t)live_tag;
    r->gmask = (1u << rc->gshift) - 1;
    r->chunks = rc->chunks;
    r->bsize = rc->size;
    r->free = NULL;
    r->nhome = 0;
    r->home_pos = 0;
    r->used = 0;
    r->carved = 0;
    r->nblocks = rc->nblocks;
    r->blocks_off = rc->blocks_off;
    atomic_store_explicit(&r->remote, NULL, memory_order_relaxed);
    atomic_store_explicit(&r->remote_home, 0, memory_order_relaxed);
    r->next = r->prev = NULL;
    r->abandoned_at = REGION_NOT_ABANDONED;
    r->secret = region_secret(a);
    atomic_store(&r->owner, h);
    HAK_POISON((char *)r + rc->blocks_off, len - rc->blocks_off);
    if (!region_map_set(a, len, 1, 1)) {
        region_map_clear(a, len);
        os_unmap(r, len);
        return NULL;
    }
    /* Only now: a region on the sparse list and unmapped left a pass to write into it */
    arena_sparse_add(r);
    stats_region(0);
    return r;
}

HAK_COLD struct region *arena_region_take(unsigned cls, struct heap *h)
{
    const struct size_class *rc = &class_table[cls];
    int clean;
    /* Regions up to 128 KiB: one barely used costs little RSS populated, and their small
     * blocks would fault a page every few allocations. */
    int populate = HAK_PHASE96 && policy_now()->phase96 && rc->chunks <= 2;
    uintptr_t a = pool_get(rc->chunks, &clean, populate);
    return a ? region_init(a, clean, cls, rc, TAG_LIVE(cls), h) : NULL;
}

/* Phase 100: a span's layout as a class row would give it (region/span_layout.h): granules for
 * blocks, tags and lengths for "tags". */
static const struct size_class span_layout = {
    .size = SPAN_GRANULE, .chunks = SPAN_CHUNKS, .gshift = SPAN_GSHIFT, .default_route = ROUTE_MID,
    .blocks_off = (uint32_t)SPAN_BLOCKS_OFF, .nblocks = SPAN_NGRAN, .ntags = SPAN_NGRAN * 3u,
};

/* A span for the caller to bin as one free run.  A heap that takes one has used up the
 * free runs of those it has, so in a big heap (Phase 96) its pages are faulted in at once. */
HAK_COLD struct region *arena_span_take(struct heap *h)
{
    int clean;
    uintptr_t a = pool_get(SPAN_CHUNKS, &clean, HAK_PHASE96 && policy_now()->phase96);
    return a ? region_init(a, clean, HAK_CLS_SPAN, &span_layout, TAG_LIVE_SPAN, h) : NULL;
}

/* An empty region leaves its heap: its chunks go back to their arena, purged past the retained cap. */
HAK_COLD void arena_region_release(struct region *r)
{
    region_hold(r);                         /* Phase 101: a pass over it finishes first */
    arena_sparse_forget(r);
    region_map_clear((uintptr_t)r, (size_t)r->chunks << HAK_CHUNK_SHIFT);
    atomic_store_explicit(&r->owner, NULL, memory_order_relaxed);
    arena_chunks_release((uintptr_t)r, r->chunks);   /* unpoisons: any class may reuse them */
}

/* The abandoned lists, doubly linked through next/prev, under abandoned_mutex; `at`
 * names the list in the region (abandoned_at), so a region is unlinked without a search. */
static struct region **abandoned_list(struct region *r, unsigned at)
{
    if (r->cls == HAK_CLS_SPAN)
        return &abandoned_spans[at];
    return at == ABANDONED_FULL ? &abandoned_full[r->cls] : &abandoned_room[r->cls];
}

static void abandoned_push(struct region *r, unsigned at)
{
    struct region **head = abandoned_list(r, at);
    r->abandoned_at = (uint8_t)at;
    r->prev = NULL;
    r->next = *head;
    if (r->next)
        r->next->prev = r;
    __atomic_store_n(head, r, __ATOMIC_RELAXED);
    abandoned_n++;
}

static void abandoned_unlink(struct region *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        __atomic_store_n(abandoned_list(r, r->abandoned_at), r->next, __ATOMIC_RELAXED);
    if (r->next)
        r->next->prev = r->prev;
    r->abandoned_at = REGION_NOT_ABANDONED;
    r->next = r->prev = NULL;
    abandoned_n--;
}

/* Thread exit: the region keeps its live blocks and waits for a new owner.
 * Frees arriving meanwhile go to its remote list, which the adopter collects.  Whether it
 * has a block is read under the lock, after the owner is gone: a free that came first
 * shows as pending, one that comes after finds it listed (arena_abandoned_freed). */
HAK_COLD void arena_region_abandon(struct region *r)
{
    atomic_store(&r->owner, NULL);
    pthread_mutex_lock(&abandoned_mutex);
    abandoned_push(r, region_has_blocks(r) ? ABANDONED_ROOM : ABANDONED_FULL);
    pthread_mutex_unlock(&abandoned_mutex);
}

HAK_COLD void arena_span_abandon(struct region *r, uint32_t longest)
{
    atomic_store(&r->owner, NULL);
    unsigned k = longest ? 31u - (unsigned)__builtin_clz(longest) : 0;
    pthread_mutex_lock(&abandoned_mutex);
    /* a free since the owner left is pending now, or finds r listed */
    abandoned_push(r, region_remote_pending(r) ? SPAN_FREED : k < SPAN_FREED ? k : SPAN_FREED - 1);
    pthread_mutex_unlock(&abandoned_mutex);
}

HAK_COLD struct region *arena_span_adopt(struct heap *h, uint32_t want)
{
    /* list k's runs are all at least 2^k: from the first k with 2^k >= want, each fits */
    unsigned k0 = want > 1 ? 32u - (unsigned)__builtin_clz(want - 1) : 0;
    struct region *r = NULL;
    pthread_mutex_lock(&abandoned_mutex);
    if ((r = abandoned_spans[SPAN_FREED]) == NULL)
        for (unsigned k = k0; k < SPAN_FREED && r == NULL; k++)
            r = abandoned_spans[k];
    if (r)
        abandoned_unlink(r);
    pthread_mutex_unlock(&abandoned_mutex);
    if (r)
        atomic_store(&r->owner, h);         /* seq_cst, as arena_region_adopt's */
    return r;
}

void arena_abandoned_lock(void)   { pthread_mutex_lock(&abandoned_mutex); }
void arena_abandoned_unlock(void) { pthread_mutex_unlock(&abandoned_mutex); }

int arena_abandoned_listed(struct region *r)
{
    return r->abandoned_at != REGION_NOT_ABANDONED;
}

/* Under the lock, r listed (arena_abandoned_listed before the free). */
HAK_COLD void arena_abandoned_freed(struct region *r)
{
    unsigned to = r->cls == HAK_CLS_SPAN ? SPAN_FREED : ABANDONED_ROOM;
    if (r->abandoned_at != to) {
        abandoned_unlink(r);
        abandoned_push(r, to);
    }
}

/* Under the lock.  No one else counts r's blocks meanwhile: adopters unlink it under the
 * lock first, and a free racing the abandonment (before r is listed) is not taken here.
 * A free still on its way from before the abandonment has counted its block in `used`
 * and not yet in remote_home, so r is not empty to this check until it has. */
HAK_COLD int arena_abandoned_release_empty(struct region *r)
{
    /* With Phase 97 off, tiny blocks come home on the linked stack: counted, as no one pops
     * it under this lock (each such free walks the stack: that configuration only). */
    if (r->cls >= HAK_NTINY || !arena_abandoned_listed(r))
        return 0;
    uint32_t home = atomic_load_explicit(&r->remote_home, memory_order_relaxed);
    if (home > r->used || (atomic_load_explicit(&r->remote, memory_order_relaxed) == NULL
                           ? home != r->used : home + region_remote_stacked(r, r->used + 1u) != r->used))
        return 0;
    abandoned_unlink(r);
    arena_region_release(r);
    return 1;
}

HAK_COLD struct region *arena_region_adopt(unsigned cls, struct heap *h)
{
    if (__atomic_load_n(&abandoned_room[cls], __ATOMIC_RELAXED) == NULL)
        return NULL;
    pthread_mutex_lock(&abandoned_mutex);
    struct region *r = abandoned_room[cls];
    if (r)
        abandoned_unlink(r);
    pthread_mutex_unlock(&abandoned_mutex);
    if (r) {
        /* seq_cst store before the adopter's first collect, so a remote free
         * either lands before the collect or sees the new owner */
        atomic_store(&r->owner, h);
    }
    return r;
}
