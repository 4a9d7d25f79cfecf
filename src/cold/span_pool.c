/* Spans (Phase 100) joining and leaving a heap: a new or adopted span when no free run
 * fits, an emptied one back to the arenas, and every span at thread exit. */
#include <string.h>
#include "cold.h"

static void span_list_add(struct heap *h, struct region *r)
{
    region_ring_add(&h->span.list, r);
    h->span.n++;
}

static void span_list_remove(struct heap *h, struct region *r)
{
    region_ring_remove(&h->span.list, r);
    if (h->span.empty == r)
        h->span.empty = NULL;
    h->span.n--;
}

/* Another thread has freed blocks into h's spans (h->span_remote, which the first block
 * pushed on an empty remote stack sets; taken before the stacks are, so a push this scan
 * misses sets it again): all of them are merged, so they are reused before fresh runs
 * are carved.  1 if any was. */
HAK_COLD int cold_span_merge_pending(struct heap *h)
{
    if (!atomic_exchange(&h->span_remote, 0))
        return 0;
    struct region *r = h->span.list;
    int merged = 0;
    for (unsigned i = h->span.n; i; i--) {
        struct region *next = r->next;      /* r may leave the heap as it empties (only r) */
        if (region_remote_pending(r)) {
            span_merge_remote(h, r);
            merged = 1;
        }
        r = next;
    }
    return merged;
}

/* No free run fits: the quick cache is merged, else an abandoned span adopted, else a new
 * one taken from the arenas.  0: out of memory. */
HAK_COLD int cold_span_refill(struct heap *h)
{
    if (h->span.quick_bytes) {
        span_quick_flush(h);
        return 1;
    }
    struct region *r = region_adopt(HAK_CLS_SPAN, h);
    if (r != NULL) {
        span_list_add(h, r);
        span_link_runs(h, r);
        span_merge_remote(h, r);
        return 1;
    }
    r = region_pool_take_span(h);
    if (r == NULL)
        return 0;
    span_list_add(h, r);
    span_run_new(h, r);
    return 1;
}

/* r's last block came back (its run [SPAN_FIRST, SPAN_NGRAN) marked, in no bin).  One empty
 * span stays, so a loop that allocates and frees one block does not take and release a
 * span each time; a second goes back to the arenas.  1: r stays (the caller bins its run). */
HAK_COLD int cold_span_emptied(struct heap *h, struct region *r)
{
    struct region *kept = h->span.empty;
    if (kept != NULL && kept != r && kept->used == 0) {
        span_list_remove(h, r);
        region_pool_release(r);
        return 0;
    }
    h->span.empty = r;
    return 1;
}

/* Thread exit: blocks other threads freed are merged (or cached), then the cache is, while
 * the bins are whole; then the bins are dropped (no one links through them again) and
 * each span goes to the arenas, or, with blocks still live, to the abandoned spans for
 * another heap to adopt.  (The cache last: a merge may cache, and a block cached here
 * once its span is abandoned would be handed out by this heap's next thread.) */
HAK_COLD void cold_span_release_all(struct heap *h)
{
    struct region *r = h->span.list;
    for (unsigned i = h->span.n; i; i--) {
        struct region *next = r->next;
        span_merge_remote(h, r);
        r = next;
    }
    span_quick_flush(h);
    memset(h->span.nonempty, 0, sizeof h->span.nonempty);
    memset(h->span.bin, 0, sizeof h->span.bin);
    while ((r = h->span.list) != NULL) {
        span_list_remove(h, r);
        if (r->used == 0)
            region_pool_release(r);
        else
            region_abandon(r);
    }
    h->span.empty = NULL;
}
