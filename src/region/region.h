/* Regions: chunk-aligned extents holding blocks of one class, with the header at the start.
 * The header carries the per-block region-id tags: one byte per granule, live or free. */
#ifndef HAK_REGION_H
#define HAK_REGION_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include "../common/common.h"
#include "../class/class.h"

struct heap;

/* Invariant, owner thread view: used = nblocks - nhome - (nblocks - carved); blocks on
 * `remote` or counted in `remote_home` still count as used until the owner collects them
 * (a scan may take a TAG_HOME block before its count is collected: then nhome runs ahead
 * of the tags until a scan finds fewer, while used stays exact).  The blocks back in the
 * region ("home") are kept as their consumer takes them.  A tiny region is refilled from
 * in batches for the thread's slots, which give recency already: the blocks its owner
 * sends home are tagged TAG_HOME, so a refill scans dense tag bytes (on from home_pos, in
 * address order) instead of chasing a list through cold blocks, and a block going home
 * writes the tag line its free has just read.  A mid class has no thread cache: its
 * region's list is the LIFO that hands back the block freed last, still in cache.  Blocks
 * collected from the remote stack come linked and join the list in either kind. */
struct region {
    /* Two lines, by who writes them.  The first holds what a free through the map reads
     * (another thread's above all) and the remote stack and count those frees write; the
     * owner writes it only when the region changes hands.  The second is the owner's,
     * written as it hands blocks out and takes them back: on the first line, those counts
     * made other threads' frees miss on every refill of the owner. */
    uint8_t  cls;
    uint8_t  gshift;                 /* tag granule = 1 << gshift; block starts are granule multiples */
    uint8_t  live_tag;               /* TAG_LIVE(cls), precomputed for the free check */
    uint8_t  chunks;                 /* region size in 64 KiB chunks */
    uint32_t gmask;                  /* granule - 1: a block start has no bits of it */
    struct heap *_Atomic owner;      /* NULL while abandoned or pooled */
    uint32_t nblocks;
    uint32_t blocks_off;
    _Atomic(void *) remote;          /* blocks freed by other threads (lock-free stack) */
    _Atomic uint32_t remote_home;    /* tiny, Phase 97: blocks other threads tagged TAG_HOME, not yet in nhome;
                                        a span, Phase 101: nonzero while it has TAG_DETACHED blocks */
    uint32_t bsize;
    uint64_t secret;                 /* hardened: list link encoding key */
    /* Phase 101 (region/purge.c): free pages of a sparse region given back while it lives */
    struct region *reg_next, *reg_prev;  /* every tiny region and span (arena/sparse.c) */
    /* the owner's line */
    uint16_t nhome HAK_ALIGNED(HAK_CACHE_LINE);  /* owner-only: blocks home (a span: in the owner's quick cache) */
    union {
        uint16_t home_pos;           /* tiny, owner-only: the tag index the next scan starts at */
        uint16_t span_lent;          /* a span: granules of its chunks lent to the arenas */
    };
    uint16_t used;                   /* blocks out of the region: live, cached or remote */
    union {
        uint16_t carved;             /* bump pointer: blocks carved so far (nblocks <= 7152) */
        uint16_t span_avail;         /* a span: granules in its free runs and the quick cache */
    };
    union {
        void    *free;               /* owner-only: the home list (mid; remote frees collected) */
        uint64_t span_cached_lens;   /* a span: lengths (bits) it may have in the quick cache */
    };
    struct region *next, *prev;      /* owner's per-class list, or the pool */
    _Atomic uint16_t takes;          /* bumped by the owner under hold: it handed memory out */
    _Atomic uint8_t hold;            /* REGION_HOLD_*: who may hand out or give back its free memory */
    uint8_t  abandoned_at;           /* the abandoned list it is on (arena/pool.c), or REGION_NOT_ABANDONED */
    uint32_t sparse_ms;              /* the purger's: when it last saw `takes` change */
    uint64_t purged_tiny;            /* under hold: a bit per 4 KiB page given back (a span's
                                        bits lie past its lengths: span_purged) */
    uint16_t sparse_takes;           /* the purger's: `takes` as it last saw it */
    uint16_t purged_n;               /* pages given back, the bits set (under hold) */
    uint8_t  tags[] HAK_ALIGNED(8);  /* (chunks * 64 KiB) >> gshift bytes (whole, aligned
                                        words), indexed by (p - region) >> gshift */
} HAK_ALIGNED(HAK_CACHE_LINE);

_Static_assert(offsetof(struct region, reg_prev) + sizeof(void *) <= HAK_CACHE_LINE
               && offsetof(struct region, nhome) == HAK_CACHE_LINE,
               "a free through the map reads one line, and the owner's counts are on the next");
