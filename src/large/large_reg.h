/* The large-block registry: an exact hash of the live large pointers, so free, realloc and
 * malloc_usable_size answer "is this a live large block" without touching the pointer. */
#ifndef HAK_COLD_LARGE_REG_H
#define HAK_COLD_LARGE_REG_H

#include <stddef.h>
#include <stdint.h>
#include "large_maps.h"

struct large_block {
    uintptr_t ptr;        /* what the user holds; 0 = empty registry slot */
    uintptr_t base;       /* the block's pages: [base, base + maplen) */
    size_t    maplen;
    uint8_t   arena;      /* the pages are an extent of arena chunks, not a mapping of their own */
    uint8_t   sampled;    /* the heap profiler sampled it: its free ends the sample */
    uint32_t  maps;       /* not arena: its pieces' slot in a table of their own (large_reg_maps) */
};

/* All expect the large lock held. */
struct large_block *large_reg_find(uintptr_t p);            /* NULL: not live */
/* 0: out of memory.  m: the pieces of a block that is a mapping of its own (NULL for one of
 * the arenas), kept apart from the entries, which every arena block has too. */
int   large_reg_insert(const struct large_block *b, const struct lmaps *m);
void  large_reg_remove(struct large_block *e);               /* e from large_reg_find */
void  large_reg_resized(struct large_block *e, size_t maplen);  /* e grew or shrank in place */
size_t large_reg_own_bytes(void);   /* bytes of the live blocks that are mappings of their own */
/* The pieces of e (not arena), to read or change; valid until the next insert. */
struct lmaps *large_reg_maps(const struct large_block *e);

#endif
