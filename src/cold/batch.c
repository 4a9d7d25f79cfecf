/* Phase 107: frees of other threads' tiny blocks travel home by the batch.  The freeing
 * thread gathers them in memory of its own, a batch per owner; the owner takes batches in whole. */
#include <time.h>
#include "cold.h"

/* The freeing thread writes none of the owner's lines per free: it reads the block's tag
 * (the hot free did), writes the owner's mark into the block's first word, and appends the
 * pointer to its batch for that owner.  A batch goes with one compare-and-swap onto the
 * owner's inbox; the owner takes the inbox with one exchange on a cold path and the batches
 * in one a cold path, checking each block then: its mark (a second free of a block already in a batch
 * finds it, and one in a batch that arrives after its owner took the block back finds it
 * cleared, since every hand-out clears it) and its tag (still live).  A free of a block
 * the owner has freed itself finds its tag not live at the call. */

#define BATCH_BYTES 4096u
#define BATCH_CAP ((BATCH_BYTES - 3 * sizeof(void *)) / sizeof(void *))
#define BATCH_HOLD ((uint32_t)64 << 10)     /* block bytes a batch holds before it goes */
#define BATCH_SLAB ((size_t)64 << 10)       /* batches are mapped this much at a time */
#define HELP_MS 100u                        /* how often a busy thread looks for idle ones */

struct remote_batch {
    struct remote_batch *next;
    struct heap *to;
    uint32_t n, bytes;
    void *blocks[BATCH_CAP];
};
_Static_assert(sizeof(struct remote_batch) <= BATCH_BYTES, "a batch fills its slab slot");

/* Empty batches of every thread: a producer's consumers need new ones as fast as the
 * producer takes theirs in, so they flow through here, a lock a batch. */
static pthread_mutex_t batch_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct remote_batch *batch_pool;
/* Heaps whose outbox holds a block, and when a thread last looked for idle ones. */
static _Atomic uint32_t batch_holders;
static _Atomic uint32_t batch_help_ms;

void heap_batch_lock(void)   { pthread_mutex_lock(&batch_mutex); }
void heap_batch_unlock(void) { pthread_mutex_unlock(&batch_mutex); }
void heap_batch_after_fork_child(void) { pthread_mutex_init(&batch_mutex, NULL); }

static struct remote_batch *batch_new(struct heap *h)
{
    struct remote_batch *b = h->outbox_spare;
    if (b != NULL) {
        h->outbox_spare = NULL;
        return b;
    }
    pthread_mutex_lock(&batch_mutex);
    if ((b = batch_pool) != NULL)
        batch_pool = b->next;
    pthread_mutex_unlock(&batch_mutex);
    if (b != NULL)
        return b;
    char *m = os_map(BATCH_SLAB);
    if (m == NULL)
        return NULL;
    pthread_mutex_lock(&batch_mutex);
    for (size_t off = BATCH_BYTES; off < BATCH_SLAB; off += BATCH_BYTES) {
        struct remote_batch *x = (struct remote_batch *)(m + off);
        x->next = batch_pool;
        batch_pool = x;
    }
    pthread_mutex_unlock(&batch_mutex);
    return (struct remote_batch *)m;
}

/* An emptied batch: kept by h (its own thread) for its next, or back to the pool. */
static void batch_free(struct heap *h, struct remote_batch *b)
{
    if (h != NULL && h->outbox_spare == NULL) {
        h->outbox_spare = b;
        return;
    }
    pthread_mutex_lock(&batch_mutex);
    b->next = batch_pool;
    batch_pool = b;
    pthread_mutex_unlock(&batch_mutex);
}

/* h's outbox holds one more batch, or one less (n): `out_held` counts them, and
 * batch_holders the heaps whose count is not 0. */
static void held_add(struct heap *h, int32_t n)
{
    uint32_t was = atomic_load_explicit(&h->out_held, memory_order_relaxed);
    atomic_store_explicit(&h->out_held, was + (uint32_t)n, memory_order_relaxed);
    if (was == 0)
        atomic_fetch_add_explicit(&batch_holders, 1, memory_order_relaxed);
    else if (was + (uint32_t)n == 0)
        atomic_fetch_sub_explicit(&batch_holders, 1, memory_order_relaxed);
}