#define REGION_NOT_ABANDONED 0xFFu

_Static_assert(offsetof(struct region, tags) < 128,
               "the hot paths address a tag as base + offsetof(tags): keep it a one-byte displacement");

HAK_INLINE uint8_t *region_tag(struct region *r, uintptr_t p)
{
    return &r->tags[(p - (uintptr_t)r) >> r->gshift];
}

/* Tiny regions are exactly one chunk, so the header is found by masking alone. */
HAK_INLINE struct region *region_of_tiny(void *p)
{
    return (struct region *)((uintptr_t)p & ~(uintptr_t)HAK_CHUNK_MASK);
}

/* The 16-bit shift below works on a chunk offset in the pointer's low word. */
_Static_assert(HAK_CHUNK_SHIFT == 16, "region_tag_tiny's shrw takes the chunk offset as the low 16 bits");

/* Tiny classes: the tag's address follows from the pointer and the class's slot index s
 * alone (its low five bits are the shift; a 32-bit shift uses no more), without loading
 * the header. */
HAK_INLINE uint8_t *region_tag_tiny(void *p, unsigned s)
{
    uintptr_t a = (uintptr_t)p;
#if defined(__x86_64__) && defined(__GNUC__)
    /* A 16-bit shift of the pointer's low word leaves the region base above it and the
     * tag index in it: one instruction where the C form takes four (a copy, a mask, a
     * shift, a clear); every tiny shift is below 16 (test_route). */
    __asm__("shrw %%cl, %w0" : "+r"(a) : "c"(s));
    return (uint8_t *)a + offsetof(struct region, tags);
#else
    return (uint8_t *)(a & ~(uintptr_t)HAK_CHUNK_MASK) + offsetof(struct region, tags) + ((uint32_t)(a & HAK_CHUNK_MASK) >> (s & 31));
#endif
}

/* The free half for a tiny block of a region Phase 93's cache knows, with the live tag t
 * and the granule mask amask from the cache: the block's tag if it is live, else NULL.
 * A pointer inside a granule fails the mask; a granule inside a block or the header has a
 * tag that is never live.  (The map path's rotation, region_tag_index, checks the same in
 * three instructions more: a copy of the shift into cl, the rotation and its compare.) */
HAK_INLINE uint8_t *region_tag_live_tiny(void *p, unsigned t, unsigned amask)
{
    if (unlikely((uintptr_t)p & amask))
        return NULL;
    uint8_t *tag = region_tag_tiny(p, t);
    return *tag == (uint8_t)t ? tag : NULL;
}

/* Phase 107: every hand-out clears a block's first word, where a batch of another thread
 * may have left its owner's mark (region_mark, cold/batch.c). */
HAK_INLINE void region_mark_clear(void *blk)
{
#if HAK_PHASE107
    __atomic_store_n((uintptr_t *)blk, 0, __ATOMIC_RELAXED);   /* a racing double free may mark it */
#else
    (void)blk;
#endif
}

/* The allocation half of the tag protocol.  Phase 90 forces it inline; with the phase
 * off at run time the same write goes through an out-of-line call (region_tag_set_live_call). */
HAK_TAG_INLINE void region_tag_set_live(struct region *r, void *p)
{
    HAK_STORE_HINT(*region_tag(r, (uintptr_t)p), r->live_tag);   /* TAG_LIVE(r->cls), on the line region_tag read */
    HAK_UNPOISON(p, r->bsize);
    region_mark_clear(p);
}

void *region_tag_set_live_call(struct region *r, void *p);   /* returns p */

/* Rotating a block offset right by gshift gives its tag index: below 2^16 for a granule
 * start (a region has at most 2^16 granules), and for any other offset a number with the
 * stray low bits on top, at least 2^(32 - gshift) >= 2^17 (gshift <= 15).  So one compare
 * against a constant checks the alignment and keeps the index inside the tags. */
#define REGION_TAG_IDX_MAX (1u << 16)

HAK_INLINE uint32_t region_tag_index(uint32_t off, unsigned gshift)
{
    return (off >> (gshift & 31)) | (off << ((32 - gshift) & 31));   /* gshift may be a slot index */
}

/* The free half: nonzero when the block at offset off of r is live.  The caller passes
 * gshift and the live tag, which Phase 93's cache holds too, so a free need not read the
 * header's line (every header sits at a chunk boundary: they compete for a few cache sets). */
HAK_TAG_INLINE int region_tag_check_live_at(struct region *r, uint32_t off, unsigned gshift,
                                            unsigned live_tag, uint8_t **tagp)
{
    uint32_t idx = region_tag_index(off, gshift);
    if (unlikely(idx >= REGION_TAG_IDX_MAX)) {
        *tagp = &r->tags[0];                 /* a header granule: never live */
        return 0;
    }
    *tagp = &r->tags[idx];
    return **tagp == live_tag;
}

