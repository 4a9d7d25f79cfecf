/* The large page cache: page ranges a freed large block left mapped (and resident),
 * kept by address so neighbours coalesce, carved best-fit, trimmed to a byte budget. */
#ifndef HAK_LARGE_CACHE_H
#define HAK_LARGE_CACHE_H

#include <stddef.h>
#include <stdint.h>

#define LCACHE_MAX 64            /* free ranges kept at most: every operation scans them all */

struct lrange {
    uintptr_t base;             /* page-aligned */
    size_t    len;              /* a multiple of the page */
};

/* All of these expect the large lock held; none makes a system call.  What a call
 * pushes out of the set is written to drop[] (room for LCACHE_MAX + 1) and counted
 * in the return value, for the caller to unmap once the lock is released. */

/* Carve, from the smallest range that holds it, a range whose first `align`-aligned
 * address is followed by len bytes: the range starts at the range's base (the alignment
 * head stays with the block, as with a fresh mapping) and the range's tail stays free.
 * 1 and *out on success. */
int      lcache_take(size_t len, size_t align, struct lrange *out);

/* Remove and return the largest range (to be grown with mremap): 0 if there is none. */
int      lcache_take_largest(struct lrange *out);

/* If a free range starts at `end` and has at least `more` bytes, take its first `more`
 * bytes (a block ending at `end` grows into them in place) and return 1. */
int      lcache_take_after(uintptr_t end, size_t more);

/* Give back a range: coalesced with its free neighbours, then the set is trimmed to
 * `cap` bytes and LCACHE_MAX ranges, the least recently freed first (whole ranges, or the
 * tail of one). */
unsigned lcache_put(struct lrange s, size_t cap, struct lrange *drop);

/* Trim the set to `cap` bytes, the least recently freed first (malloc_trim; lcache_put). */
unsigned lcache_trim(size_t cap, struct lrange *drop);

int      lcache_contains(uintptr_t p);   /* p lies inside a free range */
size_t   lcache_bytes(void);

#endif
