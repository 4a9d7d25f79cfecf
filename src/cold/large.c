/* Large and huge blocks: one mmap each, a registry that says exactly which pointers are live,
 * and a small cache (bounded in count and bytes) so repeated large malloc/free skips the kernel. */
#include <errno.h>
#include <string.h>
#include "cold.h"
#include "os.h"
#include "../region/map.h"

struct large_block {
    uintptr_t ptr;        /* what the user holds; 0 = empty registry slot */
    uintptr_t base;       /* the mapping */
    size_t    maplen;
};

#define CACHE_MAX 64

static pthread_mutex_t large_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct large_block *reg;          /* open addressing, linear probing, power-of-two size */
static size_t reg_cap, reg_n;
static struct large_block cache[CACHE_MAX];   /* freed mappings, oldest first */
static unsigned cache_n;
static size_t cache_bytes;

void large_lock(void)   { pthread_mutex_lock(&large_mutex); }
void large_unlock(void) { pthread_mutex_unlock(&large_mutex); }
void large_reset_lock(void) { pthread_mutex_init(&large_mutex, NULL); }

static size_t reg_hash(uintptr_t p)
{
    return (size_t)(((p >> 12) * 0x9E3779B97F4A7C15ull) >> 17) & (reg_cap - 1);
}

static struct large_block *reg_find(uintptr_t p)
{
    if (reg_cap == 0)
        return NULL;
    for (size_t i = reg_hash(p);; i = (i + 1) & (reg_cap - 1)) {
        if (reg[i].ptr == p)
            return &reg[i];
        if (reg[i].ptr == 0)
            return NULL;
    }
}

static int reg_insert(const struct large_block *b)
{
    if ((reg_n + 1) * 2 > reg_cap) {
        size_t ncap = reg_cap ? reg_cap * 2 : 256;
        struct large_block *old = reg, *nr = os_map(ncap * sizeof *nr);
        size_t ocap = reg_cap;
        if (nr == NULL)
            return 0;
        reg = nr;
        reg_cap = ncap;
        for (size_t i = 0; i < ocap; i++) {
            if (old[i].ptr) {
                size_t j = reg_hash(old[i].ptr);
                while (reg[j].ptr)
                    j = (j + 1) & (reg_cap - 1);
                reg[j] = old[i];
            }
        }
        if (old)
            os_unmap(old, ocap * sizeof *old);
    }
    size_t j = reg_hash(b->ptr);
    while (reg[j].ptr)
        j = (j + 1) & (reg_cap - 1);
    reg[j] = *b;
    reg_n++;
    return 1;
}

/* Backward-shift deletion keeps probe chains intact without tombstones. */
static void reg_remove(struct large_block *e)
{
    size_t i = (size_t)(e - reg);
    for (size_t j = (i + 1) & (reg_cap - 1); reg[j].ptr; j = (j + 1) & (reg_cap - 1)) {
        size_t h = reg_hash(reg[j].ptr);
        if (((j - h) & (reg_cap - 1)) >= ((j - i) & (reg_cap - 1))) {
            reg[i] = reg[j];
            i = j;
        }
    }
    reg[i].ptr = 0;
    reg_n--;
}

static size_t page_round(size_t n)
{
    return (n + OS_PAGE - 1) & ~(size_t)(OS_PAGE - 1);
}

/* Best-fitting cached mapping that can hold n bytes at `align`, not more than twice too big. */
static int cache_take(size_t n, size_t align, struct large_block *out)
{
    int best = -1;
    for (unsigned i = 0; i < cache_n; i++) {
        uintptr_t p = (cache[i].base + align - 1) & ~(uintptr_t)(align - 1);
        size_t room = cache[i].base + cache[i].maplen - p;
        if (p < cache[i].base + cache[i].maplen && room >= n && cache[i].maplen / 2 <= page_round(n) + align
            && (best < 0 || cache[i].maplen < cache[best].maplen))
            best = (int)i;
    }
    if (best < 0)
        return 0;
    *out = cache[best];
    out->ptr = (out->base + align - 1) & ~(uintptr_t)(align - 1);
    cache_bytes -= cache[best].maplen;
    memmove(&cache[best], &cache[best + 1], (cache_n - (unsigned)best - 1) * sizeof cache[0]);
    cache_n--;
    return 1;
}

