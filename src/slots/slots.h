/* The per-thread heap and its caches: policy snapshot, inline slots, per-class free lists,
 * owned regions; every slot push, pop, refill and spill, and the heap's regions coming home. */
#ifndef HAK_SLOTS_H
#define HAK_SLOTS_H

#include <pthread.h>
#include "../common/common.h"
#include "../policy/policy.h"
#include "../region/region.h"

/* TLIST and MID routes: an intrusive LIFO list through the blocks' first word. */
struct list_bin {
    void    *head;
    uint32_t count;
    uint32_t max;
};

struct class_regions {
    struct region *cur;              /* region blocks are carved / popped from */
    struct region *list;             /* other regions owned by this heap, circular */
    uint32_t n;
    /* A region other than cur may have blocks: set when blocks go back to one (locally,
     * or by another thread onto an empty remote stack), cleared by a refill's scan that
     * saw every region.  Without it a heap whose regions are all full missed on each
     * header of a 16-region scan before every new region. */
    uint8_t  scan;                   /* (heap.remote_scan holds the same for other threads) */
};
/* scan's second bit (Phase 102): the class's slots overflowed since its last refill.  The
 * overflowing free stores both bits in the one store it made already. */
#define SCAN_REGIONS 1u
#define SCAN_SPILLED 2u

/* Phase 100: the heap's spans and their free runs, binned by length (region/span_layout.h).  Only
 * the owner touches it. */
struct span_heap {
    void    *quick[SPAN_QUICK_LEN];  /* cached blocks by length, linked through their first word */
    uint8_t  quick_n[SPAN_QUICK_LEN];
    uint32_t quick_bytes;
    uint64_t nonempty[SPAN_BIN_WORDS];   /* bins holding a run */
    struct span_node *bin[SPAN_NBINS];
    struct region *list;             /* the spans this heap owns, circular */
    struct region *empty;            /* one with nothing live, kept for the next carve */
    struct region *held;             /* Phase 101: the span whose remote frees are merging, held */
    uint32_t n;
};

/* OBSERVE counters of one heap; index HAK_NCLASSES counts large blocks.  A span block's
 * free counts under its size's class; the hot free's count under the span's own index
 * (HAK_CLS_SPAN) is never reported. */
#define OBS_SLOTS (HAK_CLS_SPAN + 1)
struct heap_obs {
    uint64_t allocs[OBS_SLOTS];
    uint64_t frees[OBS_SLOTS];
    uint64_t slot_hits[OBS_SLOTS];
    uint64_t overflows[OBS_SLOTS];   /* frees that found the cache full */
    uint64_t refills[OBS_SLOTS];
    int64_t  live_synced;            /* bytes this heap last added to the global live count */
};

#define HEAP_OUTBOX_WAYS 8
struct remote_batch;

#define RCACHE_SIZE 256
#define RCACHE_EMPTY (~(uintptr_t)0) /* no chunk number: free(NULL) has key 0 and must miss */
#define REFILL_START 4      /* blocks a heap's first refill of a class takes (slow start) */
/* Phase 102: how far a class's slots may grow, in blocks and in the bytes they hold, and
 * the bytes all grown classes of a heap may hold (a thread's caches stay bounded however
 * many classes it bursts in, as tcmalloc bounds a thread cache's total). */
#define SLOTS_GROW_MAX   2048u
#define SLOTS_GROW_BYTES (128u << 10)
#define SLOTS_GROW_HEAP  (512u << 10)

/* What a free needs of a cached region besides its tags, so it never reads the header.
 * Indexed like the keys (one index register, scale 8). */
struct rcache_info {
    uint8_t live_tag, pad[3];        /* the class's live tag (its low bits: the shift) */
    uint32_t amask;                  /* the region's gmask: a pointer inside a granule has a bit of it */
};

