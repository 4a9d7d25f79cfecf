/* The malloc-family entry points: thin wrappers over the hot paths in api/hot.h.
 * With override on, the standard names are aliases of the hak_* ones (one body, two names). */
#define _GNU_SOURCE             /* RTLD_DEFAULT */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <string.h>
#ifndef HAK_OVERRIDE
#define HAK_OVERRIDE 0
#endif
#include "../../include/hakmem.h"
#include "hot.h"
#include "stats.h"
#ifndef HAK_PROF
#define HAK_PROF 0
#endif

#if HAK_PROF
#include "sampler.h"
/* The profiling library (libhakmem-prof.so): every block counts its bytes down the thread's
 * countdown, and the one that runs it out is sampled.  libhakmem.so compiles none of it. */
#define PROF_DUE(n) unlikely((api_prof_left = (int64_t)((uint64_t)api_prof_left - (n))) < 0)
#define PROF_COUNT(p, n) do { if (PROF_DUE(n)) api_prof_sample(p, n); } while (0)
#else
#define PROF_COUNT(p, n) ((void)0)
#endif

/* Tiny sizes the inline slots missed: the TLIST route's per-thread list, else cold. */
HAK_NOINLINE void *api_malloc_tiny_miss(size_t n, struct heap *h)
{
    unsigned cls;
    unsigned route = route_lookup_tiny(&h->snap, n, &cls);
    if (route >= ROUTE_TLIST) {
        struct list_bin *l = &h->lists[cls];
        void *p = l->head;
        if (likely(p != NULL)) {
            struct region *r = region_of_tiny(p);
            l->head = region_link_load(r, p, 0);
            l->count--;
            OBS_INC(h, allocs, cls);
            return hot_tag_live(h, r, p);
        }
    }
    return heap_malloc_slow(h, n);
}

/* Mid sizes by class (Phase 100 off, and memalign's power-of-two sizes): mid classes keep
 * no thread cache, so a hit is a block of the class's current region (its home blocks,
 * then fresh carving unless other threads have given blocks back).  Everything else
 * (remote frees to collect, another region, a new policy: its route byte reads
 * ROUTE_NONE) is cold; `aligned` keeps the class there too, whatever the policy. */
static void *mid_class(size_t n, struct heap *h, int aligned)
{
    unsigned cls = class_of_size(n);
    struct region *r = h->regions[cls].cur;
    if (likely(r != NULL) && likely(route_of_class(&h->snap, cls) != ROUTE_NONE)) {
        void *p = region_home_pop(r);
        if (likely(p != NULL)
            || (r->carved < r->nblocks && !atomic_load_explicit(&r->remote, memory_order_relaxed))) {
            if (p == NULL)
                p = (char *)r + r->blocks_off + (size_t)r->carved++ * r->bsize;
            HAK_STORE_HINT(r->used, (uint16_t)(r->used + 1));
            OBS_INC(h, allocs, cls);
            return hot_tag_live(h, r, p);
        }
    }
    return aligned ? heap_malloc_class_slow(h, n) : heap_malloc_slow(h, n);
}

/* Mid blocks come from the heap's regions and spans, which a visit may be taking in
 * (cold/visit.c): inside heap_enter and heap_leave. */
static void *api_malloc_mid_class(size_t n, struct heap *h, int aligned)
{
    uint32_t e = heap_enter();
    void *p = mid_class(n, h, aligned);
    heap_leave(e);
    return p;
}

/* Mid sizes, out of line so malloc's hot code stays small: with Phase 100 from the
 * thread's spans (a publisher clears the flag, sending the next call the class way,
 * which finds its route invalidated and refreshes), else from the size's class. */
HAK_NOINLINE void *api_malloc_mid(size_t n, struct heap *h)
{
    uint32_t e = heap_enter();
    void *p = HAK_PHASE100 && likely(HAK_LOAD_RELAXED(h->snap.phase100)) ? span_malloc(n, h)
                                                                          : mid_class(n, h, 0);
    heap_leave(e);
    return p;
}

/* A tiny region the hot free emptied leaves the heap's lists, which a visit may be walking. */
HAK_NOINLINE void api_region_emptied(struct heap *h, struct region *r)
{
    uint32_t e = heap_enter();
    heap_region_emptied(h, r);
    heap_leave(e);
}

/* The tag turns free only inside: a visit merging the block's neighbours would take a
 * free tag for a run in a bin. */
