/* The region map: one byte per 64 KiB chunk of the address space saying whether it is ours.
 * It answers "is this pointer hakmem's" without touching the pointer, so foreign pointers are safe. */
#ifndef HAK_REGION_MAP_H
#define HAK_REGION_MAP_H

#include <stddef.h>
#include <stdint.h>
#include "region.h"

/* Byte values: 0 not ours; 1..254 a region chunk, value-1 chunks after the
 * region's first; MAP_LARGE a chunk touched by a large mapping (the large
 * registry is then the authority, so this value may safely outlive it). */
#define MAP_NONE   0u
#define MAP_LARGE  0xFFu
#define MAP_REGION_MAX 0xFEu             /* a region chunk's byte is 1..MAP_REGION_MAX */

#define MAP_TOP_BITS  16                 /* 48-bit addresses: top index p >> 32 */
#define MAP_LEAF_BITS (32 - HAK_CHUNK_SHIFT)
#define MAP_LEAF_SIZE ((size_t)1 << MAP_LEAF_BITS)  /* chunks per 4 GiB */

extern uint8_t *_Atomic region_map_top[1u << MAP_TOP_BITS];

HAK_INLINE unsigned region_map_get(uintptr_t p)
{
    if (unlikely(p >> 48))
        return MAP_NONE;
    uint8_t *leaf = atomic_load_explicit(&region_map_top[p >> 32], memory_order_relaxed);
    if (unlikely(leaf == NULL))
        return MAP_NONE;
    return __atomic_load_n(&leaf[(p >> HAK_CHUNK_SHIFT) & (MAP_LEAF_SIZE - 1)], __ATOMIC_RELAXED);   /* written by other threads' mappings */
}

/* Header of the region holding p, given p's map byte b in 1..254: b - 1 chunks back
 * from p's chunk. */
HAK_INLINE struct region *region_from_map(uintptr_t p, unsigned b)
{
    return (struct region *)(((p >> HAK_CHUNK_SHIFT) + 1 - b) << HAK_CHUNK_SHIFT);
}

/* b is a region chunk's byte: not NULL's or a foreign pointer's (MAP_NONE), nor a large
 * block's (MAP_LARGE).  One compare: b - 1 wraps MAP_NONE round to the top. */
HAK_INLINE int region_map_is_region(unsigned b)
{
    return b - 1u < MAP_REGION_MAX;
}

/* Region of a block we know is ours (it came from our own caches). */
HAK_INLINE struct region *region_of_block(void *p)
{
    uintptr_t a = (uintptr_t)p;
    return region_from_map(a, region_map_get(a));
}

/* Cold side, src/region/map.c */
int  region_map_set(uintptr_t start, size_t len, unsigned first_value, int per_chunk_offset);
void region_map_clear(uintptr_t start, size_t len);

#endif
