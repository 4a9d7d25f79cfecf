/* The large-block registry: open addressing with linear probing over a power-of-two table
 * mapped from the OS (never from malloc), grown at half full. */
#include <string.h>
#include "large_reg.h"
#include "../common/common.h"
#include "../os/os.h"
#include "../stats/stats.h"

static struct large_block *reg;
static size_t reg_cap, reg_n;
static size_t own_bytes;            /* the live blocks that are mappings of their own */

/* Every change of a live block's bytes passes here. */
static void reg_count(int delta, size_t bytes, int own)
{
    stats_large_block(delta, bytes, own);
    if (own)
        own_bytes = delta > 0 ? own_bytes + bytes : own_bytes - bytes;
}

size_t large_reg_own_bytes(void)
{
    return own_bytes;
}

HAK_COLD void large_reg_resized(struct large_block *e, size_t maplen)
{
    reg_count(-1, e->maplen, !e->arena);
    reg_count(1, maplen, !e->arena);
    e->maplen = maplen;
}

/* The pieces of the blocks that are mappings of their own, a slot each: they take a few
 * hundred bytes, which the entries of the arenas' blocks, the many, do not pay.  Free slots
 * are linked through their n. */
static struct lmaps *pieces;
static uint32_t pieces_cap, pieces_free = UINT32_MAX;

static int pieces_grow(void)
{
    uint32_t ncap = pieces_cap ? pieces_cap * 2 : 64;
    struct lmaps *np = os_map((size_t)ncap * sizeof *np);
    if (np == NULL)
        return 0;
    if (pieces) {
        memcpy(np, pieces, (size_t)pieces_cap * sizeof *np);
        os_unmap(pieces, (size_t)pieces_cap * sizeof *np);
    }
    for (uint32_t i = ncap; i-- > pieces_cap;) {
        np[i].n = pieces_free;
        pieces_free = i;
    }
    pieces = np;
    pieces_cap = ncap;
    return 1;
}

struct lmaps *large_reg_maps(const struct large_block *e)
{
    return &pieces[e->maps];
}

static size_t lreg_hash(uintptr_t p)
{
    return (size_t)(((p >> 12) * 0x9E3779B97F4A7C15ull) >> 17) & (reg_cap - 1);
}

HAK_COLD struct large_block *large_reg_find(uintptr_t p)
{
    if (reg_cap == 0)
        return NULL;
    for (size_t i = lreg_hash(p);; i = (i + 1) & (reg_cap - 1)) {
        if (reg[i].ptr == p)
            return &reg[i];
        if (reg[i].ptr == 0)
            return NULL;
    }
}

HAK_COLD int large_reg_insert(const struct large_block *b, const struct lmaps *m)
{
    if (m && pieces_free == UINT32_MAX && !pieces_grow())
        return 0;
    if ((reg_n + 1) * 2 > reg_cap) {
        size_t ncap = reg_cap ? reg_cap * 2 : 256;
        struct large_block *old = reg, *nr = os_map(ncap * sizeof *nr);
        size_t ocap = reg_cap;
        if (nr == NULL)
            return 0;
        reg = nr;
        reg_cap = ncap;
        for (size_t i = 0; i < ocap; i++) {
            if (old[i].ptr) {
                size_t j = lreg_hash(old[i].ptr);
                while (reg[j].ptr)
                    j = (j + 1) & (reg_cap - 1);
                reg[j] = old[i];
            }
        }
        if (old)
            os_unmap(old, ocap * sizeof *old);
    }
    size_t j = lreg_hash(b->ptr);
    while (reg[j].ptr)
        j = (j + 1) & (reg_cap - 1);
    reg[j] = *b;
    if (m) {
        reg[j].maps = pieces_free;
        pieces_free = pieces[pieces_free].n;
        pieces[reg[j].maps] = *m;
    }
    reg_n++;
    reg_count(1, b->maplen, !b->arena);            /* every live block passes here */
    return 1;
}

/* Backward-shift deletion keeps probe chains intact without tombstones. */
HAK_COLD void large_reg_remove(struct large_block *e)
{
    size_t i = (size_t)(e - reg);
    reg_count(-1, e->maplen, !e->arena);
    if (!e->arena) {
        pieces[e->maps].n = pieces_free;
        pieces_free = e->maps;
    }
    for (size_t j = (i + 1) & (reg_cap - 1); reg[j].ptr; j = (j + 1) & (reg_cap - 1)) {
        size_t h = lreg_hash(reg[j].ptr);
        if (((j - h) & (reg_cap - 1)) >= ((j - i) & (reg_cap - 1))) {
            reg[i] = reg[j];
            i = j;
        }
    }
    reg[i].ptr = 0;
    reg_n--;
}