HAK_COLD void *large_alloc(size_t n, size_t align, int zero)
{
    if (align < 16)
        align = 16;
    if (n > PTRDIFF_MAX || align > PTRDIFF_MAX - n) {
        errno = ENOMEM;
        return NULL;
    }
    struct large_block b;
    int cached;
    pthread_mutex_lock(&large_mutex);
    cached = cache_take(n, align, &b);
    pthread_mutex_unlock(&large_mutex);
    if (!cached) {
        size_t len = page_round(n + (align > OS_PAGE ? align : 0));
        void *m = os_map(len);
        if (m == NULL)
            return NULL;
        b.base = (uintptr_t)m;
        b.maplen = len;
        b.ptr = (b.base + align - 1) & ~(uintptr_t)(align - 1);
    }
    if (!region_map_set(b.base, b.maplen, MAP_LARGE, 0)) {
        os_unmap((void *)b.base, b.maplen);
        errno = ENOMEM;
        return NULL;
    }
    pthread_mutex_lock(&large_mutex);
    int ok = reg_insert(&b);
    pthread_mutex_unlock(&large_mutex);
    if (!ok) {
        os_unmap((void *)b.base, b.maplen);
        errno = ENOMEM;
        return NULL;
    }
    if (zero && cached)
        memset((void *)b.ptr, 0, n);
    cold_obs_large(1, b.base + b.maplen - b.ptr);
    return (void *)b.ptr;
}

/* Caller holds the lock.  Keeps the mapping if it fits the cache bounds. */
static void cache_put_locked(struct large_block b, struct large_block *evicted, unsigned *nevicted)
{
    size_t cap = (size_t)policy_now()->large_cache_bytes;
    if (b.maplen > cap / 2) {
        evicted[(*nevicted)++] = b;
        return;
    }
    while (cache_n && (cache_n == CACHE_MAX || cache_bytes + b.maplen > cap)) {
        evicted[(*nevicted)++] = cache[0];
        cache_bytes -= cache[0].maplen;
        memmove(&cache[0], &cache[1], (cache_n - 1) * sizeof cache[0]);
        cache_n--;
    }
    cache[cache_n++] = b;
    cache_bytes += b.maplen;
}

HAK_COLD int large_free(void *p, const char *call)
{
    struct large_block evicted[CACHE_MAX + 1];
    unsigned nev = 0;
    int in_cache = 0;
    pthread_mutex_lock(&large_mutex);
    struct large_block *e = reg_find((uintptr_t)p);
    if (e) {
        struct large_block b = *e;
        reg_remove(e);
        cold_obs_large(0, b.base + b.maplen - b.ptr);
        cache_put_locked(b, evicted, &nev);
    } else {
        for (unsigned i = 0; i < cache_n; i++)
            in_cache |= cache[i].ptr == (uintptr_t)p || cache[i].base == (uintptr_t)p;
    }
    pthread_mutex_unlock(&large_mutex);
    for (unsigned i = 0; i < nev; i++)
        os_unmap((void *)evicted[i].base, evicted[i].maplen);
    if (e == NULL) {
        cold_misuse(call, p, in_cache ? "double free" : "invalid pointer (not allocated by hakmem)",
                    in_cache ? HAK_NCLASSES : -1);      /* a class row past the last: "large block" */
        return 0;
    }
    return 1;
}

HAK_COLD size_t large_usable(void *p)
{
    size_t n = 0;
    pthread_mutex_lock(&large_mutex);
    struct large_block *e = reg_find((uintptr_t)p);
    if (e)
        n = e->base + e->maplen - e->ptr;
    pthread_mutex_unlock(&large_mutex);
    return n;
}

/* Growing or shrinking a large block whose pointer starts its mapping: mremap
 * moves the pages without copying.  Returns NULL when that does not apply. */
HAK_COLD void *large_realloc(void *p, size_t n)
{
    if (n > PTRDIFF_MAX - OS_PAGE)
        return NULL;
    size_t len = page_round(n);
    pthread_mutex_lock(&large_mutex);
    struct large_block *e = reg_find((uintptr_t)p);
    if (e == NULL || e->ptr != e->base) {
        pthread_mutex_unlock(&large_mutex);
        return NULL;
    }
    struct large_block b = *e;
    reg_remove(e);
    pthread_mutex_unlock(&large_mutex);
    void *q = os_remap((void *)b.base, b.maplen, len);
    if (q) {
        b.base = b.ptr = (uintptr_t)q;
        b.maplen = len;
        region_map_set(b.base, len, MAP_LARGE, 0);
    }
    /* On failure the old block stays registered and intact, as realloc requires. */
    pthread_mutex_lock(&large_mutex);
    reg_insert(&b);
    pthread_mutex_unlock(&large_mutex);
    return q;
}

size_t large_cached_bytes(void)
{
    pthread_mutex_lock(&large_mutex);
    size_t n = cache_bytes;
    pthread_mutex_unlock(&large_mutex);
    return n;
}
