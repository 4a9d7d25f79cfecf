/* Phase 104: whether the program fills its large blocks, learnt from the blocks it allocated
 * and freed last, so that a new block's fresh pages are faulted in with a few calls. */
#ifndef HAK_LARGE_DENSE_H
#define HAK_LARGE_DENSE_H

#include <stddef.h>
#include <stdint.h>

/* Blocks smaller than this are neither watched nor populated. */
#define LARGE_DENSE_MIN ((size_t)1 << 20)

/* The block [p, p+len), still the caller's, is being freed: how much of it the program
 * touched is the latest word on its habit. */
void large_dense_freeing(uintptr_t p, size_t len);

/* A new block [p, p+len) is being handed out: looks at the block handed out before it (if
 * still mapped), then remembers this one.  1 if its fresh pages should come in at once:
 * the phase is on and the last block looked at was almost all touched. */
int  large_dense_wanted(uintptr_t p, size_t len);

/* Faults the fresh pages [from, to) of the block at `block` in (all page multiples), but
 * for the sample pages a later look reads the program's touches from. */
void large_dense_populate(uintptr_t block, uintptr_t from, uintptr_t to);

#endif
