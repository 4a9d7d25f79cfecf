/* Spans (Phase 100) joining and leaving a heap: a new or adopted span when no free run
 * fits, an emptied one back to the arenas, and every span at thread exit. */
#include <string.h>
#include "span.h"
#include "../arena/arena.h"

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
HAK_COLD int span_merge_pending(struct heap *h)
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

/* No free run of `want` granules: the quick cache is merged, else an abandoned span
 * adopted (one freed into since it was abandoned, else one with a run that fits), else a
 * new one taken from the arenas.  0: out of memory.  A freed-into span that still does not
 * fit stays with h: each such adoption answers one free, so a carve's adoptions are paid
 * for by the frees that made them. */
HAK_COLD int span_refill(struct heap *h, uint32_t want)
{
    if (h->span.quick_bytes) {
        span_quick_flush(h);
        return 1;
    }
    struct region *r = arena_span_adopt(h, want);
    if (r != NULL) {
        span_list_add(h, r);
        span_link_runs(h, r);
        span_merge_remote(h, r);
        return 1;
    }
    r = arena_span_take(h);
    if (r == NULL)
        return 0;
    span_list_add(h, r);
    span_run_new(h, r);
    return 1;
}

/* A span's chunks back to the arenas, but those it lent already (its TAG_LENT pseudo-
 * blocks), in as few extents as they allow, under one lock.  r is not read once they have gone. */
static void span_release(struct region *r)
{
    arena_sparse_forget(r);                 /* Phase 101: no pass reads it past here */
    const uint32_t cg = HAK_CHUNK_SIZE >> SPAN_GSHIFT;
    uint32_t lent = 0;                      /* a bit per chunk */
    uint16_t *len = span_len(r);
    for (uint32_t g = SPAN_FIRST; g < SPAN_NGRAN && r->span_lent; g += len[g])
        if (r->tags[g] == TAG_LENT)
            lent |= ((1u << (len[g] / cg)) - 1) << (g / cg);
    struct iovec ext[SPAN_CHUNKS / 2 + 1];
    unsigned n = 0;
    for (unsigned c = 0; c < SPAN_CHUNKS;) {
        unsigned start = c;
        while (c < SPAN_CHUNKS && !(lent >> c & 1))
            c++;
        if (c > start) {
            ext[n].iov_base = (char *)r + ((size_t)start << HAK_CHUNK_SHIFT);
            ext[n++].iov_len = (size_t)(c - start) << HAK_CHUNK_SHIFT;
        }
        while (c < SPAN_CHUNKS && (lent >> c & 1))
            c++;
    }
    atomic_store_explicit(&r->owner, NULL, memory_order_relaxed);
    for (unsigned k = 0; k < n; k++)
        region_map_clear((uintptr_t)ext[k].iov_base, ext[k].iov_len);
    arena_extents_release(ext, n);
}

/* r has nothing live left (its blocks, if any, are in the quick cache).  One such span
 * stays, so a loop that allocates and frees one block does not take and release a span
 * each time, and a small heap keeps what it caches; 1 if r is that one now. */
HAK_COLD int span_idle(struct heap *h, struct region *r)
{
    struct region *kept = h->span.empty;
    if (kept == NULL || kept == r || kept->used != kept->nhome) {
        h->span.empty = r;
        return 1;
    }
    return 0;
}

/* r's last block came back: the one idle span stays; a second goes back to the arenas,
 * its runs out of the bins first. */
HAK_COLD void span_emptied(struct heap *h, struct region *r)
{
    if (span_idle(h, r))
        return;
    uint16_t *len = span_len(r);
    for (uint32_t g = SPAN_FIRST; g < SPAN_NGRAN; g += len[g])
        if (r->tags[g] == TAG_FREE && !span_bin_unlink(h, r, g, len[g]))
            return;                         /* reported: the span stays, leaked */
    span_list_remove(h, r);
    if (h->span.held == r)
        h->span.held = NULL;                /* held already: span_release keeps the hold */
    else
        region_hold(r);
    span_release(r);
}

