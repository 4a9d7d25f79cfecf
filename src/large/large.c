/* Large and huge blocks: up to [large] arena_max, extents of arena chunks shared with the regions;
 * above, page-granular blocks carved from free ranges (large_cache.c) or mapped from the OS. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include "large.h"
#include "large_reg.h"
#include "large_cache.h"
#include "large_dense.h"
#include "../arena/arena.h"
#include "../os/os.h"
#include "../policy/policy.h"
#include "../prof/prof.h"
#include "../stats/stats.h"

static pthread_mutex_t large_mutex = PTHREAD_MUTEX_INITIALIZER;

/* The page cache changes only under the lock: leaving it hands its size to the statistics. */
static void large_mutex_release(void)
{
    stats_large_cache(lcache_bytes());
    pthread_mutex_unlock(&large_mutex);
}

void large_lock(void)   { pthread_mutex_lock(&large_mutex); }
void large_unlock(void) { large_mutex_release(); }
void large_reset_lock(void) { pthread_mutex_init(&large_mutex, NULL); }

/* [purge] large_cache, whole pages. */
static size_t large_cap_max(void)
{
    return (size_t)policy_now()->large_cache_bytes & ~(size_t)(OS_PAGE - 1);
}

/* The retention budget for free ranges, whole pages (the lock held): [purge] large_cache, and
 * never more than the live blocks that are mappings of their own.  Freed pages serve the
 * program's next buffers while it has buffers as big live; a program that frees its only big
 * one and goes on with others (input read and parsed, then tables built) keeps none of it
 * resident beside what it touches next (DESIGN.md, "Memory"; bench/sparse). */
static size_t large_cap(void)
{
    size_t live = large_reg_own_bytes() & ~(size_t)(OS_PAGE - 1);
    return live < large_cap_max() ? live : large_cap_max();
}

static void large_unmap_all(const struct lrange *drop, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        os_unmap((void *)drop[i].base, drop[i].len);
}

/* Back into the free ranges (or to the OS if the budget says so).  Takes the lock. */
static void large_release(struct lrange s, const struct lmaps *m)
{
    struct lrange drop[LCACHE_DROPS];
    unsigned nd;
    pthread_mutex_lock(&large_mutex);
    nd = lcache_put(s, m, large_cap(), drop);
    large_mutex_release();
    large_unmap_all(drop, nd);
}

/* Pages moved piece by piece, one kernel mapping at a time: no kernel refuses that, and
 * each arrives as the one mapping it was (m: src's pieces; they get new ids). */
static void large_move(uintptr_t src, struct lmaps *m, uintptr_t dst)
{
    size_t start = 0;
    for (unsigned i = 0; i < m->n; i++) {
        os_move_split((void *)(src + start), m->end[i] - start, (void *)(dst + start));
        start = m->end[i];
    }
    lmaps_moved(m);
}

/* How many mappings pages moved in at off of a block (pieces m) may span: LMAPS_MAX less
 * its pieces before off and the fresh one that stays after them. */
static unsigned large_room(const struct lmaps *m, size_t off)
{
    unsigned used = lmaps_count_head(m, off) + 1;
    return used < LMAPS_MAX ? LMAPS_MAX - used : 0;
}

/* The pages [off, len) of the block at base (pieces m, fresh from off on) still lack, moved
 * in rather than faulted (no copy, no fault): first from other free ranges, the most pages
 * first, so the resident free pages serve a block of any size, not only one that fits in a
 * single range; then from free arena chunks (arena_donate).  Only as many pieces come as
 * keep the block within LMAPS_MAX mappings.  Returns the bytes from base on that now have
 * pages. */
static size_t large_gather(uintptr_t base, size_t len, size_t off, struct lmaps *m)
{
    while (off < len) {
        struct lrange r;
        struct lmaps rm;
        pthread_mutex_lock(&large_mutex);
        int got = lcache_take_most(len - off, large_room(m, off), &r, &rm);
        large_mutex_release();
        if (!got)
            break;
        large_move(r.base, &rm, base + off);
        lmaps_overlay(m, off, &rm, LMAPS_MAX);
        off += r.len;
    }
    size_t runs[LMAPS_MAX];
    unsigned n = off < len ? arena_donate(base + off, len - off, runs, large_room(m, off)) : 0;
    for (unsigned k = 0; k < n; k++) {
        struct lmaps run;
        lmaps_fresh(&run, runs[k]);
        lmaps_overlay(m, off, &run, LMAPS_MAX);
        off += runs[k];
    }
    return off;
}

