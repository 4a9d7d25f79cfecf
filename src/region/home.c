/* Taking a region's home blocks: its list, then in a tiny region the tags that read
 * TAG_HOME, a scan of dense tag bytes (sixteen at a time) that reads no block it hands out. */
#include "region.h"

#define BYTES_OF(b) (0x0101010101010101ull * (uint8_t)(b))

typedef uint64_t __attribute__((may_alias)) tag_word;

/* A bit per tag of the eight from index i (a multiple of 8) that reads TAG_HOME, in
 * address order from bit 0.  Exact: no borrow crosses a byte.  The load is atomic
 * (relaxed): the word holds live blocks' tags too, which another thread's free may flip
 * meanwhile, to TAG_FREE or (Phase 97, tiny) to TAG_HOME: such a block is found now or by
 * a later scan, and region_home_take's acquire load of its byte orders that free before
 * the reuse. */
static inline uint64_t home_mask8(const uint8_t *tags, uint32_t i)
{
    uint64_t w = __atomic_load_n((const tag_word *)(const void *)(tags + i), __ATOMIC_RELAXED);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    uint64_t y = w ^ BYTES_OF(TAG_HOME);
    uint64_t hi = ~(((y & BYTES_OF(0x7F)) + BYTES_OF(0x7F)) | y | BYTES_OF(0x7F));
    return ((hi >> 7) * 0x0102040810204080ull) >> 56;      /* byte k's 0x80 to bit k */
}

#if defined(__SSE2__) && !defined(HAK_TSAN)
#include <emmintrin.h>
#define SCAN_STEP 16u

typedef char __attribute__((vector_size(16), aligned(1), may_alias)) tag_vec;

/* The same for the sixteen tags from i (a multiple of 16), or the eight left before
 * `end`: one vector load, volatile so that it is one read as the word's is above
 * (ThreadSanitizer would report it racing with the frees' byte CAS: the word is used
 * there). */
static inline uint64_t home_mask(const uint8_t *tags, uint32_t i, uint32_t end)
{
    if (end - i < SCAN_STEP)
        return home_mask8(tags, i);
    __m128i v = (__m128i)*(const volatile tag_vec *)(const void *)(tags + i);
    return (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8((char)TAG_HOME)));
}
#else
#define SCAN_STEP 8u

static inline uint64_t home_mask(const uint8_t *tags, uint32_t i, uint32_t end)
{
    (void)end;
    return home_mask8(tags, i);
}
#endif

/* One past the last word of tags a home block can have: every TAG_HOME tag, the owner's or
 * another thread's (Phase 97), is a block handed out once, so it lies below the carved
 * blocks' end.  A region carved part way is scanned over that part only. */
static uint32_t home_scan_end(const struct region *r, uint32_t ntags)
{
    if (r->carved == 0)
        return 0;
    uint32_t last = (r->blocks_off + (uint32_t)(r->carved - 1) * r->bsize) >> r->gshift;
    uint32_t end = (last + 8) & ~7u;
    return end < ntags ? end : ntags;
}

/* The scan: up to `take` blocks whose tags read TAG_HOME into o[], tagged TAG_FREE again, from
 * where the last scan stopped, wrapping once round the carved blocks' tags.  Returns how many
 * (fewer when nhome ran ahead of the tags).  Out of line and with few live values, so the
 * loop keeps them all in registers; a block's address is its tag index times the granule, a
 * multiply, where a shift would want its count in cl. */