/* h's batch b goes onto its owner's inbox (release: its blocks and marks before it). */
static void batch_send(struct heap *h, struct remote_batch *b)
{
    struct heap *o = b->to;
    held_add(h, -1);
    struct remote_batch *head = atomic_load_explicit(&o->inbox, memory_order_relaxed);
    do {
        b->next = head;
    } while (!atomic_compare_exchange_weak_explicit(&o->inbox, &head, b, memory_order_release,
                                                    memory_order_relaxed));
}


static unsigned outbox_way(const struct heap *o)
{
    return (unsigned)((uintptr_t)o >> 12) & (HEAP_OUTBOX_WAYS - 1);   /* heaps are pages apart */
}

/* The way for o in h's outbox, with a batch for o that has room (a full one was sent), or
 * NULL when no batch can be mapped. */
static HAK_NOINLINE struct remote_batch **outbox_open(struct heap *h, struct heap *o)
{
    struct remote_batch **w = &h->outbox[outbox_way(o)], *b = *w;
    if (b != NULL) {                        /* another owner's: it goes now */
        batch_send(h, b);
        *w = NULL;
    }
    if ((b = batch_new(h)) == NULL)
        return NULL;
    b->to = o;
    b->n = b->bytes = 0;
    *w = b;
    held_add(h, 1);
    return w;
}

/* p, a live tiny block of o's region r, freed by h's thread: into h's batch for o.  0 if
 * it must go the old way (o's thread is leaving, or no batch could be mapped). */
HAK_COLD int heap_outbox_put(struct heap *h, struct heap *o, struct region *r, void *p)
{
    if (!__atomic_load_n(&o->live, __ATOMIC_RELAXED))
        return 0;
    if (region_marked(r, p, o)) {
        class_misuse("free", p, "double free (already freed by a thread, on its way home)", (int)r->cls);
        return 1;
    }
    uint32_t e = heap_enter();              /* the outbox is h's: a visit may send it */
    struct remote_batch **w = &h->outbox[outbox_way(o)], *b = *w;
    if (unlikely(b == NULL || b->to != o) && ((w = outbox_open(h, o)) == NULL)) {
        heap_leave(e);                      /* out of memory for batches */
        return 0;
    }
    b = *w;
    HAK_POISON(p, r->bsize);
    region_mark(r, p, o);
    stats_remote_free(r->cls);
    b->blocks[b->n++] = p;
    b->bytes += r->bsize;
    if (unlikely(b->n == BATCH_CAP || b->bytes >= BATCH_HOLD)) {
        batch_send(h, b);
        *w = NULL;
    }
    heap_leave(e);
    return 1;
}

HAK_COLD void heap_outbox_flush(struct heap *h)
{
    for (unsigned i = 0; i < HEAP_OUTBOX_WAYS; i++) {
        if (h->outbox[i] != NULL) {
            batch_send(h, h->outbox[i]);
            h->outbox[i] = NULL;
        }
    }
}

/* Reported when a batch's block is not what its free left: its mark gone (freed twice, the
 * first free's block taken back and handed out again) or its tag not live. */
static int take_check(struct heap *h, struct region *r, void *p)
{
    if (!region_marked(r, p, h)) {
        class_misuse("free", p, "double free (freed by another thread, found when its batch came home)",
                     (int)r->cls);
        return 0;
    }
    return 1;
}

/* The owner (h's thread, in a cold path): the blocks of batch b go into its caches, as its
 * own frees do. */