HAK_TAG_INLINE int region_tag_check_live(struct region *r, uintptr_t p, uint8_t **tagp)
{
    return region_tag_check_live_at(r, (uint32_t)(p - (uintptr_t)r), r->gshift, r->live_tag, tagp);
}

/* Phase 101: the owner holds a region while it hands out memory it may have to fault back
 * in (a refill's take, a span's carve), the purger while it reads which pages are free and
 * gives them back, a release while its chunks leave; whoever finds it held by the other
 * side waits (the owner, a release) or passes it by (the purger). */
#define REGION_HOLD_FREE   0u
#define REGION_HOLD_OWNER  1u
#define REGION_HOLD_PURGER 2u

void region_hold_wait(struct region *r);         /* purge.c: spins until the owner gets it */

HAK_INLINE void region_hold(struct region *r)
{
    uint8_t expect = REGION_HOLD_FREE;
    if (unlikely(!atomic_compare_exchange_strong_explicit(&r->hold, &expect, REGION_HOLD_OWNER,
                                                          memory_order_acquire, memory_order_relaxed)))
        region_hold_wait(r);
}

HAK_INLINE void region_unhold(struct region *r)
{
    atomic_store_explicit(&r->hold, REGION_HOLD_FREE, memory_order_release);
}

/* The owner under hold has handed out [p, p + len): pages of it that were given back are
 * counted faulted in again (purge.c). */
void region_refault_slow(struct region *r, uintptr_t p, size_t len);

HAK_INLINE void region_refault(struct region *r, void *p, size_t len)
{
    if (unlikely(r->purged_n))
        region_refault_slow(r, (uintptr_t)p, len);
}

/* purge.c, for the purger holding r (REGION_HOLD_PURGER): the pages of r that hold nothing
 * read again before they are handed out, not given back yet, as ranges in out[] (at most
 * max), marked given back; *pages counts them.  Tiny regions and spans; 0 for others. */
unsigned region_free_pages(struct region *r, struct iovec *out, unsigned max, unsigned *pages);
/* A tiny region or span with half or less live: 1, and in *free_bytes about how much of its
 * free memory is still resident (a racy read: a hint for choosing, not a promise). */
int      region_sparse(struct region *r, size_t *free_bytes);
void     region_purged_reset(struct region *r);   /* a new region: nothing given back */
/* [p, p + len) of r leaves it (a span's lent chunks, a release): not counted given back. */
void     region_purged_forget(struct region *r, uintptr_t p, size_t len);

/* Cache and remote-stack links live in the first word of a free block.  Hardened builds
 * encode them with the region's secret and check every link before it is followed
 * (region_link_bad). */
#if HAK_HARDENED
HAK_INLINE uintptr_t region_link_key(struct region *r, void *blk)
{
    return r->secret ^ ((uintptr_t)blk >> 4);
}
#else
HAK_INLINE uintptr_t region_link_key(struct region *r, void *blk)
{
    (void)r, (void)blk;
    return 0;
}
#endif

void *region_link_bad(struct region *r, void *blk, void *next);    /* cold: reports, returns NULL */
void *region_link_check(struct region *r, void *blk, void *next);  /* next: a free block of r's class? */

/* Follows blk's link; `same_region` when the list never leaves r (the remote stack),
 * else next may be any block of r's class. */
HAK_INLINE void *region_link_load(struct region *r, void *blk, int same_region)
{
    HAK_UNPOISON(blk, sizeof(void *));
    void *next = (void *)(*(uintptr_t *)blk ^ region_link_key(r, blk));
    HAK_POISON(blk, sizeof(void *));
#if HAK_HARDENED
    if (next != NULL) {
        uintptr_t off = (uintptr_t)next - (uintptr_t)r;
        if (!same_region)
            return region_link_check(r, blk, next);
        if (unlikely(off >= ((uintptr_t)r->chunks << HAK_CHUNK_SHIFT) || off < r->blocks_off || (off & r->gmask)))
            return region_link_bad(r, blk, next);
    }
#else
    (void)same_region;
#endif
    return next;
}

HAK_INLINE void region_link_store(struct region *r, void *blk, void *next)
{
    HAK_UNPOISON(blk, sizeof(void *));
    *(uintptr_t *)blk = (uintptr_t)next ^ region_link_key(r, blk);
    HAK_POISON(blk, sizeof(void *));
}

/* Phase 107: a tiny block in another thread's batch holds its owner's mark in its first
 * word (cold/batch.c), so a second free of it, or one after its owner took it back and
 * handed it out again, is found: every hand-out clears the word (region_mark_clear). */