/* The budget holds again once an allocation has had its pick of the free ranges
 * (large_free leaves the block it freed last past it). */
static void large_trim_to_cap(void)
{
    struct lrange drop[LCACHE_DROPS];
    pthread_mutex_lock(&large_mutex);
    unsigned nd = lcache_trim(large_cap(), drop);
    large_mutex_release();
    large_unmap_all(drop, nd);
}

/* The pages for a block of len bytes at `align`, preferring pages a freed block left
 * resident: the best-fitting free range, else the largest range of one kernel mapping
 * grown by mremap, else a fresh mapping, with the other ranges' pages moved into what is
 * still fresh (only what they cannot cover faults).  *m: their pieces, one kernel mapping
 * each; *dirty: leading bytes that may hold old data.  The cache is trimmed to its budget
 * after. */
static int large_pages(size_t len, size_t align, struct lrange *s, struct lmaps *m, size_t *dirty)
{
    struct lrange grow, drop[LCACHE_DROPS];
    struct lmaps gm;
    int found, growing = 0;
    unsigned nd = 0;
    pthread_mutex_lock(&large_mutex);
    found = lcache_take(len, align, LMAPS_MAX, s, m);
    /* Grown into the block, a range puts its pages where the program may never touch: only
     * what the budget would keep anyway. */
    if (!found && align <= OS_PAGE && lcache_largest() <= large_cap())
        growing = lcache_take_largest(1, &grow, &gm);
    if (!growing)
        nd = lcache_trim(large_cap(), drop);
    large_mutex_release();
    large_unmap_all(drop, nd);
    if (found) {
        *dirty = s->len;
        return 1;
    }
    if (growing) {
        int e = errno;                  /* a refused mremap is not this malloc's failure */
        void *q = os_remap((void *)grow.base, grow.len, len);
        lmaps_fresh(m, len);
        if (q == NULL && (q = os_map(len)) != NULL) {
            large_move(grow.base, &gm, (uintptr_t)q);
            lmaps_overlay(m, 0, &gm, LMAPS_MAX);
        }
        errno = e;
        if (q) {
            s->base = (uintptr_t)q;
            s->len = len;
            *dirty = large_gather((uintptr_t)q, len, grow.len, m);
            large_trim_to_cap();
            return 1;
        }
        large_release(grow, &gm);
    }
    size_t maplen = os_page_round(len + (align > OS_PAGE ? align : 0));
    void *m0 = os_map(maplen);
    if (m0 == NULL)
        return 0;
    s->base = (uintptr_t)m0;
    s->len = maplen;
    lmaps_fresh(m, maplen);
    *dirty = align <= OS_PAGE ? large_gather((uintptr_t)m0, maplen, 0, m) : 0;
    return 1;
}

/* m: b's pieces, NULL for a block of the arenas. */
static int large_register(const struct large_block *b, const struct lmaps *m)
{
    pthread_mutex_lock(&large_mutex);
    int ok = large_reg_insert(b, m);
    large_mutex_release();
    return ok;
}

static size_t chunk_round(size_t n)
{
    return (n + HAK_CHUNK_SIZE - 1) & ~(HAK_CHUNK_SIZE - 1);
}

/* A block of the arenas: whole chunks, so it grows in place into free neighbours, and once
 * freed its pages serve regions of any class (and theirs it), under the purge policy. */
static void *large_alloc_chunks(size_t n, int zero)
{
    unsigned chunks = (unsigned)(chunk_round(n) >> HAK_CHUNK_SHIFT);
    int clean;
    uintptr_t a = arena_chunks_take(chunks, &clean);
    if (a == 0) {
        errno = ENOMEM;
        return NULL;
    }
    struct large_block b = { .ptr = a, .base = a, .maplen = (size_t)chunks << HAK_CHUNK_SHIFT, .arena = 1 };
    if (!region_map_set(a, b.maplen, MAP_LARGE, 0) || !large_register(&b, NULL)) {
        arena_chunks_release(a, chunks);
        errno = ENOMEM;
        return NULL;
    }
    large_dense_handout(a, n, clean ? a : a + os_page_round(n));
    if (zero && !clean)
        memset((void *)a, 0, n);
    stats_large(1, b.maplen);
    return (void *)a;
}

