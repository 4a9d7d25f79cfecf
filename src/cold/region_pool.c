/* Whole regions moving between heaps, the global pool and the OS: carving, releasing,
 * purging (the retained-memory cap), abandoning at thread exit and adopting. */
#include <string.h>
#include "cold.h"
#include "os.h"
#include "../region/map.h"
#include "../route/classes.h"

/* Pool lists by region size: 1, 2, 4 .. 64 chunks.  Pooled regions keep no
 * header (their memory may be purged), so the pool is an array of addresses;
 * bit 0 of an entry says the region's pages were purged (or never touched). */
#define POOL_LISTS     7
#define POOL_VA_CAP    ((size_t)256 << 20)     /* beyond this, empty regions are unmapped */
#define TINY_BATCH     16                      /* tiny regions carved per mmap */

struct pool_list {
    uintptr_t *ent;
    size_t n, cap;
};

static pthread_mutex_t pool_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct pool_list pool[POOL_LISTS];
static size_t pool_bytes, pool_unpurged;
static uintptr_t tiny_fresh;                   /* untouched tiny regions from the last batch */
static unsigned tiny_fresh_n;

static pthread_mutex_t abandoned_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct region *_Atomic abandoned[HAK_NCLASSES];
static size_t abandoned_n;

void region_pool_lock(void)
{
    pthread_mutex_lock(&abandoned_mutex);
    pthread_mutex_lock(&pool_mutex);
}

void region_pool_unlock(void)
{
    pthread_mutex_unlock(&pool_mutex);
    pthread_mutex_unlock(&abandoned_mutex);
}

void region_pool_reset_locks(void)
{
    pthread_mutex_init(&pool_mutex, NULL);
    pthread_mutex_init(&abandoned_mutex, NULL);
}

static unsigned pool_index(unsigned chunks)
{
    return 31u - (unsigned)__builtin_clz(chunks);
}

static int pool_push(struct pool_list *l, uintptr_t e)
{
    if (l->n == l->cap) {
        size_t ncap = l->cap ? l->cap * 2 : 512;
        uintptr_t *ne = os_map(ncap * sizeof *ne);
        if (ne == NULL)
            return 0;
        if (l->ent) {
            memcpy(ne, l->ent, l->n * sizeof *ne);
            os_unmap(l->ent, l->cap * sizeof *ne);
        }
        l->ent = ne;
        l->cap = ncap;
    }
    l->ent[l->n++] = e;
    return 1;
}

/* Takes an empty region of `chunks` from the pool or the OS; *clean says its memory reads as zero. */
static HAK_COLD uintptr_t pool_get(unsigned chunks, int *clean)
{
    size_t size = (size_t)chunks << HAK_CHUNK_SHIFT;
    struct pool_list *l = &pool[pool_index(chunks)];
    uintptr_t r = 0;
    pthread_mutex_lock(&pool_mutex);
    if (l->n) {
        uintptr_t e = l->ent[--l->n];
        r = e & ~(uintptr_t)1;
        *clean = (int)(e & 1);
        pool_bytes -= size;
        if (!*clean)
            pool_unpurged -= size;
    } else if (chunks == 1 && tiny_fresh_n) {
        r = tiny_fresh;
        tiny_fresh += HAK_CHUNK_SIZE;
        tiny_fresh_n--;
        *clean = 1;
    }
    pthread_mutex_unlock(&pool_mutex);
    if (r)
        return r;
    *clean = 1;
    if (chunks == 1) {
        char *batch = os_map_aligned(TINY_BATCH * HAK_CHUNK_SIZE, HAK_CHUNK_SIZE);
        if (batch == NULL)
            return 0;
        int keep_rest;
        pthread_mutex_lock(&pool_mutex);
        keep_rest = tiny_fresh_n == 0;
        if (keep_rest) {
            tiny_fresh = (uintptr_t)batch + HAK_CHUNK_SIZE;
            tiny_fresh_n = TINY_BATCH - 1;
        }
        pthread_mutex_unlock(&pool_mutex);
        if (!keep_rest)     /* another thread refilled meanwhile: keep one region, unmap the rest */
            os_unmap(batch + HAK_CHUNK_SIZE, (TINY_BATCH - 1) * HAK_CHUNK_SIZE);
        return (uintptr_t)batch;
    }
    return (uintptr_t)os_map_aligned(size, HAK_CHUNK_SIZE);
}