HAK_NOINLINE void api_free_span(struct heap *h, struct region *r, void *p, uint8_t *tag)
{
    uint32_t e = heap_enter();
    __atomic_store_n(tag, (uint8_t)TAG_FREE, __ATOMIC_RELAXED);     /* the purger reads span tags */
    OBS_INC(h, frees, TAG_CLASS(TAG_LIVE_SPAN));
    span_free(h, r, p);
    heap_leave(e);
}

HAK_NOINLINE void api_free_home(struct heap *h, struct region *r, void *p)
{
    uint32_t e = heap_enter();
    heap_put_home(h, r, p);
    heap_leave(e);
}

#if HAK_HARDENED
/* Hardened builds: every region block carries 16 canary bytes right after the requested
 * size, and the requested size in its last 4 bytes; free and realloc check both, so a
 * write of 1-16 bytes past the end is caught.  Large blocks carry none (page-granular). */
#define CANARY_EXTRA 24

static void *canary_arm(void *p, size_t n)
{
    unsigned b = region_map_get((uintptr_t)p);
    if (p == NULL || n > HAK_MID_MAX - CANARY_EXTRA || !region_map_is_region(b))
        return p;                        /* large blocks carry no canary */
    struct region *r = region_from_map((uintptr_t)p, b);
    uint64_t c = r->secret ^ (uintptr_t)p;
    uint32_t n32 = (uint32_t)n;
    memcpy((char *)p + n, &c, sizeof c);
    memcpy((char *)p + n + 8, &c, sizeof c);
    memcpy((char *)p + region_block_size(r, p) - 4, &n32, sizeof n32);
    return p;
}

/* Requested size of a live region block, or SIZE_MAX after reporting an overflow. */
static size_t canary_size(struct region *r, void *p, const char *call)
{
    uint32_t n;
    uint64_t c = r->secret ^ (uintptr_t)p, x, y;
    size_t bsize = region_block_size(r, p);
    memcpy(&n, (char *)p + bsize - 4, sizeof n);
    if (n <= bsize - CANARY_EXTRA) {
        memcpy(&x, (char *)p + n, sizeof x);
        memcpy(&y, (char *)p + n + 8, sizeof y);
        if (x == c && y == c)
            return n;
    }
    class_misuse(call, p, "heap overflow: bytes written past the end of the block", r->cls);
    return SIZE_MAX;
}

/* Every region block is armed; sizes whose canary would not fit a mid class go large. */
static void *alloc_bytes(size_t n)
{
    if (n <= HAK_MID_MAX - CANARY_EXTRA)
        return canary_arm(hot_malloc(n + CANARY_EXTRA), n);
    if (n <= HAK_MID_MAX) {
        init_process();
        return large_alloc(n, 0, 0);
    }
    return hot_malloc(n);
}

static void free_block(void *p)
{
    uintptr_t a = (uintptr_t)p;
    unsigned b = region_map_get(a);
    uint8_t *t;
    if (region_map_is_region(b)) {
        struct region *r = region_from_map(a, b);
        if ((region_tag_check_live(r, a, &t) || *t == TAG_SAMPLED) && canary_size(r, p, "free") == SIZE_MAX)
            return;                     /* refused: the block's neighbours may be damaged */
    }
    hot_free(p);
}
#else
#define CANARY_EXTRA 0
#define alloc_bytes(n) hot_malloc(n)
#define free_block(p) hot_free(p)
#define canary_arm(p, n) (p)
#endif

#if HAK_PROF
/* Out of line, so malloc's own code gains only the countdown. */
static HAK_COLD void *malloc_sampled(size_t n)
{
    void *p = alloc_bytes(n);
    api_prof_sample(p, n);
    return p;
}
#endif

HAK_EXPORT HAK_ENTRY void *hak_malloc(size_t size)
{
#if HAK_PROF
    if (PROF_DUE(size))
        return malloc_sampled(size);
#endif
    return alloc_bytes(size);
}

HAK_EXPORT HAK_ENTRY void hak_free(void *ptr)
{
    free_block(ptr);
}

HAK_EXPORT void *hak_calloc(size_t nmemb, size_t size)
{
    size_t n;
    if (unlikely(__builtin_mul_overflow(nmemb, size, &n))) {
        errno = ENOMEM;
        return NULL;
    }
    void *p;
    if (n > HAK_MID_MAX) {
        init_process();
        p = large_alloc(n, 0, 1);
    } else {
        p = alloc_bytes(n);
        if (likely(p != NULL))
            memset(p, 0, n);
    }
    PROF_COUNT(p, n);
    return p;
}