HAK_COLD void *large_alloc(size_t n, size_t align, int zero)
{
    if (align < 16)
        align = 16;
    if (n == 0)                 /* a block owns at least a page: a zero-length range is no block */
        n = 1;
    if (n > PTRDIFF_MAX - OS_PAGE || align > PTRDIFF_MAX - n - OS_PAGE) {
        errno = ENOMEM;
        return NULL;
    }
    if (align <= HAK_CHUNK_SIZE && n <= policy_now()->large_arena_max)
        return large_alloc_chunks(n, zero);
    struct lrange s;
    struct lmaps m;
    size_t dirty;
    if (!large_pages(os_page_round(n), align, &s, &m, &dirty))
        return NULL;
    struct large_block b = {
        .ptr = (s.base + align - 1) & ~(uintptr_t)(align - 1),
        .base = s.base,
        .maplen = s.len,
    };
    if (!region_map_set(b.base, b.maplen, MAP_LARGE, 0)) {
        os_unmap((void *)b.base, b.maplen);
        errno = ENOMEM;
        return NULL;
    }
    if (!large_register(&b, &m)) {
        os_unmap((void *)b.base, b.maplen);
        errno = ENOMEM;
        return NULL;
    }
    if (zero && b.base + dirty > b.ptr) {
        size_t z = b.base + dirty - b.ptr;
        memset((void *)b.ptr, 0, z < n ? z : n);
    }
    /* What no freed pages covered would fault in page by page: at once, if the program's
     * large blocks end up filled. */
    large_dense_handout(b.ptr, n, b.base + dirty > b.ptr ? b.base + dirty : b.ptr);
    stats_large(1, b.base + b.maplen - b.ptr);
    arena_note_use();                   /* idle decay: the arenas note their own blocks */
    return (void *)b.ptr;
}

HAK_COLD int large_free(void *p, const char *call)
{
    struct lrange drop[LCACHE_DROPS];
    unsigned nd = 0;
    int in_cache = 0;
    struct large_block b = { 0 };
    struct lmaps m;
    pthread_mutex_lock(&large_mutex);
    struct large_block *e = large_reg_find((uintptr_t)p);
    if (HAK_PHASE104 && e && e->base + e->maplen - e->ptr >= LARGE_DENSE_MIN) {
        /* Phase 104 looks at the block with mincore first, without the lock (no system
         * call is made with it held): the block is still the caller's. */
        uintptr_t ptr = e->ptr;
        size_t len = e->base + e->maplen - e->ptr;
        large_mutex_release();
        large_dense_freeing(ptr, len);
        pthread_mutex_lock(&large_mutex);
        e = large_reg_find((uintptr_t)p);
    }
    if (e) {
        b = *e;
        if (!b.arena)
            m = *large_reg_maps(e);
        struct lrange s = { e->base, e->maplen };
        /* The block freed last stays past the budget, by at most itself, until the next
         * allocation has had its pick: a program replacing a huge buffer (free, then
         * allocate) gets the pages it just freed however full the cache was. */
        stats_large(0, e->base + e->maplen - e->ptr);
        large_reg_remove(e);
        size_t cap = large_cap();
        if (b.arena)
            ;                           /* back to the arenas below, outside this lock */
        else if (s.len > large_cap_max() / 2)   /* a block this big would flush the whole budget */
            drop[nd++] = s;
        else                            /* kept whole, the others trimmed to the budget */
            nd = lcache_put(s, &m, cap + s.len, drop);
    } else {
        in_cache = lcache_contains((uintptr_t)p);
    }
    large_mutex_release();
    if (b.sampled)
        prof_forget(b.ptr);
    large_unmap_all(drop, nd);
    if (b.arena)
        arena_chunks_release(b.base, (unsigned)(b.maplen >> HAK_CHUNK_SHIFT));
    else if (e)
        arena_note_use();
    if (e == NULL) {
        in_cache = in_cache || arena_chunk_is_free((uintptr_t)p);
        class_misuse(call, p, in_cache ? "double free" : "invalid pointer (not allocated by hakmem)",
                    in_cache ? HAK_NCLASSES : -1);      /* a class row past the last: "large block" */
        return 0;
    }
    return 1;
}

