/* The size-class table: the one list of classes every module reads.
 * Tiny C0-C7 are powers of two (8 B .. 1 KiB); mid classes C8-C39 have four steps per doubling up to 256 KiB. */
#ifndef HAK_ROUTE_CLASSES_H
#define HAK_ROUTE_CLASSES_H

#include <stddef.h>
#include <stdint.h>
#include "../common/attrs.h"

#define HAK_NCLASSES     40
#define HAK_NTINY        8
#define HAK_TINY_MAX     1024u
#define HAK_MID_MAX      (256u * 1024u)

/* Chunks are the unit of the region map; every region is a whole number of
 * chunks starting on a chunk boundary, so a region never shares a chunk. */
#define HAK_CHUNK_SHIFT  16
#define HAK_CHUNK_SIZE   ((size_t)1 << HAK_CHUNK_SHIFT)

/* A class's slot index, cls + SLOT_BIAS, indexes the slots' control words.  For a tiny class
 * it is the tag shift (the granule is the block size, 8 << cls), so the one number the hot
 * paths hold (Phase 91's entry, Phase 93's cache) serves as both index and shift. */
#define SLOT_BIAS 3
#define SLOT_INDEX(cls) ((cls) + SLOT_BIAS)

enum route_kind {          /* 0 is deliberately no route: it sends the op to the cold path */
    ROUTE_NONE  = 0,
    ROUTE_SLOTS = 1,       /* per-thread inline slots (fixed-capacity LIFO array) */
    ROUTE_TLIST = 2,       /* per-thread intrusive free list */
    ROUTE_MID   = 3,       /* mid classes: per-thread list bounded in bytes */
    ROUTE_LARGE = 4,       /* straight from the OS, with a bounded cache */
};

struct route_class {
    uint32_t size;         /* block size in bytes */
    uint8_t  chunks;       /* region size in 64 KiB chunks */
    uint8_t  gshift;       /* log2 of the tag granule: every block start is a multiple of it */
    uint8_t  tiny;         /* 1 for C0-C7 */
    uint8_t  default_route;
    /* derived once at start-up by route_classes_init(): */
    uint32_t blocks_off;   /* offset of block 0 from the region start */
    uint32_t nblocks;      /* blocks per region */
    uint32_t ntags;        /* tag bytes (one per granule of the block area) */
    uint32_t cache_max;    /* per-thread list bound for TLIST/MID routes */
};

extern struct route_class route_classes[HAK_NCLASSES];

void route_classes_init(void);
const char *route_name(int route);

/* Size -> class by arithmetic (the pre-Phase-91 router).  Valid for 0 < n <= HAK_MID_MAX. */
HAK_INLINE unsigned route_class_of(size_t n)
{
    if (n <= 8)
        return 0;
    unsigned k = 63u - (unsigned)__builtin_clzl(n - 1);      /* floor(log2(n-1)), >= 3 */
    if (k < 10)
        return k - 2;
    return HAK_NTINY + (k - 10) * 4 + (unsigned)((n - 1 - ((size_t)1 << k)) >> (k - 2));
}

HAK_INLINE size_t route_class_size(unsigned cls)
{
    return route_classes[cls].size;
}

#endif
