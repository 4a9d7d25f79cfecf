/* The span layout (Phase 100): a span is a 1 MiB region whose blocks are runs of granules
 * of any length; the span allocator (src/span) carves and merges them. */
#ifndef HAK_REGION_SPAN_LAYOUT_H
#define HAK_REGION_SPAN_LAYOUT_H

#include "region.h"

/* A span is a region (header, tags, map bytes) of SPAN_CHUNKS chunks whose blocks are runs
 * of 256-byte granules.  Size classes keep each size's freed blocks for that size only, and
 * a region of a few blocks with scattered survivors rarely empties to serve another class,
 * so a program whose size mix changes faults in fresh pages beside the ones it freed.
 * Here a freed block merges with its free neighbours at once and any request that fits
 * takes it.
 *
 * Everything that says where blocks begin and end is out of band, in the header, so that
 * no free reads or writes its neighbours' memory to find them:
 * - tags[g], one byte per granule: TAG_LIVE_SPAN at a live block's first granule,
 *   TAG_FREE at a free run's first, TAG_FEND at its last (runs of two granules or more),
 *   TAG_REMOTE at a block another thread freed that the owner has not merged yet
 *   (TAG_DETACHED once the purger has taken it off the remote stack, Phase 101), 0
 *   elsewhere.  The tag check of every free works unchanged (a granule-aligned pointer
 *   whose tag is live), and a neighbour's tag says whether it can merge.
 * - len[g], 16 bits per granule: the length in granules of the block or run starting at g,
 *   and of a free run also at its last granule, where the run after it looks.
 * A free run's bin links (struct span_node) are in the header too, over the lengths of
 * granules inside the run (nothing reads those while it is free), so all of a run's pages
 * can go back to the OS (Phase 101) however its neighbours change; a run too short to
 * cover them keeps its links in its own last 24 bytes.  Only the owning heap reads or
 * writes runs, lengths and bins;
 * another thread's free flips the tag to TAG_REMOTE and pushes the block on the span's
 * remote stack, as for any region. */
#define SPAN_CHUNKS   16u
#define SPAN_GSHIFT   8u
#define SPAN_GRANULE  (1u << SPAN_GSHIFT)
#define SPAN_NGRAN    ((SPAN_CHUNKS << HAK_CHUNK_SHIFT) >> SPAN_GSHIFT)      /* 4096 */
/* Header, tags and lengths, rounded up to a granule: block 0 starts here (12,544 B). */
#define SPAN_BLOCKS_OFF ((offsetof(struct region, tags) + SPAN_NGRAN * 3u + SPAN_GRANULE - 1) \
                         & ~(size_t)(SPAN_GRANULE - 1))
#define SPAN_FIRST    ((uint32_t)(SPAN_BLOCKS_OFF >> SPAN_GSHIFT))            /* 49 */
/* Phase 101: a bit per 4 KiB page given back, past the lengths (the header has no room). */
#define SPAN_PURGED_OFF (offsetof(struct region, tags) + SPAN_NGRAN * 3u)
_Static_assert(SPAN_PURGED_OFF % 8 == 0 && SPAN_PURGED_OFF + 32 <= SPAN_BLOCKS_OFF,
               "a span's page bits fit between its lengths and its first block");
#define SPAN_RUN_MAX  (SPAN_NGRAN - SPAN_FIRST)                               /* a fresh span's run */


/* The quick cache: a freed block of under 64 granules (16 KiB) goes onto a LIFO of its
 * exact length, up to 8 deep and 256 KiB in all, and the next request of that length takes
 * it without a bin search, a split or a merge, as glibc's tcache does in front of its bins.
 * Its tag is TAG_CACHED, so no neighbour merges with it; it counts as used.  A span left with
 * nothing else is the heap's idle span and keeps them, but any other has its cached blocks
 * taken back and merged, so the cache pins one span at most; the cache is merged back
 * before a span is added, and at thread exit.  (A program that churns blocks of a dozen
 * mid lengths pays the whole carve and merge on each pair without it.) */
/* Lending: in a heap whose spans could hold more than twice [purge] retain, a span left with
 * no more than SPAN_LEND_LIVE granules (64 KiB) in live blocks hands the whole chunks inside
 * its free runs back to the arenas, where the retained-memory cap and its purge apply and
 * any class may take them; in the span they read as one pseudo-block, tag TAG_LENT, that
 * nothing merges with.  A big span with a few survivors empties far less often than a
 * region of a few blocks: without this, a program that freed nearly all of its mid blocks
 * kept most of their memory resident. */
#define SPAN_LEND_LIVE   256u

#define SPAN_QUICK_LEN   64u
#define SPAN_QUICK_DEPTH 8u
#define SPAN_QUICK_BYTES (256u << 10)