HAK_COLD int large_mark_sampled(void *p, int on)
{
    int changed = 0;
    pthread_mutex_lock(&large_mutex);
    struct large_block *e = large_reg_find((uintptr_t)p);
    if (e && e->sampled != on) {
        e->sampled = (uint8_t)on;
        changed = 1;
    }
    large_mutex_release();
    return changed;
}

HAK_COLD size_t large_usable(void *p)
{
    size_t n = 0;
    pthread_mutex_lock(&large_mutex);
    struct large_block *e = large_reg_find((uintptr_t)p);
    if (e)
        n = e->base + e->maplen - e->ptr;
    large_mutex_release();
    return n;
}

/* Growing block b (pieces bm) into the free range s (of the new length, pieces sm), whose
 * pages are resident: b's pages move over the range's head (no copy; piece by piece), its
 * tail needs no fault; b's old range is left unmapped.  b is out of the registry; this
 * puts the result back. */
static void *large_move_into(struct large_block b, struct lmaps bm, struct lrange s, struct lmaps sm)
{
    large_move(b.base, &bm, s.base);
    lmaps_overlay(&sm, 0, &bm, LMAPS_MAX);
    b.base = b.ptr = s.base;
    b.maplen = s.len;
    large_register(&b, &sm);            /* cannot fail: b's own entry was just removed */
    return (void *)b.ptr;
}

/* The length a block of maplen bytes moves to when it grows to len: at least a quarter
 * more than it had (at most 16 MiB more), so a string appended to a few bytes at a time
 * moves once per quarter of its size rather than once per page; a program that grows
 * its blocks geometrically itself (a vector doubling) gets what it asks for. */
static size_t large_grow_len(size_t maplen, size_t len)
{
    size_t slack = maplen / 4 < ((size_t)16 << 20) ? maplen / 4 : ((size_t)16 << 20);
    if (len <= maplen || len >= maplen + slack)
        return len;
    return os_page_round(maplen + slack);
}

/* Resizing a block of the arenas (b, out of the registry; this puts it or its successor
 * back): shrinking gives the tail chunks back, growing takes the free chunks after it, and
 * failing that the block moves, copied, to a new one a quarter bigger than asked (so a
 * block grown a little at a time moves once per quarter of its size). */
static void *large_realloc_chunks(struct large_block b, size_t n)
{
    size_t want = chunk_round(n);       /* n <= PTRDIFF_MAX - OS_PAGE: no overflow */
    if (want < b.maplen) {
        arena_chunks_release(b.base + want, (unsigned)((b.maplen - want) >> HAK_CHUNK_SHIFT));
        b.maplen = want;
    } else if (want > b.maplen) {
        uintptr_t tail = b.base + b.maplen;
        size_t more = want - b.maplen;
        if (n <= policy_now()->large_arena_max
            && arena_chunks_extend(b.base, (unsigned)(b.maplen >> HAK_CHUNK_SHIFT),
                                         (unsigned)(more >> HAK_CHUNK_SHIFT))) {
            if (region_map_set(tail, more, MAP_LARGE, 0)) {
                b.maplen = want;
                large_register(&b, NULL);   /* cannot fail: b's own entry was just removed */
                return (void *)b.ptr;
            }
            arena_chunks_release(tail, (unsigned)(more >> HAK_CHUNK_SHIFT));
        }
        int err = errno;                /* the roomy try failing is not the caller's failure */
        void *q = large_alloc(large_grow_len(b.maplen, n), 0, 0);
        errno = err;
        if (q == NULL)
            q = large_alloc(n, 0, 0);
        large_register(&b, NULL);
        if (q != NULL) {
            memcpy(q, (void *)b.ptr, b.maplen);
            large_free((void *)b.ptr, "realloc");
        }
        return q;
    }
    large_register(&b, NULL);
    return (void *)b.ptr;
}

