/* The class table and each class's region layout, derived from it at start-up.
 * Region size per class is chosen so a region holds enough blocks to amortise its header. */
#include <stdlib.h>
#include "class.h"

/* A tiny class's granule is the largest power of two dividing its size. */
#define TINY(sz)         { .size = sz, .chunks = 1, .gshift = __builtin_ctz(sz), .tiny = 1, .default_route = ROUTE_TLIST }
#define TINY4(k)         TINY(5 << ((k) - 2)), TINY(6 << ((k) - 2)), TINY(7 << ((k) - 2)), TINY(8 << ((k) - 2))
/* Mid class in the doubling (2^k, 2^(k+1)]: step 2^(k-2); m = size/step (5..8). */
#define MID(k, m, ch)    { .size = (m) << ((k) - 2), .chunks = ch, .gshift = (k) - 2, .tiny = 0, .default_route = ROUTE_MID }
#define DOUBLING(k, ch)  MID(k, 5, ch), MID(k, 6, ch), MID(k, 7, ch), MID(k, 8, ch)

struct size_class class_table[HAK_NCLASSES] = {
    /* below 64 B the steps stay 16-byte multiples (the alignment of every block of 16 B
     * and up): 8, 16, 32, 48, 64 */
    TINY(8), TINY(16), TINY(32), TINY(48), TINY(64),
    TINY4(6),           /* 80 .. 128 B */
    TINY4(7),           /* 160 .. 256 B */
    TINY4(8),           /* 320 .. 512 B */
    TINY4(9),           /* 640 .. 1 KiB */
    /* mid regions hold 7..16 blocks of their largest class: small enough that a
     * region empties (and goes back to the arenas, for any class) often, large
     * enough to amortise the header */
    DOUBLING(10, 1),    /* 1280 .. 2 KiB    in 64 KiB regions */
    DOUBLING(11, 1),    /* 2560 .. 4 KiB    in 64 KiB regions */
    DOUBLING(12, 1),    /* 5 KiB .. 8 KiB   in 64 KiB regions */
    DOUBLING(13, 2),    /* 10 KiB .. 16 KiB in 128 KiB regions */
    DOUBLING(14, 4),    /* 20 KiB .. 32 KiB in 256 KiB regions */
    DOUBLING(15, 8),    /* 40 KiB .. 64 KiB in 512 KiB regions */
    DOUBLING(16, 16),   /* 80 KiB .. 128 KiB in 1 MiB regions */
    DOUBLING(17, 32),   /* 160 KiB .. 256 KiB in 2 MiB regions */
};

uint8_t class_slot_index[HAK_NCLASSES + 1];
uint8_t class_of_slot[SLOT_NINDEX];

/* Tiny classes get shift + 32 x (classes before them with the same shift); the mid classes
 * and SLOT_CLASS_NONE the lowest indexes left. */
static void class_slot_indexes_init(void)
{
    uint8_t taken[SLOT_NINDEX] = { 0 };
    unsigned next = 0;
    for (unsigned s = 0; s < SLOT_NINDEX; s++)
        class_of_slot[s] = HAK_NCLASSES;
    /* Phase 100's spans: a live tag no class has, which frees tell apart with one compare */
    taken[SLOT_INDEX_SPAN] = 1;
    class_of_slot[SLOT_INDEX_SPAN] = HAK_CLS_SPAN;
    for (unsigned c = 0; c <= HAK_NCLASSES; c++) {
        unsigned s;
        if (c < HAK_NTINY) {
            for (s = class_table[c].gshift; taken[s]; s += 32)
                ;
        } else {
            while (taken[next])
                next++;
            s = next;
        }
        taken[s] = 1;
        class_slot_index[c] = (uint8_t)s;
        class_of_slot[s] = (uint8_t)c;
    }
}

/* Bytes a per-thread TLIST list may hold before it spills half back. */
#define LIST_BYTES_MAX (128u * 1024u)

/* header_bytes: a region header's size (the region layer's struct), which block 0 follows. */
void class_table_init(size_t header_bytes)
{
    class_slot_indexes_init();
    for (unsigned c = 0; c < HAK_NCLASSES; c++) {
        struct size_class *rc = &class_table[c];
        size_t rsize = (size_t)rc->chunks << HAK_CHUNK_SHIFT;
        size_t size = rc->size;
        /* Blocks start on the largest power of two dividing the size (capped at a
         * chunk), so power-of-two classes are naturally aligned for memalign. */
        size_t align = size & (0 - size);
        if (align > HAK_CHUNK_SIZE)
            align = HAK_CHUNK_SIZE;
        if (align < 16)
            align = size < 16 ? size : 16;
        size_t ntags = ((rsize >> rc->gshift) + 7) & ~(size_t)7;   /* whole words: region_home_take */
        size_t off = (header_bytes + ntags + align - 1) & ~(align - 1);
        rc->blocks_off = (uint32_t)off;
        rc->nblocks = (uint32_t)((rsize - off) / size);
        if (rc->nblocks > UINT16_MAX)      /* struct region counts blocks in 16 bits */
            abort();
        rc->ntags = (uint32_t)ntags;
        uint32_t cap = (uint32_t)(LIST_BYTES_MAX / size);
        /* Mid blocks get no thread cache: cached blocks pinned half-empty regions of
         * every class a workload passed through (a growing buffer's, most of all). */
        rc->cache_max = !rc->tiny ? 0 : cap < 4 ? 4 : cap > 256 ? 256 : cap;
    }
}

const char *class_route_name(int route)
{
    switch (route) {
    case ROUTE_SLOTS: return "slots";
    case ROUTE_TLIST: return "tlist";
    case ROUTE_MID:   return "mid";
    case ROUTE_LARGE: return "large";
    default:          return "none";
    }
}