/* Bins: exact lengths below 64 granules (16 KiB), then eight bins per doubling (TLSF's
 * two levels), up to the 8191 granules of the longest run a span could hold. */
#define SPAN_NBINS    120u
#define SPAN_BIN_WORDS 2u

struct span_node {
    struct span_node *next, *prev;
    uint32_t end;                    /* the run's last granule (where links in the header
                                        lie gives it only to within four, for alignment) */
    uint32_t unused;
};

/* A run of SPAN_NODE_MIN granules or more keeps its links in the lengths of granules
 * (e - 12) & ~3 to that + 11, e its last: 8-byte aligned, after its first granule and
 * before its last, whose lengths say where it is.  Tied to its end, as in a run's own
 * memory: a carve from its front or a merge from behind leaves them where they were. */
#define SPAN_NODE_MIN 17u
/* A run shorter than the least mid block serves no request until it merges, so it is in
 * no bin and has no links: nothing of it is written into its memory. */
#define SPAN_LINK_MIN ((HAK_TINY_MAX >> SPAN_GSHIFT) + 1u)                   /* 5 */
#define SPAN_NODE_LENS (sizeof(struct span_node) / sizeof(uint16_t))
_Static_assert(SPAN_NODE_LENS == 12 && (offsetof(struct region, tags) + SPAN_NGRAN) % 8 == 0,
               "a run's links fill twelve aligned lengths");
_Static_assert(SPAN_NODE_MIN >= 17 && SPAN_NODE_MIN < 64,
               "the links lie inside the run; a run's bin changes when they move");

HAK_INLINE uint16_t *span_len(struct region *r)
{
    return (uint16_t *)(void *)(r->tags + SPAN_NGRAN);
}

HAK_INLINE uint32_t span_gran(struct region *r, const void *p)
{
    return (uint32_t)(((uintptr_t)p - (uintptr_t)r) >> SPAN_GSHIFT);
}

HAK_INLINE void *span_addr(struct region *r, uint32_t g)
{
    return (char *)r + ((size_t)g << SPAN_GSHIFT);
}

/* The bin of runs of length n (n >= 1). */
HAK_INLINE unsigned span_bin(uint32_t n)
{
    if (n < 64)
        return n;
    unsigned fl = 31u - (unsigned)__builtin_clz(n);
    return 64u + (fl - 6u) * 8u + ((n >> (fl - 3u)) & 7u);
}

/* The first bin whose every run holds n granules: n rounded up to its bin's start. */
HAK_INLINE unsigned span_bin_up(uint32_t n)
{
    if (n < 64)
        return n;
    unsigned fl = 31u - (unsigned)__builtin_clz(n);
    return span_bin(n + (1u << (fl - 3u)) - 1u);
}

/* A free of `freed` granules that left `live` has just crossed a lending threshold: 64 KiB
 * live, then 16 KiB.  A span lends at each crossing, not at every free after it: one walk
 * and one call to the arenas for all its runs (lending at every free made a call per free
 * as a span came down to its last blocks). */
HAK_INLINE int span_lend_crossed(uint32_t live, uint32_t freed)
{
    return live + freed > SPAN_LEND_LIVE || (live <= SPAN_LEND_LIVE / 4 && live + freed > SPAN_LEND_LIVE / 4);
}

/* Granules of r in blocks, live or remote (the quick cache's are free). */
HAK_INLINE uint32_t span_live(struct region *r)
{
    return SPAN_RUN_MAX - r->span_avail - r->span_lent;
}

HAK_INLINE uint64_t *span_purged(struct region *r)
{
    return (uint64_t *)(void *)((char *)r + SPAN_PURGED_OFF);
}

/* A free run of n granules has its links in its own memory (its last 24 bytes). */
HAK_INLINE int span_links_in_run(uint32_t n)
{
    return n >= SPAN_LINK_MIN && n < SPAN_NODE_MIN;
}

/* Where the links of free run [g, g + n) of r are (n >= SPAN_LINK_MIN). */
HAK_INLINE struct span_node *span_run_node(struct region *r, uint32_t g, uint32_t n)
{
    uint32_t e = g + n - 1;
    if (n >= SPAN_NODE_MIN)
        return (struct span_node *)(void *)&span_len(r)[(e - 12u) & ~3u];
    return (struct span_node *)span_addr(r, g + n) - 1;
}

/* Bytes a live span block holds (its tag already checked). */
HAK_INLINE size_t span_block_size(struct region *r, const void *p)
{
    return (size_t)span_len(r)[span_gran(r, p)] << SPAN_GSHIFT;
}

/* Bytes a live block of any region holds. */
HAK_INLINE size_t region_block_size(struct region *r, const void *p)
{
    return r->cls == HAK_CLS_SPAN ? span_block_size(r, p) : r->bsize;
}

#endif
