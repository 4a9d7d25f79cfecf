/* The large page cache: page ranges a freed large block left mapped (and resident),
 * kept by address so neighbours coalesce, carved best-fit, trimmed to a byte budget. */
#ifndef HAK_LARGE_CACHE_H
#define HAK_LARGE_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include "large_maps.h"

#define LCACHE_MAX 64            /* kernel mappings (so ranges) kept at most: every operation scans them all */
#define LCACHE_DROPS (LCACHE_MAX + LMAPS_MAX + 1)   /* ranges one call may push out */

struct lrange {
    uintptr_t base;             /* page-aligned */
    size_t    len;              /* a multiple of the page */
};

/* All of these expect the large lock held; none makes a system call.  What a call
 * pushes out of the set is written to drop[] (room for LCACHE_DROPS) and counted
 * in the return value, for the caller to unmap once the lock is released.  Each range
 * carries its pieces, one kernel mapping each (large_maps.h); a taker says how many
 * pieces what it takes may span (`max`) and gets them in *maps. */

/* Carve, from the smallest range that holds it, a range whose first `align`-aligned
 * address is followed by len bytes: the range starts at the range's base (the alignment
 * head stays with the block, as with a fresh mapping) and the range's tail stays free.
 * 1 and *out on success. */
int      lcache_take(size_t len, size_t align, unsigned max, struct lrange *out, struct lmaps *maps);

/* Remove and return the largest range (to be grown with mremap): 0 if there is none. */
int      lcache_take_largest(unsigned max, struct lrange *out, struct lmaps *maps);

/* Toward len bytes, the most a range's front holds in at most `max` pieces: taken from the
 * range where that is the most.  0 if there is none. */
int      lcache_take_most(size_t len, unsigned max, struct lrange *out, struct lmaps *maps);

/* The `len` bytes at the start of the smallest piece (one kernel mapping) that holds them,
 * wherever it lies in a range (which may be cut in two).  1 and *out on success. */
int      lcache_take_piece(size_t len, struct lrange *out, struct lmaps *maps);

/* If a free range starts at `end` and has at least `more` bytes, take its first `more`
 * bytes (a block ending at `end` grows into them in place) and return 1. */
int      lcache_take_after(uintptr_t end, size_t more, unsigned max, struct lmaps *maps);

/* Give back a range: coalesced with its free neighbours (unless the two together would
 * span more than LMAPS_MAX mappings); past LCACHE_MAX mappings in the set, the smallest
 * pieces go; then the set is trimmed to `cap` bytes, the least recently freed first (whole
 * ranges, or the tail of one). */
unsigned lcache_put(struct lrange s, const struct lmaps *maps, size_t cap, struct lrange *drop);

/* Trim the set to `cap` bytes, the least recently freed first (malloc_trim; lcache_put). */
unsigned lcache_trim(size_t cap, struct lrange *drop);

int      lcache_contains(uintptr_t p);   /* p lies inside a free range */
size_t   lcache_largest(void);           /* the largest free range's bytes (0: none) */
size_t   lcache_bytes(void);

#endif