/* Growing or shrinking a large block whose pointer starts its pages: into the free range
 * right after it when there is one (no copy, pages already there), else into the
 * best-fitting free range (pages moved, no fault), else mremap, which moves the pages
 * without copying and faults the new tail.  Returns NULL when none applies. */
HAK_COLD void *large_realloc(void *p, size_t n)
{
    if (n > PTRDIFF_MAX - OS_PAGE)
        return NULL;
    size_t len = os_page_round(n);
    pthread_mutex_lock(&large_mutex);
    struct large_block *e = large_reg_find((uintptr_t)p);
    if (e == NULL || e->ptr != e->base) {
        large_mutex_release();
        return NULL;
    }
    if (e->arena) {
        struct large_block b = *e;
        large_reg_remove(e);
        large_mutex_release();
        return large_realloc_chunks(b, n);
    }
    /* Pages joined to the block's bring their kernel mappings: no more than it has room for. */
    struct lmaps bm = *large_reg_maps(e), tm;
    unsigned room = LMAPS_MAX - lmaps_count(&bm);
    if (len > e->maplen && room && lcache_take_after(e->base + e->maplen, len - e->maplen, room, &tm)) {
        lmaps_overlay(large_reg_maps(e), e->maplen, &tm, LMAPS_MAX);
        large_reg_resized(e, len);
        large_mutex_release();
        return p;
    }
    struct large_block b = *e;
    struct lrange s;
    size_t glen = large_grow_len(e->maplen, len);
    int into_range = len > e->maplen && room
                     && (lcache_take(glen, OS_PAGE, room, &s, &tm) || lcache_take(len, OS_PAGE, room, &s, &tm));
    large_reg_remove(e);
    large_mutex_release();
    if (into_range)
        return large_move_into(b, bm, s, tm);
    int err = errno;
    len = glen;
    int one = lmaps_count(&bm) == 1;
    void *q = one ? os_remap((void *)b.base, b.maplen, len) : NULL;  /* resizes one mapping only */
    if (q) {
        lmaps_fresh(&bm, len);
    } else if (!one && len <= b.maplen) {
        if (len < b.maplen)
            os_unmap((void *)(b.base + len), b.maplen - len);
        lmaps_split(&bm, len, &bm, NULL);
        q = (void *)b.base;
    } else if (len > b.maplen && room && (q = os_map(len)) != NULL) {
        struct lmaps m;
        lmaps_fresh(&m, len);
        large_move(b.base, &bm, (uintptr_t)q);
        lmaps_overlay(&m, 0, &bm, LMAPS_MAX);
        bm = m;
    }
    errno = err;    /* a refused mremap is not the caller's failure: it falls back to a copy */
    if (q) {
        b.base = b.ptr = (uintptr_t)q;
        b.maplen = len;
        region_map_set(b.base, len, MAP_LARGE, 0);
    }
    /* On failure the old block stays registered and intact, as realloc requires. */
    large_register(&b, &bm);
    return q;
}

/* malloc_trim: the page cache down to `keep` bytes, now.  Returns the bytes unmapped. */
static size_t large_trim_to(size_t keep, int at_exit)
{
    struct lrange drop[LCACHE_DROPS];
    if (!at_exit)
        pthread_mutex_lock(&large_mutex);
    else if (pthread_mutex_trylock(&large_mutex) != 0)
        return 0;                           /* as arena_exit_purge: never hang an exit */
    unsigned nd = lcache_trim(keep & ~(size_t)(OS_PAGE - 1), drop);
    large_mutex_release();
    size_t bytes = 0;
    for (unsigned i = 0; i < nd; i++)
        bytes += drop[i].len;
    large_unmap_all(drop, nd);
    return bytes;
}

HAK_COLD size_t large_trim(size_t keep)
{
    return large_trim_to(keep, 0);
}

HAK_COLD void large_exit_trim(void)
{
    large_trim_to(0, 1);
}

HAK_COLD void large_idle_trim(void)
{
    large_trim_to(0, 0);
}

size_t large_cached_bytes(void)
{
    pthread_mutex_lock(&large_mutex);
    size_t n = lcache_bytes();
    large_mutex_release();
    return n;
}