struct heap {
    /* Inline slots: fixed-capacity LIFO arrays that never touch the blocks they hold.
     * Every class has a control pair, so neither malloc nor free checks the route: top
     * points at the last item pushed, and item 0 of each array is a NULL sentinel, so a
     * pop that reads NULL is a miss without a count compare.  A push needs top < lim;
     * lim is NULL where the route is not SLOTS, and a publisher stores NULL there
     * (relaxed atomic) to send the owner's next free to the cold path. */
    void   **slot_top[SLOT_NINDEX];     /* first: small displacements */
    struct policy_snapshot snap;     /* read on every malloc and free */
    void   **slot_lim[SLOT_NINDEX];     /* apart from the tops: both scale by 8 */
    void    *slot_none;              /* the sentinel every non-slots class's top points at */
    void    *slot_items[HAK_NTINY][HAK_SLOTS_CAP_MAX + 1];
    /* Phase 102: a class that outgrew slot_items: its slots (blocks, 0 if it has not) and
     * the array that holds them, mapped at the first growth and kept for the heap's life. */
    uint16_t slot_grown[HAK_NTINY];
    void   **slot_big[HAK_NTINY];
    struct list_bin lists[HAK_NCLASSES];
#if HAK_PHASE93
    /* Phase 93: this heap's own tiny regions, direct-mapped by the low byte of the chunk
     * number, each entry the chunk number itself (p >> HAK_CHUNK_SHIFT).  An entry is set while the heap
     * owns the region and cleared when it leaves, so a hit proves both "ours" and "owned
     * here".  256 entries make the index one byte move. */
    uintptr_t rcache[RCACHE_SIZE];
    struct rcache_info rinfo[RCACHE_SIZE];
#endif
    struct class_regions regions[HAK_NCLASSES];
    /* Slow start: how many blocks the class's next refill takes, doubling from
     * REFILL_START up to half its cache, so that a thread that allocates a few blocks of
     * a class and exits neither searches a region for more nor puts the rest back. */
    uint16_t refill_want[HAK_NCLASSES];
    struct span_heap span;
    uint64_t empty_cur;              /* mid classes whose current region emptied (a hint) */
    struct heap *next_heap;          /* all heaps, for fork and reuse */
    /* Classes into whose regions another thread pushed the first remote free since the
     * owner's last scan (class_regions.scan for them): a line of its own, only ever
     * accessed atomically, so the writers never share a word or a line with the owner's
     * plain fields. */
    _Atomic uint64_t remote_scan HAK_ALIGNED(HAK_CACHE_LINE);
    /* Phase 107: batches of this heap's blocks other threads freed, pushed by them (one
     * compare-and-swap a batch) and taken whole by the owner (cold/batch.c).  In the line
     * other threads write already. */
    _Atomic(struct remote_batch *) inbox;
    /* Phase 100: another thread freed the first block onto one of this heap's spans'
     * empty remote stacks since the owner last merged them.  A line of its own too: every
     * span malloc reads it, and tiny classes' remote frees (remote_scan) must not make
     * that read miss. */
    _Atomic uint32_t span_remote HAK_ALIGNED(HAK_CACHE_LINE);
    uint8_t  live;                   /* owned by a running thread */
    /* Its thread's words above while the thread runs and can be visited (NULL otherwise),
     * and the purger's own: the thread's `cold` when it last changed, when it did or the
     * heap was last visited, and how long until the next visit of the idle heap. */
    struct heap_thread *thread;
    uint32_t visit_cold, visit_ms, visit_wait;
    /* Phase 107: this thread's frees of other heaps' tiny blocks, a batch per owner by a
     * hash of its address, and one empty batch kept for the next; `out_held` counts the
     * batches not sent yet (other threads read it: an idle thread's are sent for it). */
    struct remote_batch *outbox[HEAP_OUTBOX_WAYS];
    struct remote_batch *outbox_spare;
    /* Taken off the inbox, not yet into the caches: the owner's (a visit's while it sleeps),
     * read by the purger to know a visit is wanted. */
    _Atomic(struct remote_batch *) inbox_local;
    _Atomic uint32_t out_held;
    uint32_t out_cold;               /* `cold` when a helper last looked (cold/batch.c) */
#if HAK_OBSERVE
    struct heap_obs obs;             /* last: off the hot cache lines */
#endif
};

/* Counting costs nothing when OBSERVE is compiled out, one predictable branch when off. */
#if HAK_OBSERVE
#define OBS_INC(h, field, cls) do { if (unlikely((h)->snap.observe)) (h)->obs.field[cls]++; } while (0)
#else
#define OBS_INC(h, field, cls) ((void)0)
#endif

/* The control words of the class whose live tag is t, the index t - 0x80 written as an
 * address so that the subtraction folds into the displacement of every access. */