/* Usable size of a live block and, in *room, the most it can hold in place; SIZE_MAX
 * after reporting misuse under `call`. */
static size_t block_usable(void *p, const char *call, size_t *room)
{
    uintptr_t a = (uintptr_t)p;
    unsigned b = region_map_get(a);
    if (region_map_is_region(b)) {
        struct region *r = region_from_map(a, b);
        uint8_t *t;
        if (likely(region_tag_check_live(r, a, &t)) || *t == TAG_SAMPLED) {
            size_t bsize = region_block_size(r, p);
            *room = bsize - CANARY_EXTRA;
#if HAK_HARDENED
            return canary_size(r, p, call);
#else
            return bsize;
#endif
        }
        region_report_block(call, r, a, *t);
        return SIZE_MAX;
    }
    size_t n = b == MAP_LARGE ? large_usable(p) : 0;
    if (n == 0) {
        class_misuse(call, p, "invalid pointer (not allocated by hakmem)", -1);
        return SIZE_MAX;
    }
    *room = n;
    return n;
}

/* Phase 100: a span block of this thread's takes n bytes where it is (the free run after
 * it, or its tail given back).  1 if so; 2 if it is a span block that must move. */
static int span_realloc_in_place(void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p;
    unsigned b = region_map_get(a);
    if (!region_map_is_region(b))
        return 0;
    struct region *r = region_from_map(a, b);
    if (r->cls != HAK_CLS_SPAN)
        return 0;
    struct heap *h = heap_tls;
    if (n > HAK_TINY_MAX && n <= HAK_MID_MAX
        && atomic_load_explicit(&r->owner, memory_order_relaxed) == h) {
        uint32_t e = heap_enter();
        int done = span_resize(h, r, p, n);
        heap_leave(e);
        if (done)
            return 1;
    }
    return 2;
}

static void *realloc_block(void *ptr, size_t size)
{
    if (ptr == NULL)
        return alloc_bytes(size);
    if (size == 0) {                    /* as glibc: free and return NULL */
        free_block(ptr);
        return NULL;
    }
    size_t room, usable;
#if HAK_PHASE93 && !HAK_HARDENED
    /* A live tiny block of one of this thread's own regions (Phase 93's cache) is its
     * class's size, known without the region map. */
    const struct rcache_info *ri = hot_own_tiny(heap_tls, (uintptr_t)ptr);
    if (ri != NULL && region_tag_live_tiny(ptr, ri->live_tag, ri->amask) != NULL)
        usable = room = class_table[TAG_CLASS(ri->live_tag)].size;
    else
#endif
        usable = block_usable(ptr, "realloc", &room);
    if (usable == SIZE_MAX)
        return NULL;
    if (size <= room && size >= room / 2)
        return canary_arm(ptr, size);
    if (size > HAK_MID_MAX && usable > HAK_MID_MAX) {
        void *q = large_realloc(ptr, size);
        if (q)
            return q;
    }
    size_t want = size;
    if (usable > HAK_TINY_MAX && usable <= HAK_MID_MAX) {
        int s = span_realloc_in_place(ptr, size + CANARY_EXTRA);
        if (s == 1)
            return canary_arm(ptr, size);
        /* A span block that must move takes a quarter more than it had, as large blocks
         * do: a buffer grown a little at a time moves once per quarter, not per granule
         * (a size class's rounding gave the old mid blocks that room). */
        if (s == 2 && size > usable && size < usable + usable / 4 && usable + usable / 4 <= HAK_MID_MAX - CANARY_EXTRA)
            want = usable + usable / 4;
    }
    void *q = alloc_bytes(want);
    if (q == NULL)
        return NULL;
    memcpy(q, ptr, size < usable ? size : usable);
    free_block(ptr);
    return q;
}

/* With the profiler, a resized block is a new allocation of its new size: its old sample
 * (if any) ends, and the result counts down like any other block. */
HAK_EXPORT void *hak_realloc(void *ptr, size_t size)
{
#if HAK_PROF
    if (ptr != NULL)
        api_prof_unsample(ptr);
#endif
    void *q = realloc_block(ptr, size);
    PROF_COUNT(q, size);
    return q;
}