static HAK_NOINLINE unsigned home_scan(struct region *r, void **o, unsigned take)
{
    uint32_t end = home_scan_end(r, class_table[r->cls].ntags);
    uintptr_t gran = (uintptr_t)1 << r->gshift;
    __asm__("" : "+r"(gran));           /* a number to multiply by, not a shift count */
    o += take;                          /* filled from o[-take] up to o[-1] */
    intptr_t j = -(intptr_t)take;
    uint32_t pos = r->home_pos < end ? r->home_pos : 0;
    uint32_t i = pos & ~(SCAN_STEP - 1);
    uint64_t m = home_mask(r->tags, i, end) & (~(uint64_t)0 << (pos & (SCAN_STEP - 1)));
    for (uint32_t steps = (end + SCAN_STEP - 1) / SCAN_STEP + 1;;) {
        while (m) {
            uintptr_t k = i + (unsigned)__builtin_ctzll(m);
            m &= m - 1;
            o[j] = (char *)r + k * gran;
            /* Acquire on the byte itself, not a fence after the load: it pairs with the
             * freeing thread's CAS of this byte (ThreadSanitizer sees no fence, nor a byte
             * CAS through a word load), and on x86 it is a plain load. */
            (void)__atomic_load_n(&r->tags[k], __ATOMIC_ACQUIRE);
            __atomic_store_n(&r->tags[k], (uint8_t)TAG_FREE, __ATOMIC_RELAXED);
            if (++j == 0) {
                r->home_pos = (uint16_t)(k + 1 < end ? k + 1 : 0);
                return take;
            }
        }
        if (--steps == 0)
            return (unsigned)(take + j);
        if ((i += SCAN_STEP) >= end)
            i = 0;
        m = home_mask(r->tags, i, end);
    }
}

/* Whole words of tags are read: a class's ntags is a whole number of words, all cleared
 * when a region takes the class (class_table_init, arena_region_take).  Tags of blocks not
 * yet carved, and of granules no block starts at, are 0. */
unsigned region_home_take(struct region *r, void **out, unsigned want)
{
    unsigned n = 0, left = r->nhome;
    if (left == 0 || want == 0)
        return 0;
    while (n < want && (out[n] = region_home_pop(r)) != NULL)
        n++;
    left -= n;
    if (n == want || left == 0)
        return n;
    /* A block going home costs its free one tag store and a count, no lowest-bit
     * bookkeeping: the scan goes on from where the last one stopped. */
    unsigned take = want - n < left ? want - n : left;
    unsigned got = home_scan(r, out + n, take);
    /* Fewer than nhome said: what was found is all there is */
    r->nhome = (uint16_t)(got == take ? left - take : 0);
    return n + got;
}

/* Counts the tiny blocks other threads tagged TAG_HOME (Phase 97) as home, and moves the
 * blocks of r's remote-free stack onto its home list: they come linked, so they stay
 * linked (a tiny region's scan of home tags finds the others). */
void region_collect(struct region *r)
{
    if (atomic_load_explicit(&r->remote_home, memory_order_relaxed)) {
        uint32_t k = atomic_exchange(&r->remote_home, 0);
        r->nhome = (uint16_t)(r->nhome + k);
        HAK_STORE_HINT(r->used, (uint16_t)(r->used - k));
    }
    void *p = atomic_exchange(&r->remote, NULL);
    while (p) {
        void *next = region_link_load(r, p, 1);
        region_home_link(r, p);
        HAK_STORE_HINT(r->used, (uint16_t)(r->used - 1));
        p = next;
    }
}

int region_has_blocks(struct region *r)
{
    return r->nhome || r->carved < r->nblocks || region_remote_pending(r);
}

/* Takes up to `want` blocks out of r: its home blocks first, then remote frees, then
 * fresh carving: blocks other threads gave back are reused before untouched memory is. */
unsigned region_take(struct region *r, void **out, unsigned want)
{
    region_hold(r);                     /* Phase 101: the purger reads these tags too */
    unsigned n = region_home_take(r, out, want);
    if (n < want && region_remote_pending(r)) {
        region_collect(r);
        n += region_home_take(r, out + n, want - n);
    }
    if (n < want && r->carved < r->nblocks) {
        char *b = (char *)r + r->blocks_off + (size_t)r->carved * r->bsize;
        unsigned k = want - n;
        if (k > r->nblocks - r->carved)
            k = r->nblocks - r->carved;
        for (unsigned i = k; i-- > 0; b += r->bsize)   /* the lowest address last: it pops first */
            out[n + i] = b;
        n += k;
        r->carved += k;
    }
    HAK_STORE_HINT(r->used, (uint16_t)(r->used + n));
    if (unlikely(r->purged_n))
        for (unsigned i = 0; i < n; i++)
            region_refault_slow(r, (uintptr_t)out[i], r->bsize);
    atomic_store_explicit(&r->takes, atomic_load_explicit(&r->takes, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    region_unhold(r);
    return n;
}
