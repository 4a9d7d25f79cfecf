/* The large-block registry: an exact hash of the live large pointers, so free, realloc and
 * malloc_usable_size answer "is this a live large block" without touching the pointer. */
#ifndef HAK_COLD_LARGE_REG_H
#define HAK_COLD_LARGE_REG_H

#include <stddef.h>
#include <stdint.h>

struct large_block {
    uintptr_t ptr;        /* what the user holds; 0 = empty registry slot */
    uintptr_t base;       /* the block's pages: [base, base + maplen) */
    size_t    maplen;
    uint8_t   arena;      /* the pages are an extent of arena chunks, not a mapping of their own */
    uint8_t   sampled;    /* the heap profiler sampled it: its free ends the sample */
};

/* All expect the large lock held. */
struct large_block *large_reg_find(uintptr_t p);            /* NULL: not live */
int   large_reg_insert(const struct large_block *b);         /* 0: out of memory */
void  large_reg_remove(struct large_block *e);               /* e from large_reg_find */

#endif
