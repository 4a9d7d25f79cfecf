/* The profiler's tables, shared by table.c (which keeps them) and dump.c (which writes them
 * out); both under the profiler's lock. */
#ifndef HAK_PROF_TABLE_H
#define HAK_PROF_TABLE_H

#include "prof.h"

/* Bounds of the profiler's own memory: stacks and their frames are mapped whole at start
 * (resident only as they fill); the live-sample table (24 B an entry) doubles from 96 KiB
 * up to 96 MiB, which at half load and the default rate holds the samples of 1 TiB live. */
#define PROF_STACKS_MAX (1u << 16)
#define PROF_PCS_MAX    (1u << 20)
#define PROF_BUCKETS    (1u << 16)
#define PROF_BLOCKS_MIN ((size_t)1 << 12)
#define PROF_BLOCKS_MAX ((size_t)1 << 22)

struct prof_stack {
    uint64_t hash;
    uint32_t first, depth;           /* its frames: pcs[first .. first + depth) */
    uint32_t next;                   /* the next stack of the hash bucket */
    uint64_t live_n, live_bytes;     /* samples live and their bytes, as sampled */
    uint64_t total_n, total_bytes;   /* every sample since start */
    double   est_live;               /* live bytes scaled back to an estimate */
};

struct prof_block {
    uintptr_t p;                     /* 0: an empty slot */
    uint64_t  size;
    uint32_t  stack;
    float     est;                   /* the bytes this sample stands for (prof_record's est) */
};

struct prof_tables {
    size_t rate;
    uint64_t interval;
    double next_dump, est_live;
    unsigned dumps;
    struct prof_stack *stacks;
    uint32_t nstacks;
    uintptr_t *pcs;
    uint32_t npcs;
    uint32_t *buckets;
    struct prof_block *blocks;
    size_t cap, nblocks;
    uint64_t dropped;
};

extern struct prof_tables prof_tab;

#endif