#define HEAP_WORD(h, arr, t) (*(void ***)((uintptr_t)(h) + offsetof(struct heap, arr) \
                                          + ((uintptr_t)(t) - 0x80u) * sizeof(void **)))
#define HEAP_TOP(h, t) HEAP_WORD(h, slot_top, t)
#define HEAP_LIM(h, t) HEAP_WORD(h, slot_lim, t)

/* Every thread starts on the static empty heap: all routes ROUTE_NONE and all
 * caches empty, so its first call misses into the cold path, which builds a real one. */
HAK_INLINE uintptr_t heap_rcache_key(uintptr_t p)
{
    return p >> HAK_CHUNK_SHIFT;
}

HAK_INLINE unsigned heap_rcache_index(uintptr_t p)
{
    return (uint8_t)heap_rcache_key(p);
}

HAK_INLINE uintptr_t *heap_rcache_slot(struct heap *h, uintptr_t p)
{
#if HAK_PHASE93
    return &h->rcache[heap_rcache_index(p)];
#else
    (void)h, (void)p;
    return NULL;
#endif
}

extern struct heap heap_empty;

/* The thread-local words malloc reads first, in one block, so that one load of its offset
 * serves them all: the thread's heap, and the profiling library's byte countdown to the next
 * sample (api/sampler.c; libhakmem.so never touches it).  Then the words by which the
 * purger may visit the heap while its thread idles (cold/visit.c): `cold` counts the
 * thread's entries to and exits from the paths that touch its regions, odd while it is
 * in one (and its changes are the purger's clock of the thread's idleness); `visit` is
 * set while the purger visits. */
struct heap_thread {
    struct heap *heap;
    int64_t prof_left;
    _Atomic uint32_t cold;
    _Atomic uint8_t visit;
    uint8_t exited;                  /* its heap was retired: a free makes no new one */
};
extern HAK_TLS struct heap_thread heap_thread;
#define heap_tls (heap_thread.heap)

/* The array of cls's slots, item 0 its sentinel. */
HAK_INLINE void **slots_base(const struct heap *h, unsigned cls)
{
    return h->slot_grown[cls] ? h->slot_big[cls] : (void **)h->slot_items[cls];
}

HAK_INLINE void **slots_lim(struct heap *h, unsigned cls)
{
    return HAK_LOAD_RELAXED(h->slot_lim[SLOT_INDEX(cls)]);
}

/* Inline slots pop, by live tag: a class off the SLOTS route (or an invalidated Phase 91
 * entry, class SLOT_CLASS_NONE) has an empty array, whose top reads as the NULL sentinel,
 * so the pop needs no route check. */
HAK_INLINE void *slots_pop(struct heap *h, size_t t)
{
    void **top = HEAP_TOP(h, t);
    void *p = *top;
    if (likely(p != NULL)) {
#if defined(__x86_64__) && defined(__GNUC__)
        /* One read-modify-write of the top in memory, where the C form is a register
         * decrement and a store: the instruction Phase 107's clear of the block adds back. */
        __asm__("subq $8, %0" : "+m"(HEAP_TOP(h, t)));
#else
        HEAP_TOP(h, t) = top - 1;
#endif
        OBS_INC(h, allocs, TAG_CLASS(t));
        OBS_INC(h, slot_hits, TAG_CLASS(t));
    }
    return p;
}

/* Inline slots push, by live tag: 0 when they are full, or the class has none (a NULL
 * limit: no slots route, or a policy change for the owner to pick up). */
HAK_INLINE int slots_push(struct heap *h, size_t t, void *p)
{
    void **top = HEAP_TOP(h, t) + 1;
    if (likely((uintptr_t)top <= (uintptr_t)HAK_LOAD_RELAXED(HEAP_LIM(h, t)))) {
        *top = p;
        HEAP_TOP(h, t) = top;
        return 1;
    }
    return 0;
}

/* Empty slots: every top at its NULL sentinel (item 0 of a tiny class's array, the shared
 * slot_none for every other index). */
HAK_INLINE void slots_reset(struct heap *h)
{
    for (unsigned i = 0; i < SLOT_NINDEX; i++)
        h->slot_top[i] = &h->slot_none;
    for (unsigned c = 0; c < HAK_NTINY; c++) {
        h->slot_grown[c] = 0;           /* a reused heap starts small again */
        h->slot_top[SLOT_INDEX(c)] = &h->slot_items[c][0];
    }
}