static void take_batch(struct heap *h, struct remote_batch *b)
{
    for (uint32_t i = 0; i < b->n; i++) {
        void *p = b->blocks[i];
        struct region *r = region_of_tiny(p);
        uint8_t *t;
        if (!take_check(h, r, p))
            continue;
        if (atomic_load_explicit(&r->owner, memory_order_relaxed) != h) {
            heap_free_remote_now(p, r);         /* h was another thread's when it was freed */
        } else if (!region_tag_check_live(r, (uintptr_t)p, &t)) {
            region_report_block("free", r, (uintptr_t)p, *t);
        } else {
            /* Into its slots, or home when they are full, as the hot free does (which
             * also tells the slots to grow, Phase 102). */
            size_t lt = r->live_tag;
            if (slots_push(h, lt, p)) {
                __atomic_store_n(t, (uint8_t)TAG_FREE, __ATOMIC_RELAXED);
            } else if (HAK_LOAD_RELAXED(HEAP_LIM(h, lt)) != NULL) {
                if (heap_put_home_tiny(h, r, t))
                    heap_region_emptied(h, r);
            } else {                            /* not a slots class */
                __atomic_store_n(t, (uint8_t)TAG_FREE, __ATOMIC_RELAXED);
                heap_cache_push(h, p, r);
            }
        }
    }
    batch_free(h, b);
}

/* Every batch that has come, into h's caches (thread exit, malloc_trim). */
HAK_COLD void heap_inbox_take(struct heap *h)
{
    struct remote_batch *b = atomic_load_explicit(&h->inbox_local, memory_order_relaxed);
    atomic_store_explicit(&h->inbox_local, NULL, memory_order_relaxed);
    for (int shared = 0; shared < 2; shared++) {
        while (b != NULL) {
            struct remote_batch *next = b->next;
            take_batch(h, b);
            b = next;
        }
        b = atomic_exchange_explicit(&h->inbox, NULL, memory_order_acquire);
    }
}

/* Any thread, for h's that cannot take its inbox in (idle, or gone): each block goes home
 * the old way, by its tag, to whoever owns its region now. */
static void forward_list(struct heap *h, struct remote_batch *b)
{
    while (b != NULL) {
        struct remote_batch *next = b->next;
        for (uint32_t i = 0; i < b->n; i++) {
            void *p = b->blocks[i];
            struct region *r = region_of_tiny(p);
            if (take_check(h, r, p))
                heap_free_remote_now(p, r);
        }
        batch_free(NULL, b);
        b = next;
    }
}

HAK_COLD void heap_inbox_forward(struct heap *h)
{
    forward_list(h, atomic_exchange_explicit(&h->inbox, NULL, memory_order_acquire));
}

/* A visit (h's thread out of its cold paths): the batches it took and has not taken in yet too. */
HAK_COLD void heap_inbox_forward_visited(struct heap *h)
{
    struct remote_batch *b = atomic_load_explicit(&h->inbox_local, memory_order_relaxed);
    atomic_store_explicit(&h->inbox_local, NULL, memory_order_relaxed);
    forward_list(h, b);
    heap_inbox_forward(h);
}

/* Thread exit: what it holds for others goes, and what others sent it comes in before its
 * caches are flushed; its spare batch goes back to the pool. */
HAK_COLD void heap_batch_retire(struct heap *h)
{
    heap_outbox_flush(h);
    heap_inbox_take(h);
    if (h->outbox_spare != NULL) {
        batch_free(NULL, h->outbox_spare);
        h->outbox_spare = NULL;
    }
}

static uint32_t coarse_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
    return (uint32_t)((uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u);
}

/* A thread in its cold path: a batch of its inbox in, and now and then (HELP_MS) the outboxes of
 * threads that have idled since it last looked sent for them (a thread asleep holding
 * other threads' blocks would otherwise hold them for as long as it sleeps). */
HAK_COLD void heap_batch_poll(struct heap *h)
{
    struct remote_batch *b = atomic_load_explicit(&h->inbox_local, memory_order_relaxed);
    if (b == NULL && atomic_load_explicit(&h->inbox, memory_order_relaxed) != NULL)
        b = atomic_exchange_explicit(&h->inbox, NULL, memory_order_acquire);
    if (b != NULL) {            /* one batch a time, for its slots: more went home unused */
        atomic_store_explicit(&h->inbox_local, b->next, memory_order_relaxed);
        take_batch(h, b);
    }
    if (atomic_load_explicit(&batch_holders, memory_order_relaxed) == 0)
        return;
    uint32_t now = coarse_ms(), last = atomic_load_explicit(&batch_help_ms, memory_order_relaxed);
    if (now - last >= HELP_MS
        && atomic_compare_exchange_strong(&batch_help_ms, &last, now))
        heap_visit_senders(h);
}
