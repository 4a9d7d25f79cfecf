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

/* A new block [p, p+len) is being handed out, its pages from `fresh` on never touched:
 * looks at the block handed out before it (if still mapped), remembers this one, and, if
 * the phase is on and the last block looked at was almost all touched, faults the fresh
 * pages in with a few calls, but for the sample pages a later look reads the program's
 * touches from. */
void large_dense_handout(uintptr_t p, size_t len, uintptr_t fresh);

#endif