/* The limits the snapshot's routes and capacity give (caller: the heap lock, as a
 * publisher may clear them meanwhile). */
HAK_INLINE void slots_set_limits(struct heap *h)
{
    for (unsigned c = 0; c < HAK_NCLASSES; c++) {
        unsigned cap = c < HAK_NTINY && h->snap.phase102 && h->slot_grown[c] > h->snap.slots_cap
                       ? h->slot_grown[c] : h->snap.slots_cap;
        __atomic_store_n(&h->slot_lim[SLOT_INDEX(c)], h->snap.route[c] == ROUTE_SLOTS
                         ? slots_base(h, c) + cap : NULL, __ATOMIC_RELAXED);
    }
}

/* Items cached and room, as numbers, for the cold paths and tests. */
HAK_INLINE unsigned slots_count(const struct heap *h, unsigned cls)
{
    return cls < HAK_NTINY ? (unsigned)(h->slot_top[SLOT_INDEX(cls)] - slots_base(h, cls)) : 0;
}

HAK_INLINE unsigned slots_cap(struct heap *h, unsigned cls)
{
    void **lim = slots_lim(h, cls);
    return lim ? (unsigned)(lim - slots_base(h, cls)) : 0;
}

/* refill.c: the heap's regions, refill and spill (the caller holds no lock; these take the
 * arenas' when a region comes or goes) */
void *heap_alloc_class(struct heap *h, unsigned cls);        /* a block of cls: slots or list refilled */
void  heap_cache_push(struct heap *h, void *p, struct region *r);   /* a freed block of h's own */
void  heap_region_emptied(struct heap *h, struct region *r);
void  heap_flush_class(struct heap *h, unsigned cls);        /* every cached block of cls home */
void  heap_flush(struct heap *h);                            /* ... of every class */
void  heap_rcache_rebuild(struct heap *h);
void  heap_regions_release(struct heap *h);                  /* thread exit: every region on */
void  heap_collect_remote(struct heap *h);                   /* malloc_trim: other threads' frees in */
void  heap_visit_collect(struct heap *h);                    /* the same, for a visit (cold/visit.c) */

/* A block of h's own region r goes back home (the caller marks its class for a refill
 * scan).  Inline: the hot free takes it when the slots are full. */
HAK_INLINE void heap_put_in(struct heap *h, struct region *r, void *p)
{
    region_home_put(r, p);
    uint16_t used = (uint16_t)(r->used - 1);
    HAK_STORE_HINT(r->used, used);
    if (unlikely(used == 0))
        heap_region_emptied(h, r);
}

/* One block home, its class marked for a scan (a spill of many marks once and uses
 * heap_put_in). */
HAK_INLINE void heap_put_home(struct heap *h, struct region *r, void *p)
{
    h->regions[r->cls].scan = 1;
    heap_put_in(h, r, p);
}

/* A tiny block of h's own region r, whose tag is *tag, goes home from full slots: the hot
 * free has the tag's address and knows the class is tiny.  1 if r has emptied: the caller
 * calls heap_region_emptied (inside heap_enter, cold/visit.c).  A visit reads `used`
 * meanwhile (heap_visit_collect). */
HAK_INLINE int heap_put_home_tiny(struct heap *h, struct region *r, uint8_t *tag)
{
    h->regions[r->cls].scan = SCAN_REGIONS | SCAN_SPILLED;
    region_home_put_tiny(r, tag);
    uint16_t used = (uint16_t)(__atomic_load_n(&r->used, __ATOMIC_RELAXED) - 1);
    __atomic_store_n(&r->used, used, __ATOMIC_RELEASE);     /* after the tag and nhome */
    return unlikely(used == 0);
}

/* observe.c: OBSERVE's per-heap counters folded into the process totals (stats/) */
#if HAK_OBSERVE
void heap_obs_sync(struct heap *h);
void heap_obs_retire(struct heap *h);
const struct heap_obs *heap_obs_retired(void);               /* caller holds heap_obs_lock() */
void heap_obs_lock(void);
void heap_obs_unlock(void);
#else
static inline void heap_obs_sync(struct heap *h) { (void)h; }
static inline void heap_obs_retire(struct heap *h) { (void)h; }
#endif

#endif
