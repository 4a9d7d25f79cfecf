/* The free spans of large blocks: page ranges a freed large block left mapped (and resident),
 * kept by address so neighbours coalesce, carved best-fit, trimmed to a byte budget. */
#ifndef HAK_LARGE_SPANS_H
#define HAK_LARGE_SPANS_H

#include <stddef.h>
#include <stdint.h>

#define LSPAN_MAX 64            /* free spans kept at most: every operation scans them all */

struct lspan {
    uintptr_t base;             /* page-aligned */
    size_t    len;              /* a multiple of the page */
};

/* All of these expect the large lock held; none makes a system call.  What a call
 * pushes out of the set is written to drop[] (room for LSPAN_MAX + 1) and counted
 * in the return value, for the caller to unmap once the lock is released. */

/* Carve, from the smallest span that holds it, a range whose first `align`-aligned
 * address is followed by len bytes: the range starts at the span's base (the alignment
 * head stays with the block, as with a fresh mapping) and the span's tail stays free.
 * 1 and *out on success. */
int      lspan_take(size_t len, size_t align, struct lspan *out);

/* Remove and return the largest span (to be grown with mremap): 0 if there is none. */
int      lspan_take_largest(struct lspan *out);

/* If a free span starts at `end` and has at least `more` bytes, take its first `more`
 * bytes (a block ending at `end` grows into them in place) and return 1. */
int      lspan_take_after(uintptr_t end, size_t more);

/* Give back a range: coalesced with its free neighbours, then the set is trimmed to
 * `cap` bytes and LSPAN_MAX spans, the least recently freed first (whole spans, or the
 * tail of one). */
unsigned lspan_put(struct lspan s, size_t cap, struct lspan *drop);

int      lspan_contains(uintptr_t p);   /* p lies inside a free span */
size_t   lspan_bytes(void);

#endif