HAK_EXPORT void *hak_reallocarray(void *ptr, size_t nmemb, size_t size)
{
    size_t n;
    if (unlikely(__builtin_mul_overflow(nmemb, size, &n))) {
        errno = ENOMEM;
        return NULL;
    }
    return hak_realloc(ptr, n);
}

/* align: a power of two. */
static void *aligned_block(size_t align, size_t n)
{
    if (align <= 16)            /* blocks of 16 B and up are 16-aligned; C0 only to 8 */
        return alloc_bytes(n < align ? align : n);
    if (n > PTRDIFF_MAX) {
        errno = ENOMEM;
        return NULL;
    }
    size_t s = (n < align ? align : n) + CANARY_EXTRA;
    if (s <= HAK_MID_MAX && align <= HAK_CHUNK_SIZE) {
        /* Power-of-two classes are naturally aligned (class_table_init); a span block
         * only to its granule. */
        s = s <= 8 ? 8 : (size_t)1 << (64 - __builtin_clzl(s - 1));
        if (s > HAK_TINY_MAX && s <= HAK_MID_MAX && align > SPAN_GRANULE)
            return canary_arm(api_malloc_mid_class(s, heap_tls, 1), n);
        if (s <= HAK_MID_MAX)
            return canary_arm(hot_malloc(s), n);
    }
    init_process();
    return large_alloc(n, align, 0);
}

static void *aligned_impl(size_t align, size_t n)
{
    void *p = aligned_block(align, n);
    PROF_COUNT(p, n);
    return p;
}

static int is_pow2(size_t a)
{
    return a && (a & (a - 1)) == 0;
}

HAK_EXPORT int hak_posix_memalign(void **out, size_t alignment, size_t size)
{
    if (!is_pow2(alignment) || alignment % sizeof(void *))
        return EINVAL;
    int e = errno;
    void *p = aligned_impl(alignment, size);
    errno = e;
    if (p == NULL)
        return ENOMEM;
    *out = p;
    return 0;
}

HAK_EXPORT void *hak_aligned_alloc(size_t alignment, size_t size)
{
    if (!is_pow2(alignment)) {
        errno = EINVAL;
        return NULL;
    }
    return aligned_impl(alignment, size);
}

HAK_EXPORT void *hak_memalign(size_t alignment, size_t size)
{
    if (alignment > ((size_t)1 << 62)) {
        errno = EINVAL;
        return NULL;
    }
    if (!is_pow2(alignment))            /* as glibc: round up to a power of two */
        alignment = alignment < 2 ? 1 : (size_t)1 << (64 - __builtin_clzl(alignment - 1));
    return aligned_impl(alignment, size);
}

HAK_EXPORT void *hak_valloc(size_t size)
{
    return aligned_impl(4096, size);
}

HAK_EXPORT void *hak_pvalloc(size_t size)
{
    if (size > PTRDIFF_MAX) {
        errno = ENOMEM;
        return NULL;
    }
    size_t n = (size + 4095) & ~(size_t)4095;
    return aligned_impl(4096, n ? n : 4096);
}

/* C23's sized frees: the size is the caller's promise, and the block's tag already
 * knows its class, so it is not read. */
HAK_EXPORT void hak_free_sized(void *ptr, size_t size)
{
    (void)size;
    free_block(ptr);
}

HAK_EXPORT void hak_free_aligned_sized(void *ptr, size_t alignment, size_t size)
{
    (void)alignment;
    (void)size;
    free_block(ptr);
}

HAK_EXPORT size_t hak_malloc_usable_size(void *ptr)
{
    size_t room, n = ptr ? block_usable(ptr, "malloc_usable_size", &room) : 0;
    return n == SIZE_MAX ? 0 : n;
}

/* The profiler starts (or warns) only in the copy of hakmem that serves the process. */
int api_malloc_is_ours(void)
{
#if HAK_OVERRIDE
    /* A block from the malloc the program calls lies in this copy's region map if that malloc
     * is this copy's.  The address "malloc" resolves to cannot say: in a program built without
     * PIE (Debian's python3) it is the program's own PLT stub, whoever serves it. */
    void *(*m)(size_t) = (void *(*)(size_t))dlsym(RTLD_DEFAULT, "malloc");
    void (*f)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT, "free");
    if (m == NULL || f == NULL)
        return 0;
    void *p = m(HAK_MID_MAX / 2);           /* a region's block whatever the routes */
    int ours = p != NULL && region_map_is_region(region_map_get((uintptr_t)p));
    f(p);
    return ours;
