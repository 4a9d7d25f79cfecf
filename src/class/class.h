/* The size-class table: the one list of classes every module reads.  Tiny C0-C20: 8, 16, 32,
 * then 16-byte multiples, four steps per doubling up to 1 KiB; mid C21-C52 go on so to 256 KiB. */
#ifndef HAK_CLASS_H
#define HAK_CLASS_H

#include <stddef.h>
#include <stdint.h>
#include "../common/common.h"

#define HAK_NCLASSES     53
#define HAK_NTINY        21
#define HAK_TINY_MAX     1024u
#define HAK_MID_MAX      (256u * 1024u)

/* Chunks are the unit of the region map; every region is a whole number of
 * chunks starting on a chunk boundary, so a region never shares a chunk. */
#define HAK_CHUNK_SHIFT  16
#define HAK_CHUNK_SIZE   ((size_t)1 << HAK_CHUNK_SHIFT)
#define HAK_CHUNK_MASK   (HAK_CHUNK_SIZE - 1)

/* A class's slot index indexes the slots' control words.  For a tiny class its low five bits
 * are the tag shift (the granule: the largest power of two dividing the block size), and
 * the bits above tell apart the classes that share a shift (16, 48, 80 and 112 B: 4, 36,
 * 68, 100).  The number the hot paths hold (Phase 91's entry, Phase 93's cache) is the
 * class's live tag, TAG_LIVE(cls) = 0x80 + index: 32-bit shifts and rotates use only the
 * count's low five bits, so it is the shift; less 0x80, folded into a displacement, it is
 * the index; and it is the byte malloc writes.  Every class, and the invalid class
 * SLOT_CLASS_NONE (= HAK_NCLASSES), has its own index below SLOT_NINDEX. */
#define SLOT_NINDEX 128
#define SLOT_CLASS_NONE HAK_NCLASSES     /* an invalidated Phase 91 entry's class: no slots, no route */
extern uint8_t class_slot_index[HAK_NCLASSES + 1];
extern uint8_t class_of_slot[SLOT_NINDEX];
#define SLOT_INDEX(cls) (class_slot_index[(cls)])
#define SLOT_CLASS(s)   (class_of_slot[(s)])

/* A span's class id (mid blocks carved from spans, Phase 100): past every size class and
 * the large row, so it indexes no per-class array; its slot index is one no class takes
 * (class_slot_indexes_init), so its live tag is told apart with one compare. */
#define HAK_CLS_SPAN     (HAK_NCLASSES + 1)
#define SLOT_INDEX_SPAN  (SLOT_NINDEX - 1)

#include "tag.h"

enum route_kind {          /* 0 is deliberately no route: it sends the op to the cold path */
    ROUTE_NONE  = 0,
    ROUTE_SLOTS = 1,       /* per-thread inline slots (fixed-capacity LIFO array) */
    ROUTE_TLIST = 2,       /* per-thread intrusive free list */
    ROUTE_MID   = 3,       /* mid classes, no thread cache: with Phase 100 off, and for memalign */
    ROUTE_LARGE = 4,       /* above HAK_MID_MAX, no class: src/large */
};

struct size_class {
    uint32_t size;         /* block size in bytes */
    uint8_t  chunks;       /* region size in 64 KiB chunks */
    uint8_t  gshift;       /* log2 of the tag granule: every block start is a multiple of it */
    uint8_t  tiny;         /* 1 for C0-C20 */
    uint8_t  default_route;
    /* derived once at start-up by class_table_init: */
    uint32_t blocks_off;   /* offset of block 0 from the region start */
    uint32_t nblocks;      /* blocks per region */
    uint32_t ntags;        /* tag bytes: one per granule, a whole number of words */
    uint32_t cache_max;    /* per-thread list bound on the TLIST route (0: mid classes keep none) */
};

extern struct size_class class_table[HAK_NCLASSES];

void class_table_init(size_t header_bytes);   /* sizeof(struct region) */
const char *class_route_name(int route);

/* Size -> class by arithmetic (the pre-Phase-91 router).  Valid for 0 < n <= HAK_MID_MAX.
 * Up to 32 B: 8, 16, 32.  (32, 64]: steps of 16.  From 64 B on: four steps per doubling. */
HAK_INLINE unsigned class_of_size(size_t n)
{
    if (n <= 16)
        return n > 8;
    if (n <= 64)
        return n <= 32 ? 2 : 3 + (unsigned)((n - 33) >> 4);
    unsigned k = 63u - (unsigned)__builtin_clzl(n - 1);      /* floor(log2(n-1)), >= 6 */
    return 5 + (k - 6) * 4 + (unsigned)((n - 1 - ((size_t)1 << k)) >> (k - 2));
}

HAK_INLINE size_t class_size(unsigned cls)
{
    return class_table[cls].size;
}

/* A misuse report naming the block by its class id: a size class, HAK_CLS_SPAN (a mid
 * block of a span), HAK_NCLASSES (a large block) or -1 (none known). */
static inline void class_misuse(const char *call, const void *p, const char *what, int cls)
{
    if (cls == HAK_NCLASSES)
        report_misuse(call, p, what, REPORT_LARGE_BLOCK, 0);
    else if (cls == HAK_CLS_SPAN)
        report_misuse(call, p, what, REPORT_MID_BLOCK, 0);
    else
        report_misuse(call, p, what, cls < 0 ? REPORT_NO_BLOCK : cls, cls < 0 ? 0 : class_table[cls].size);
}

#endif