HAK_INLINE uintptr_t region_mark_of(struct region *r, void *blk, const void *owner)
{
    return (uintptr_t)owner ^ region_link_key(r, blk);
}

HAK_INLINE int region_marked(struct region *r, void *blk, const void *owner)
{
    int poisoned = HAK_POISONED(blk);       /* a free block's, not a live one's */
    if (poisoned)
        HAK_UNPOISON(blk, sizeof(void *));
    /* relaxed atomics: two threads freeing one block at once both reach its word (a
     * double free, which this check is for) */
    int marked = __atomic_load_n((uintptr_t *)blk, __ATOMIC_RELAXED) == region_mark_of(r, blk, owner);
    if (poisoned)
        HAK_POISON(blk, sizeof(void *));
    return marked;
}

HAK_INLINE void region_mark(struct region *r, void *blk, const void *owner)
{
    HAK_UNPOISON(blk, sizeof(void *));
    __atomic_store_n((uintptr_t *)blk, region_mark_of(r, blk, owner), __ATOMIC_RELAXED);
    HAK_POISON(blk, sizeof(void *));
}

/* Blocks other threads freed into r that its owner has not collected yet. */
/* Blocks on r's linked remote stack, counted up to max: only while no one can pop it (its
 * owner out of its cold paths, or no owner and the abandoned lock held); pushes meanwhile
 * leave the links below the head read here as they were. */
HAK_INLINE unsigned region_remote_stacked(struct region *r, unsigned max)
{
    unsigned n = 0;
    for (void *p = atomic_load_explicit(&r->remote, memory_order_acquire); p && n < max; n++)
        p = region_link_load(r, p, 1);
    return n;
}

HAK_INLINE int region_remote_pending(struct region *r)
{
    return atomic_load_explicit(&r->remote, memory_order_relaxed) != NULL
        || atomic_load_explicit(&r->remote_home, memory_order_relaxed) != 0;
}

/* A heap's circular list of regions (a class's, or its spans), linked through next/prev. */
HAK_INLINE void region_ring_add(struct region **list, struct region *r)
{
    if (*list == NULL) {
        r->next = r->prev = r;
        *list = r;
    } else {
        r->next = *list;
        r->prev = (*list)->prev;
        r->prev->next = r;
        (*list)->prev = r;
    }
}

HAK_INLINE void region_ring_remove(struct region **list, struct region *r)
{
    if (r->next == r) {
        *list = NULL;
    } else {
        r->prev->next = r->next;
        r->next->prev = r->prev;
        if (*list == r)
            *list = r->next;
    }
    r->next = r->prev = NULL;
}

/* A free block of r onto its home list (owner only): every mid block, and the remote
 * frees the owner collects, which come linked. */
HAK_INLINE void region_home_link(struct region *r, void *p)
{
    region_link_store(r, p, r->free);
    r->free = p;
    r->nhome++;
}

/* A tiny block of r whose tag is *tag goes home (owner only): a tag and a count. */
HAK_INLINE void region_home_put_tiny(struct region *r, uint8_t *tag)
{
    HAK_STORE_HINT(*tag, (uint8_t)TAG_HOME);
    r->nhome++;
}

/* A free block of r goes home (owner only). */
HAK_INLINE void region_home_put(struct region *r, void *p)
{
    if (r->cls < HAK_NTINY) {
        region_home_put_tiny(r, region_tag(r, (uintptr_t)p));
    } else {
        region_home_link(r, p);
    }
}

/* The head of r's home list, or NULL: a mid malloc's block, and the first a refill takes. */
HAK_INLINE void *region_home_pop(struct region *r)
{
    void *p = r->free;
    if (p != NULL) {
        r->free = region_link_load(r, p, 1);
        r->nhome--;
    }
    return p;
}

/* Takes up to `want` of r's home blocks into out[] (tiny: its list, then tags in address
 * order from home_pos, tagged TAG_FREE again).  Returns how many. */
unsigned region_home_take(struct region *r, void **out, unsigned want);

/* home.c, for the owner: other threads' frees collected into the region, and blocks taken
 * out of it for a refill (home blocks, then remote frees, then fresh carving; carved blocks
 * go into out[] in descending address order, so a stack popping from out[n - 1] hands out
 * the lowest first). */
void     region_collect(struct region *r);
int      region_has_blocks(struct region *r);
unsigned region_take(struct region *r, void **out, unsigned want);

/* Reports a pointer into r that is not a live block's start (tag.c): where it points and
 * what its tag says decide the words (double free, use after free, interior pointer). */
void region_report_block(const char *call, struct region *r, uintptr_t p, uint8_t tag);

#include "map.h"
#include "span_layout.h"

#endif