#else
    return 1;
#endif
}

/* malloc.h's statistics and trim calls (api/stats.c): out of line, on demand. */
HAK_EXPORT int hak_malloc_trim(size_t pad)
{
    return api_malloc_trim(pad);
}

HAK_EXPORT void hak_malloc_stats(void)
{
    api_malloc_stats();
}

HAK_EXPORT int hak_malloc_info(int options, FILE *fp)
{
    return api_malloc_info(options, fp);
}

HAK_EXPORT int hak_mallopt(int param, int value)
{
    return api_mallopt(param, value);
}

HAK_EXPORT struct mallinfo2 hak_mallinfo2(void)
{
    return api_mallinfo2();
}

static int clamp_int(size_t v)
{
    return v > INT_MAX ? INT_MAX : (int)v;
}

HAK_EXPORT struct mallinfo hak_mallinfo(void)
{
    struct mallinfo2 m2 = api_mallinfo2();
    struct mallinfo m = {
        .arena = clamp_int(m2.arena), .ordblks = clamp_int(m2.ordblks), .smblks = clamp_int(m2.smblks),
        .hblks = clamp_int(m2.hblks), .hblkhd = clamp_int(m2.hblkhd), .usmblks = clamp_int(m2.usmblks),
        .fsmblks = clamp_int(m2.fsmblks), .uordblks = clamp_int(m2.uordblks),
        .fordblks = clamp_int(m2.fordblks), .keepcost = clamp_int(m2.keepcost),
    };
    return m;
}

#if HAK_OVERRIDE
#define HAK_ALIAS(name) HAK_EXPORT __attribute__((alias(#name)))
void  *malloc(size_t) HAK_ALIAS(hak_malloc);
void   free(void *) HAK_ALIAS(hak_free);
void  *calloc(size_t, size_t) HAK_ALIAS(hak_calloc);
void  *realloc(void *, size_t) HAK_ALIAS(hak_realloc);
void  *reallocarray(void *, size_t, size_t) HAK_ALIAS(hak_reallocarray);
int    posix_memalign(void **, size_t, size_t) HAK_ALIAS(hak_posix_memalign);
void  *aligned_alloc(size_t, size_t) HAK_ALIAS(hak_aligned_alloc);
void  *memalign(size_t, size_t) HAK_ALIAS(hak_memalign);
void  *valloc(size_t) HAK_ALIAS(hak_valloc);
void  *pvalloc(size_t) HAK_ALIAS(hak_pvalloc);
size_t malloc_usable_size(void *) HAK_ALIAS(hak_malloc_usable_size);
void   free_sized(void *, size_t) HAK_ALIAS(hak_free_sized);
void   free_aligned_sized(void *, size_t, size_t) HAK_ALIAS(hak_free_aligned_sized);
/* malloc.h's statistics and trim calls: left to glibc, they would report glibc's idle heap
 * and malloc_trim would give back none of hakmem's memory. */
int    malloc_trim(size_t) HAK_ALIAS(hak_malloc_trim);
void   malloc_stats(void) HAK_ALIAS(hak_malloc_stats);
int    malloc_info(int, FILE *) HAK_ALIAS(hak_malloc_info);
int    mallopt(int, int) HAK_ALIAS(hak_mallopt);
struct mallinfo2 mallinfo2(void) HAK_ALIAS(hak_mallinfo2);
struct mallinfo  mallinfo(void) HAK_ALIAS(hak_mallinfo);
/* glibc's other names for the same functions, which some programs and libraries call
 * directly (as mimalloc and tcmalloc do, hakmem answers them): left to glibc, a block would
 * cross allocators, and glibc aborts on a pointer it did not allocate. */
void   cfree(void *) HAK_ALIAS(hak_free);
void  *__libc_malloc(size_t) HAK_ALIAS(hak_malloc);
void   __libc_free(void *) HAK_ALIAS(hak_free);
void   __libc_cfree(void *) HAK_ALIAS(hak_free);
void  *__libc_calloc(size_t, size_t) HAK_ALIAS(hak_calloc);
void  *__libc_realloc(void *, size_t) HAK_ALIAS(hak_realloc);
void  *__libc_memalign(size_t, size_t) HAK_ALIAS(hak_memalign);
void  *__libc_valloc(size_t) HAK_ALIAS(hak_valloc);
void  *__libc_pvalloc(size_t) HAK_ALIAS(hak_pvalloc);
#endif