/* r has just come down to SPAN_LEND_LIVE granules in live blocks (region/span_layout.h): the whole
 * chunks inside its free runs go back to the arenas, all under one lock; what is left of a
 * run on either side is a run of its own. */
HAK_COLD void span_lend(struct heap *h, struct region *r)
{
    /* Within the arenas' own bound on what may wait, twice `retain`, the heap's spans keep
     * their free runs (spans that come down to little as a program's buffers outgrow them
     * faulted more pages when they lent). */
    if ((uint64_t)h->span.n * SPAN_CHUNKS * HAK_CHUNK_SIZE <= 2 * policy_now()->purge_cap)
        return;
    const uint32_t cg = HAK_CHUNK_SIZE >> SPAN_GSHIFT;
    uint16_t *len = span_len(r);
    struct iovec ext[SPAN_CHUNKS / 2 + 1];
    unsigned n_ext = 0;
    int mine = h->span.held != r;           /* Phase 101: its chunks leave under a pass */
    if (mine)
        region_hold(r);
    for (uint32_t g = SPAN_FIRST; g < SPAN_NGRAN;) {
        uint32_t n = len[g], next = g + n;  /* the run is split up, but the block after stays */
        uint32_t c0 = (g + cg - 1) / cg, c1 = (g + n) / cg;
        if (r->tags[g] != TAG_FREE || c1 <= c0 || !span_bin_unlink(h, r, g, n)) {
            g = next;
            continue;
        }
        uint32_t lg = c0 * cg, ln = (c1 - c0) * cg, rg = lg + ln;
        if (lg > g)
            span_run_split(h, r, g, lg - g);
        if (next > rg) {
            span_run_split(h, r, rg, next - rg);
        } else {
            HAK_STORE_HINT(r->tags[next - 1], 0);          /* the run's end tag, now inside the lent chunks */
        }
        HAK_STORE_HINT(r->tags[lg], TAG_LENT);
        HAK_STORE_HINT(len[lg], (uint16_t)ln);
        HAK_STORE_HINT(r->span_avail, (uint16_t)(r->span_avail - ln));
        HAK_STORE_HINT(r->span_lent, (uint16_t)(r->span_lent + ln));
        ext[n_ext].iov_base = span_addr(r, lg);
        ext[n_ext++].iov_len = (size_t)ln << SPAN_GSHIFT;
        region_map_clear((uintptr_t)span_addr(r, lg), (size_t)ln << SPAN_GSHIFT);
        region_purged_forget(r, (uintptr_t)span_addr(r, lg), (size_t)ln << SPAN_GSHIFT);
        g = next;
    }
    if (mine)
        region_unhold(r);
    if (n_ext)
        arena_extents_release(ext, n_ext);
}

/* The longest free run of r, in granules (the bins are per heap: walked here, once, as r
 * leaves its heap, so that an adopter takes a span that fits without walking any). */
static uint32_t span_longest_run(struct region *r)
{
    uint16_t *len = span_len(r);
    uint32_t longest = 0;
    for (uint32_t g = SPAN_FIRST, n; g < SPAN_NGRAN; g += n) {
        n = len[g];
        if (n == 0)
            break;
        /* atomic: another thread's free may flip a live block's tag meanwhile */
        if (__atomic_load_n(&r->tags[g], __ATOMIC_RELAXED) == TAG_FREE && n > longest)
            longest = n;
    }
    return longest;
}

/* Thread exit: blocks other threads freed are merged (or cached), then the cache is, while
 * the bins are whole; then the bins are dropped (no one links through them again) and
 * each span goes to the arenas, or, with blocks still live, to the abandoned spans for
 * another heap to adopt.  (The cache last: a merge may cache, and a block cached here
 * once its span is abandoned would be handed out by this heap's next thread.) */
HAK_COLD void span_release_all(struct heap *h)
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
        if (r->used == 0) {
            region_hold(r);
            span_release(r);
        } else {
            arena_span_abandon(r, span_longest_run(r));
        }
    }
    h->span.empty = NULL;
}
