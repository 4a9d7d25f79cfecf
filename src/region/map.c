/* Writing the region map: leaves are mapped lazily, one per 4 GiB of address space.
 * Readers never lock: a leaf, once installed, is never removed. */
#include <stdatomic.h>
#include "map.h"
#include "../os/os.h"

uint8_t *_Atomic region_map_top[1u << MAP_TOP_BITS];

static HAK_COLD uint8_t *map_leaf(uintptr_t p)
{
    uint8_t *_Atomic *slot = &region_map_top[p >> 32];
    uint8_t *leaf = atomic_load(slot);
    if (leaf)
        return leaf;
    uint8_t *fresh = os_map(MAP_LEAF_SIZE);
    if (fresh == NULL)
        return NULL;
    if (!atomic_compare_exchange_strong(slot, &leaf, fresh)) {
        os_unmap(fresh, MAP_LEAF_SIZE);
        return leaf;
    }
    return fresh;
}

/* Marks every chunk of [start, start+len); region chunks get their distance
 * from the region start (+1), large chunks MAP_LARGE.  Returns 0 on failure. */
HAK_COLD int region_map_set(uintptr_t start, size_t len, unsigned first_value, int per_chunk_offset)
{
    uintptr_t first = start >> HAK_CHUNK_SHIFT, last = (start + len - 1) >> HAK_CHUNK_SHIFT;
    for (uintptr_t c = first; c <= last; c++) {
        uint8_t *leaf = map_leaf(c << HAK_CHUNK_SHIFT);
        if (leaf == NULL)
            return 0;
        unsigned v = per_chunk_offset ? first_value + (unsigned)(c - first) : first_value;
        atomic_store_explicit((_Atomic uint8_t *)&leaf[c & (MAP_LEAF_SIZE - 1)], (uint8_t)v, memory_order_release);
    }
    return 1;
}

HAK_COLD void region_map_clear(uintptr_t start, size_t len)
{
    uintptr_t first = start >> HAK_CHUNK_SHIFT, last = (start + len - 1) >> HAK_CHUNK_SHIFT;
    for (uintptr_t c = first; c <= last; c++) {
        uint8_t *leaf = atomic_load(&region_map_top[(c << HAK_CHUNK_SHIFT) >> 32]);
        if (leaf)
            atomic_store_explicit((_Atomic uint8_t *)&leaf[c & (MAP_LEAF_SIZE - 1)], MAP_NONE, memory_order_release);
    }
}
