/* The large-block registry: open addressing with linear probing over a power-of-two table
 * mapped from the OS (never from malloc), grown at half full. */
#include "large_reg.h"
#include "../common/common.h"
#include "../os/os.h"
#include "../stats/stats.h"

static struct large_block *reg;
static size_t reg_cap, reg_n;

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

HAK_COLD int large_reg_insert(const struct large_block *b)
{
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
    reg_n++;
    stats_large_block(1, b->maplen, !b->arena);    /* every live block passes here */
    return 1;
}

/* Backward-shift deletion keeps probe chains intact without tombstones. */
HAK_COLD void large_reg_remove(struct large_block *e)
{
    size_t i = (size_t)(e - reg);
    stats_large_block(-1, e->maplen, !e->arena);
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