static uint64_t region_secret(uintptr_t r)
{
    uint64_t x = r ^ (uint64_t)(uintptr_t)&pool_mutex ^ 0x9E3779B97F4A7C15ull;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    return x | 1;
}

HAK_COLD struct region *region_pool_take(unsigned cls, struct heap *h)
{
    const struct route_class *rc = &route_classes[cls];
    int clean;
    uintptr_t a = pool_get(rc->chunks, &clean);
    if (a == 0)
        return NULL;
    struct region *r = (struct region *)a;
    if (!clean)
        memset(r->tags, 0, rc->ntags);
    r->cls = (uint8_t)cls;
    r->gshift = rc->gshift;
    r->live_tag = (uint8_t)TAG_LIVE(cls);
    r->gmask = (1u << rc->gshift) - 1;
    r->chunks = rc->chunks;
    r->bsize = rc->size;
    r->tag_lim = rc->ntags;
    r->free = NULL;
    r->used = 0;
    r->carved = 0;
    r->nblocks = rc->nblocks;
    r->blocks_off = rc->blocks_off;
    atomic_store_explicit(&r->remote, NULL, memory_order_relaxed);
    r->next = r->prev = NULL;
    r->secret = region_secret(a);
    atomic_store(&r->owner, h);
    cold_obs_region(0);
    HAK_POISON((char *)r + rc->blocks_off, ((size_t)rc->chunks << HAK_CHUNK_SHIFT) - rc->blocks_off);
    if (!region_map_set(a, (size_t)rc->chunks << HAK_CHUNK_SHIFT, 1, 1)) {
        region_map_clear(a, (size_t)rc->chunks << HAK_CHUNK_SHIFT);
        os_unmap(r, (size_t)rc->chunks << HAK_CHUNK_SHIFT);
        return NULL;
    }
    return r;
}

/* An empty region leaves its heap.  Purged past the retained cap, unmapped past the pool cap. */
HAK_COLD void region_pool_release(struct region *r)
{
    size_t size = (size_t)r->chunks << HAK_CHUNK_SHIFT;
    uintptr_t a = (uintptr_t)r;
    unsigned chunks = r->chunks;
    region_map_clear(a, size);
    atomic_store_explicit(&r->owner, NULL, memory_order_relaxed);
    HAK_UNPOISON(r, size);      /* the pages may be unmapped and reused by anyone */
    pthread_mutex_lock(&pool_mutex);
    if (pool_bytes + size > POOL_VA_CAP) {
        pthread_mutex_unlock(&pool_mutex);
        os_unmap(r, size);
        return;
    }
    int purge = pool_unpurged + size > policy_now()->purge_cap;
    if (!pool_push(&pool[pool_index(chunks)], a | (uintptr_t)purge)) {
        pthread_mutex_unlock(&pool_mutex);
        os_unmap(r, size);
        return;
    }
    pool_bytes += size;
    if (!purge)
        pool_unpurged += size;
    else
        os_purge(r, size);     /* under the lock: a taker must not see it before it is zero */
    if (purge)
        cold_obs_region(1);
    pthread_mutex_unlock(&pool_mutex);
}

/* Thread exit: the region keeps its live blocks and waits for a new owner.
 * Frees arriving meanwhile go to its remote list, which the adopter collects. */
HAK_COLD void region_abandon(struct region *r)
{
    atomic_store(&r->owner, NULL);
    pthread_mutex_lock(&abandoned_mutex);
    r->prev = NULL;
    r->next = atomic_load_explicit(&abandoned[r->cls], memory_order_relaxed);
    if (r->next)
        r->next->prev = r;
    atomic_store_explicit(&abandoned[r->cls], r, memory_order_relaxed);
    abandoned_n++;
    pthread_mutex_unlock(&abandoned_mutex);
}

HAK_COLD struct region *region_adopt(unsigned cls, struct heap *h)
{
    if (atomic_load_explicit(&abandoned[cls], memory_order_relaxed) == NULL)
        return NULL;
    pthread_mutex_lock(&abandoned_mutex);
    struct region *r = atomic_load_explicit(&abandoned[cls], memory_order_relaxed);
    if (r) {
        atomic_store_explicit(&abandoned[cls], r->next, memory_order_relaxed);
        if (r->next)
            r->next->prev = NULL;
        abandoned_n--;
    }
    pthread_mutex_unlock(&abandoned_mutex);
    if (r) {
        r->next = r->prev = NULL;
        /* seq_cst store before the adopter's first collect, so a remote free
         * either lands before the collect or sees the new owner */
        atomic_store(&r->owner, h);
    }
    return r;
}
