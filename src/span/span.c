/* The span heap (Phase 100): a thread's mid blocks carved best fit from the free runs of its
 * spans, and freed blocks merged with their free neighbours; the layout is in region/span_layout.h. */
#include <errno.h>
#include "span.h"
#ifdef HAK_SPAN_DEBUG
#include <stdio.h>
#include <stdlib.h>
/* Debug builds stop at the first operation after which the spans and bins disagree, unless
 * a corruption has been reported: its cut bin leaks runs on purpose. */
static int span_cut_seen;
#define SPAN_CHECK(h) do { const char *why_ = span_cut_seen ? NULL : span_check(h); \
        if (why_) { fprintf(stderr, "hakmem: %s: %s\n", __func__, why_); abort(); } } while (0)
#else
#define SPAN_CHECK(h) ((void)0)
#endif

/* Tags are read and written with relaxed atomics: another thread's free may flip a live
 * tag to TAG_REMOTE beside the one the owner is reading. */
HAK_INLINE unsigned tag_get(struct region *r, uint32_t g)
{
    return __atomic_load_n(&r->tags[g], __ATOMIC_RELAXED);
}

HAK_INLINE void tag_set(struct region *r, uint32_t g, unsigned v)
{
    __atomic_store_n(&r->tags[g], (uint8_t)v, __ATOMIC_RELAXED);
}

/* Marks [g, g + n) one free run: its first and last granule say so, with its length. */
HAK_INLINE void run_mark(struct region *r, uint32_t g, uint32_t n)
{
    uint16_t *len = span_len(r);
    tag_set(r, g, TAG_FREE);
    HAK_STORE_HINT(len[g], (uint16_t)n);
    if (n > 1) {
        tag_set(r, g + n - 1, TAG_FEND);
        HAK_STORE_HINT(len[g + n - 1], (uint16_t)n);
    }
}

/* A run's links stay where they are while a block is carved from its front or merged into
 * it from behind (span_run_node ties them to its end): they are rewritten only when the
 * run changes bin.  (At the front, every carve from a fresh run wrote a line the block's
 * owner had not touched yet: often a fresh page's first touch.) */
#define run_node span_run_node

/* An ASan build unpoisons the links in a run's memory for the access alone (the header's
 * are never poisoned). */
#if HAK_ASAN
HAK_INLINE int node_in_run(struct span_node *x)
{
    struct region *r = region_of_block(x);
    return (uintptr_t)x - (uintptr_t)r >= SPAN_BLOCKS_OFF;
}
#define NODE_OPEN(x, f)  HAK_UNPOISON(&(f), sizeof(f))
#define NODE_CLOSE(x, f) do { if (node_in_run(x)) HAK_POISON(&(f), sizeof(f)); } while (0)
#else
#define NODE_OPEN(x, f)  ((void)0)
#define NODE_CLOSE(x, f) ((void)0)
#endif

HAK_INLINE struct span_node *node_get(struct span_node *x, struct span_node **next)
{
    NODE_OPEN(x, *x);
    *next = x->next;
    struct span_node *prev = x->prev;
    NODE_CLOSE(x, *x);
    return prev;
}

HAK_INLINE uint32_t node_end(struct span_node *x)
{
    NODE_OPEN(x, x->end);
    uint32_t e = x->end;
    NODE_CLOSE(x, x->end);
    return e;
}

HAK_INLINE void node_set_next(struct span_node *x, struct span_node *next)
{
    NODE_OPEN(x, x->next);
    HAK_STORE_HINT(x->next, next);      /* the purger may read lengths here (a stale walk) */
    NODE_CLOSE(x, x->next);
}

HAK_INLINE void node_set_prev(struct span_node *x, struct span_node *prev)
{
    NODE_OPEN(x, x->prev);
    HAK_STORE_HINT(x->prev, prev);
    NODE_CLOSE(x, x->prev);
}

/* Free run [g, g + n) of r into its bin. */
HAK_INLINE void bin_push(struct heap *h, struct region *r, uint32_t g, uint32_t n)
{
    if (n < SPAN_LINK_MIN)
        return;
    struct span_node *x = run_node(r, g, n);
    unsigned b = span_bin(n);
    struct span_node *head = h->span.bin[b];
    node_set_next(x, head);
    node_set_prev(x, NULL);
    NODE_OPEN(x, x->end);
    HAK_STORE_HINT(x->end, g + n - 1);
    NODE_CLOSE(x, x->end);
    if (head)
        node_set_prev(head, x);
    h->span.bin[b] = x;
    h->span.nonempty[b >> 6] |= (uint64_t)1 << (b & 63);
}

/* A bin found damaged (a write past a block reached a free run's links): the bin is cut,
 * its runs leak, and nothing is handed out or linked through memory a wild write chose. */
static HAK_COLD void bin_cut(struct heap *h, unsigned b, void *at)
{
    class_misuse("malloc", at, "heap corruption: free-run links overwritten (runs leaked)", HAK_CLS_SPAN);
#ifdef HAK_SPAN_DEBUG
    span_cut_seen = 1;
#endif
    h->span.bin[b] = NULL;
    h->span.nonempty[b >> 6] &= ~((uint64_t)1 << (b & 63));
}

/* The free run whose links x are, in r, checked against the header (its tags and lengths
 * are out of reach of a block's overflow, the links in a short run's memory are not):
 * its last granule, or UINT32_MAX. */
HAK_INLINE uint32_t node_run_end(struct region *r, struct span_node *x)
{
    uint32_t e = node_end(x);
    if (unlikely(e >= SPAN_NGRAN))
        return UINT32_MAX;
    uint32_t n = span_len(r)[e];
    if (unlikely(n < SPAN_LINK_MIN || n > e + 1 - SPAN_FIRST || run_node(r, e + 1 - n, n) != x
                 || tag_get(r, e + 1 - n) != TAG_FREE || tag_get(r, e) != TAG_FEND))
        return UINT32_MAX;
    return e;
}

#if HAK_HARDENED
/* Hardened builds follow a link only to the links of a free run of one of our spans. */
static int node_ok(struct span_node *x)
{
    uintptr_t a = (uintptr_t)x;
    unsigned b = region_map_get(a);
    if ((a & 7) || !region_map_is_region(b))
        return 0;
    struct region *r = region_from_map(a, b);
    return r->cls == HAK_CLS_SPAN && node_run_end(r, x) != UINT32_MAX;
}
#else
#define node_ok(x) 1
#endif

/* Takes run x of length n out of its bin; 0 if its neighbours in the list do not point
 * back at it (the bin is cut instead). */
static int bin_unlink(struct heap *h, struct span_node *x, uint32_t n)
{
    if (n < SPAN_LINK_MIN)
        return 1;                           /* in no bin */
    unsigned b = span_bin(n);
    struct span_node *next, *prev = node_get(x, &next), *pn, *nn;
    if (unlikely(prev ? !node_ok(prev) || (node_get(prev, &pn), pn != x) : h->span.bin[b] != x)
        || unlikely(next && (!node_ok(next) || node_get(next, &nn) != x))) {
        bin_cut(h, b, x);
        return 0;
    }
    if (prev)
        node_set_next(prev, next);
    else if ((h->span.bin[b] = next) == NULL)
        h->span.nonempty[b >> 6] &= ~((uint64_t)1 << (b & 63));
    if (next)
        node_set_prev(next, prev);
    return 1;
}

/* The run of r ending at granule e was n granules and is m now: into m's bin if that
 * differs (then its links move too, if it crossed SPAN_NODE_MIN). */
HAK_INLINE int bin_move(struct heap *h, struct region *r, uint32_t e, uint32_t n, uint32_t m)
{
    if (span_bin(n) == span_bin(m))
        return 1;
    if (!bin_unlink(h, run_node(r, e + 1 - n, n), n))
        return 0;
    bin_push(h, r, e + 1 - m, m);
    return 1;
}

/* The first non-empty bin from b on (its head), or NULL. */
HAK_INLINE struct span_node *bin_first(struct heap *h, unsigned b, unsigned *found)
{
    unsigned w = b >> 6;
    uint64_t m = h->span.nonempty[w] & (~(uint64_t)0 << (b & 63));
    if (m == 0 && w == 0) {
        m = h->span.nonempty[1];
        w = 1;
    }
    if (m == 0)
        return NULL;
    *found = w * 64 + (unsigned)__builtin_ctzll(m);
    return h->span.bin[*found];
}

static HAK_NOINLINE void *span_carve(size_t size, struct heap *h, uint32_t want);

/* Granules [p, p + n) of r, held, have just been handed out: pages of them given back fault
 * in again (Phase 101), and the purger sees r touched. */
HAK_INLINE void span_handed_out(struct region *r, void *p, uint32_t n)
{
    region_refault(r, p, (size_t)n << SPAN_GSHIFT);
    atomic_store_explicit(&r->takes, atomic_load_explicit(&r->takes, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    region_unhold(r);
}

/* The first block of the quick cache's list of length n (not empty), taken off it and off
 * its span's counts (still counted in r->used); *rp is its span. */
HAK_INLINE void *quick_pop(struct heap *h, uint32_t n, struct region **rp)
{
    void *p = h->span.quick[n];
    struct region *r = region_of_block(p);
    h->span.quick[n] = region_link_load(r, p, 0);
    h->span.quick_n[n]--;
    h->span.quick_bytes -= n << SPAN_GSHIFT;
    if (--r->nhome == 0)
        r->span_cached_lens = 0;
    HAK_STORE_HINT(r->span_avail, (uint16_t)(r->span_avail - n));
    *rp = r;
    return p;
}

/* The quick cache's hit apart from the carve, so it saves no registers (the carve's
 * prologue and epilogue were a quarter of a hit's instructions).  The size
 * comes first, as in malloc and api_malloc_mid, so their tail calls move no registers. */
void *span_malloc(size_t size, struct heap *h)
{
    uint32_t want = (uint32_t)((size + SPAN_GRANULE - 1) >> SPAN_GSHIFT);
    if (want < SPAN_QUICK_LEN && h->span.quick[want] != NULL) {
        struct region *r;
        void *p = quick_pop(h, want, &r);
        tag_set(r, span_gran(r, p), TAG_LIVE_SPAN);
        OBS_INC(h, allocs, class_of_size(size));
        HAK_UNPOISON(p, (size_t)want << SPAN_GSHIFT);
        SPAN_CHECK(h);
        return p;
    }
    return span_carve(size, h, want);
}

/* From the best-fitting free run: its front. */
static HAK_NOINLINE void *span_carve(size_t size, struct heap *h, uint32_t want)
{
    (void)size;                             /* for OBS_INC, in builds that observe */
    unsigned b = span_bin_up(want), fb;
    /* Blocks other threads gave back are reused before fresh runs (a producer whose blocks
     * a consumer frees would otherwise carve its spans to the end first). */
    if (unlikely(atomic_load_explicit(&h->span_remote, memory_order_relaxed)))
        span_merge_pending(h);
    for (;;) {
        struct span_node *x = bin_first(h, b, &fb);
        if (unlikely(x == NULL)) {
            if (!span_refill(h, want)) {
                errno = ENOMEM;
                return NULL;
            }
            continue;
        }
        struct region *r = region_of_block(x);
        uint16_t *len = span_len(r);
        /* A run's tags and lengths are in the header, out of reach of a block's overflow;
         * its links are checked as they are followed. */
        uint32_t e = node_run_end(r, x), n = e == UINT32_MAX ? 0 : len[e], g = e + 1 - n;
        if (unlikely(e == UINT32_MAX || span_bin(n) != fb)) {
            bin_cut(h, fb, x);
            continue;
        }
        region_hold(r);                     /* Phase 101: the purger reads runs too */
        /* The block is the run's front: the rest keeps its links at the end, and its bin
         * unless it has shrunk out of it. */
        if (n == want) {
            if (unlikely(!bin_unlink(h, x, n))) {
                region_unhold(r);
                continue;
            }
            if (n > 1)
                tag_set(r, e, 0);           /* the run's end is inside the block now */
        } else {
            if (unlikely(!bin_move(h, r, e, n, n - want))) {
                region_unhold(r);
                continue;
            }
            run_mark(r, g + want, n - want);
            if (span_links_in_run(n - want))    /* its links moved into its memory */
                region_refault(r, run_node(r, g + want, n - want), sizeof(struct span_node));
        }
        HAK_STORE_HINT(len[g], (uint16_t)want);
        tag_set(r, g, TAG_LIVE_SPAN);
        HAK_STORE_HINT(r->used, (uint16_t)(r->used + 1));
        HAK_STORE_HINT(r->span_avail, (uint16_t)(r->span_avail - want));
        OBS_INC(h, allocs, class_of_size(size));
        void *p = span_addr(r, g);
        span_handed_out(r, p, want);
        HAK_UNPOISON(p, (size_t)want << SPAN_GSHIFT);
        SPAN_CHECK(h);
        return p;
    }
}

/* Frees [g, g + n) of r (its tags inside are 0 or a stale start): merged with a free run
 * on either side, then binned.  When r has nothing left in it, span_emptied may send
 * r back to the arenas; when it has just come down to little, span_lend its free
 * runs' whole chunks (r alone: no other span changes here). */
void span_run_put(struct heap *h, struct region *r, uint32_t g, uint32_t n)
{
    uint16_t *len = span_len(r);
    uint32_t freed = n;
    int push = 1;                           /* the merged run's links are written anew */
    HAK_STORE_HINT(r->span_avail, (uint16_t)(r->span_avail + n));
    tag_set(r, g, 0);
    if (g > SPAN_FIRST) {
        unsigned t = tag_get(r, g - 1);
        if (t == TAG_FEND || t == TAG_FREE) {
            uint32_t pn = len[g - 1];
            if (bin_unlink(h, run_node(r, g - pn, pn), pn)) {
                tag_set(r, g - 1, 0);
                g -= pn;
                n += pn;
            }
        }
    }
    uint32_t e = g + n;
    if (e < SPAN_NGRAN && tag_get(r, e) == TAG_FREE) {
        /* The run after keeps its links (they end the merged run) unless it changes bin.
         * They leave it before the merged run is marked: Phase 101's purger gives back
         * every page of a run it sees long enough to keep its links in the header. */
        uint32_t xn = len[e];
        if (span_bin(xn) == span_bin(n + xn))
            push = 0;
        else if (!bin_unlink(h, run_node(r, e, xn), xn))
            push = -1;                      /* reported; the run leaks */
        tag_set(r, e, 0);
        n += xn;
    }
    run_mark(r, g, n);
    if (push < 0)
        return;
    if (push)
        bin_push(h, r, g, n);
    if (unlikely(r->used == 0))
        span_emptied(h, r);
    else if (unlikely(span_live(r) <= SPAN_LEND_LIVE) && span_lend_crossed(span_live(r), freed))
        span_lend(h, r);
}

/* [g, g + n), split off a free run by its holder: a run of its own.  Its links may land in
 * a page of the old run that was given back, which is resident again then. */
void span_run_split(struct heap *h, struct region *r, uint32_t g, uint32_t n)
{
    run_mark(r, g, n);
    bin_push(h, r, g, n);
    if (span_links_in_run(n))
        region_refault(r, run_node(r, g, n), sizeof(struct span_node));
}

int span_bin_unlink(struct heap *h, struct region *r, uint32_t g, uint32_t n)
{
    return bin_unlink(h, run_node(r, g, n), n);
}

/* A span just taken from the arenas: one free run. */
void span_run_new(struct heap *h, struct region *r)
{
    HAK_STORE_HINT(r->span_avail, SPAN_RUN_MAX);
    HAK_STORE_HINT(r->span_lent, 0);
    run_mark(r, SPAN_FIRST, SPAN_RUN_MAX);
    bin_push(h, r, SPAN_FIRST, SPAN_RUN_MAX);
}

/* r holds nothing but blocks in the quick cache, and another span is the heap's idle one:
 * they leave the cache and merge, so r empties and goes back to the arenas.  (Counted as
 * used, they pinned whole spans: a program that freed everything kept dozens of spans for
 * the blocks the cache held last.) */
static HAK_NOINLINE void span_quick_drop(struct heap *h, struct region *r)
{
    void *mine[SPAN_QUICK_BYTES / (5u << SPAN_GSHIFT) + 1];   /* mid blocks are 5 granules and up */
    unsigned k = 0;
    /* Only the lengths r has cached (a bit may be stale): at most SPAN_QUICK_DEPTH blocks
     * each, where walking every list cost a drop all SPAN_QUICK_LEN of them. */
    for (uint64_t lens = r->span_cached_lens; lens && k < r->nhome; lens &= lens - 1) {
        uint32_t n = (uint32_t)__builtin_ctzll(lens);
        void *prev = NULL, *p = h->span.quick[n];
        while (p != NULL) {
            struct region *pr = region_of_block(p);
            void *next = region_link_load(pr, p, 0);
            if (pr == r) {
                if (prev)
                    region_link_store(region_of_block(prev), prev, next);
                else
                    h->span.quick[n] = next;
                h->span.quick_n[n]--;
                h->span.quick_bytes -= n << SPAN_GSHIFT;
                mine[k++] = p;
            } else {
                prev = p;
            }
            p = next;
        }
    }
    r->nhome = 0;
    r->span_cached_lens = 0;
    for (unsigned i = 0; i < k; i++) {      /* the last may send r back to the arenas */
        uint32_t g = span_gran(r, mine[i]), n = span_len(r)[g];
        HAK_STORE_HINT(r->used, (uint16_t)(r->used - 1));
        HAK_STORE_HINT(r->span_avail, (uint16_t)(r->span_avail - n));      /* span_run_put counts it again */
        span_run_put(h, r, g, n);
    }
}

/* Past the quick cache, out of line so the cache's hit saves no registers. */
static HAK_NOINLINE void span_merge_put(struct heap *h, struct region *r, uint32_t g, uint32_t n)
{
    HAK_STORE_HINT(r->used, (uint16_t)(r->used - 1));
    int only_cached = r->used != 0 && r->used == r->nhome;
    span_run_put(h, r, g, n);               /* r stays: it still has cached blocks */
    if (unlikely(only_cached) && !span_idle(h, r))
        span_quick_drop(h, r);
}

/* A freed block (still counted in r->used): into the quick cache if its length has room
 * there, else merged.  r->nhome counts r's blocks in the cache. */
static void span_put(struct heap *h, struct region *r, uint32_t g, uint32_t n)
{
    if (n < SPAN_QUICK_LEN && h->span.quick_n[n] < SPAN_QUICK_DEPTH
        && h->span.quick_bytes + (n << SPAN_GSHIFT) <= SPAN_QUICK_BYTES) {
        void *p = span_addr(r, g);
        tag_set(r, g, TAG_CACHED);
        region_link_store(r, p, h->span.quick[n]);
        h->span.quick[n] = p;
        h->span.quick_n[n]++;
        h->span.quick_bytes += n << SPAN_GSHIFT;
        HAK_STORE_HINT(r->span_avail, (uint16_t)(r->span_avail + n));
        r->span_cached_lens |= (uint64_t)1 << n;
        if (unlikely(++r->nhome == r->used) && !span_idle(h, r))
            span_quick_drop(h, r);
        return;
    }
    span_merge_put(h, r, g, n);
}

void span_free(struct heap *h, struct region *r, void *p)
{
    uint32_t g = span_gran(r, p), n = span_len(r)[g];
    OBS_INC(h, frees, class_of_size((size_t)n << SPAN_GSHIFT));
    HAK_POISON(p, (size_t)n << SPAN_GSHIFT);
    span_put(h, r, g, n);
    SPAN_CHECK(h);
}

/* Every cached block merged: before a span is added (the cache may hold the fit), and at
 * thread exit. */
void span_quick_flush(struct heap *h)
{
    for (uint32_t n = 1; n < SPAN_QUICK_LEN; n++) {
        while (h->span.quick[n] != NULL) {
            struct region *r;
            void *p = quick_pop(h, n, &r);  /* off span_avail: span_run_put counts it again */
            HAK_STORE_HINT(r->used, (uint16_t)(r->used - 1));
            span_run_put(h, r, span_gran(r, p), n);
        }
        h->span.quick_n[n] = 0;
    }
    h->span.quick_bytes = 0;
}

/* realloc in place: the block's tail goes back (and merges), or the block grows into the
 * free run right after it, by a quarter more than asked when that run has room, so a
 * buffer grown a little at a time does not come back here on every call. */
int span_resize(struct heap *h, struct region *r, void *p, size_t size)
{
    uint16_t *len = span_len(r);
    uint32_t g = span_gran(r, p), cur = len[g];
    uint32_t want = (uint32_t)((size + SPAN_GRANULE - 1) >> SPAN_GSHIFT);
    if (want <= cur) {
        if (want < cur) {
            HAK_STORE_HINT(len[g], (uint16_t)want);
            HAK_POISON(span_addr(r, g + want), (size_t)(cur - want) << SPAN_GSHIFT);
            span_run_put(h, r, g + want, cur - want);
        }
        return 1;
    }
    uint32_t e = g + cur;
    if (e >= SPAN_NGRAN || tag_get(r, e) != TAG_FREE)
        return 0;
    uint32_t nn = len[e], room = cur + nn;
    if (room < want)
        return 0;
    uint32_t more = want + want / 4;
    if (more > (HAK_MID_MAX >> SPAN_GSHIFT))
        more = HAK_MID_MAX >> SPAN_GSHIFT;
    if (more <= room)
        want = more;
    struct span_node *x = run_node(r, e, nn);
    HAK_STORE_HINT(r->span_avail, (uint16_t)(r->span_avail - (want - cur)));
    region_hold(r);                         /* Phase 101: the purger reads runs too */
    if (want == room) {
        if (!bin_unlink(h, x, nn)) {
            region_unhold(r);
            return 0;
        }
        tag_set(r, e, 0);
        if (nn > 1)
            tag_set(r, e + nn - 1, 0);
    } else {
        if (!bin_move(h, r, e + nn - 1, nn, room - want)) {
            region_unhold(r);
            return 0;
        }
        tag_set(r, e, 0);
        run_mark(r, g + want, room - want);
        if (span_links_in_run(room - want)) /* its links moved into its memory */
            region_refault(r, run_node(r, g + want, room - want), sizeof(struct span_node));
    }
    span_handed_out(r, span_addr(r, e), want - cur);
    HAK_STORE_HINT(len[g], (uint16_t)want);
    HAK_UNPOISON(p, (size_t)want << SPAN_GSHIFT);
    SPAN_CHECK(h);
    return 1;
}

/* Blocks other threads freed into r (tagged TAG_REMOTE, linked through their first word,
 * or TAG_DETACHED once the purger has taken them off the stack), cached or merged as if
 * freed here.  r may leave the heap when its last block comes back. */
void span_merge_remote(struct heap *h, struct region *r)
{
    if (!region_remote_pending(r))
        return;
    /* Held (Phase 101): the purger gives back the inside of TAG_REMOTE blocks and takes
     * them off the stack, and the quick cache could otherwise hand them out meanwhile.  A
     * merge that empties r releases it, and clears h->span.held (span_emptied). */
    region_hold(r);
    h->span.held = r;
    uint16_t detached[SPAN_NGRAN / 5 + 1];  /* mid blocks are 5 granules and up */
    unsigned nd = 0;
    if (atomic_exchange(&r->remote_home, 0)) {
        uint16_t *len = span_len(r);
        for (uint32_t g = SPAN_FIRST; g < SPAN_NGRAN && len[g]; g += len[g])
            if (tag_get(r, g) == TAG_DETACHED)
                detached[nd++] = (uint16_t)g;
    }
    void *p = atomic_exchange(&r->remote, NULL);
    while (p) {
        void *next = region_link_load(r, p, 1);
        uint32_t g = span_gran(r, p), n = span_len(r)[g];
        HAK_POISON(p, (size_t)n << SPAN_GSHIFT);
        region_refault(r, p, (size_t)n << SPAN_GSHIFT);
        span_put(h, r, g, n);
        p = next;
    }
    for (unsigned i = 0; i < nd && h->span.held == r; i++) {
        uint32_t g = detached[i], n = span_len(r)[g];
        HAK_POISON(span_addr(r, g), (size_t)n << SPAN_GSHIFT);
        region_refault(r, span_addr(r, g), (size_t)n << SPAN_GSHIFT);
        span_put(h, r, g, n);
    }
    if (h->span.held == r)
        region_unhold(r);
    h->span.held = NULL;
}

/* An adopted span: its free runs (as the last owner left them) into h's bins. */
void span_link_runs(struct heap *h, struct region *r)
{
    uint16_t *len = span_len(r);
    for (uint32_t g = SPAN_FIRST; g < SPAN_NGRAN;) {
        uint32_t n = len[g];
        if (n == 0)                         /* never: every granule is in a block or run */
            break;
        if (tag_get(r, g) == TAG_FREE)
            bin_push(h, r, g, n);
        g += n;
    }
}

#ifdef HAK_SPAN_DEBUG
/* Debug builds (the unit-span test): every span of h walked granule by granule and every
 * bin followed, and the two cross-checked.  NULL if they agree, else what is wrong. */
const char *span_check(struct heap *h)
{
    static __thread char why[160];
    unsigned nruns = 0, nlinked = 0;
    struct region *r = h->span.list;
    for (unsigned i = 0; i < h->span.n; i++, r = r->next) {
        uint16_t *len = span_len(r);
        unsigned used = 0, cached = 0, prev_free = 0, nfree = 0, nlent = 0;
        if (atomic_load(&r->owner) != h)
            return snprintf(why, sizeof why, "span %p not owned", (void *)r), why;
        for (uint32_t g = SPAN_FIRST, n; g < SPAN_NGRAN; g += n) {
            unsigned t = tag_get(r, g), free = t == TAG_FREE;
            n = len[g];
            if (n == 0 || g + n > SPAN_NGRAN)
                return snprintf(why, sizeof why, "span %p: length %u at %u", (void *)r, n, g), why;
            if (free && prev_free)
                return snprintf(why, sizeof why, "span %p: runs not merged at %u", (void *)r, g), why;
            if (!free && t != TAG_LIVE_SPAN && t != TAG_CACHED && t != TAG_REMOTE && t != TAG_LENT
                && t != TAG_DETACHED)
                return snprintf(why, sizeof why, "span %p: tag %#x at %u", (void *)r, t, g), why;
            if (n > 1 && (free ? tag_get(r, g + n - 1) != TAG_FEND || len[g + n - 1] != n : tag_get(r, g + n - 1) != 0))
                return snprintf(why, sizeof why, "span %p: bad last granule of %u", (void *)r, g), why;
            for (uint32_t k = g + 1; k + 1 < g + n; k++)
                if (tag_get(r, k) != 0)
                    return snprintf(why, sizeof why, "span %p: tag inside %u at %u", (void *)r, g, k), why;
            if (t == TAG_LENT) {
                for (uint32_t c = g << SPAN_GSHIFT >> HAK_CHUNK_SHIFT; c < (g + n) << SPAN_GSHIFT >> HAK_CHUNK_SHIFT; c++)
                    if (region_map_get((uintptr_t)r + ((uintptr_t)c << HAK_CHUNK_SHIFT)) == c + 1u)
                        return snprintf(why, sizeof why, "span %p: lent chunk %u still mapped", (void *)r, c), why;
                nlent += n;
                prev_free = 0;
                continue;
            }
            nruns += free && n >= SPAN_LINK_MIN;
            nfree += free ? n : 0;
            used += !free;
            cached += t == TAG_CACHED;
            nfree += t == TAG_CACHED ? n : 0;
            prev_free = free;
        }
        if (nfree != r->span_avail || nlent != r->span_lent)
            return snprintf(why, sizeof why, "span %p: %u free, %u lent; counted %u, %u", (void *)r,
                            nfree, nlent, r->span_avail, r->span_lent), why;
        if (used != r->used || cached != r->nhome)
            return snprintf(why, sizeof why, "span %p: used %u, %u blocks; %u of %u cached", (void *)r,
                            r->used, used, r->nhome, cached), why;
    }
    for (unsigned b = 0; b < SPAN_NBINS; b++) {
        struct span_node *x = h->span.bin[b], *prev = NULL;
        if ((x != NULL) != ((h->span.nonempty[b >> 6] >> (b & 63)) & 1))
            return snprintf(why, sizeof why, "bin %u: bit and head disagree", b), why;
        for (struct span_node *next; x; prev = x, x = next, nlinked++) {
            struct region *xr = region_of_block(x);
            uint32_t e = node_run_end(xr, x), n = e == UINT32_MAX ? 0 : span_len(xr)[e];
            if (atomic_load(&xr->owner) != h || node_get(x, &next) != prev || span_bin(n) != b || n == 0)
                return snprintf(why, sizeof why, "bin %u: bad link %p", b, (void *)x), why;
        }
    }
    if (nruns != nlinked)
        return snprintf(why, sizeof why, "%u runs, %u linked", nruns, nlinked), why;
    size_t bytes = 0;
    for (uint32_t n = 1; n < SPAN_QUICK_LEN; n++) {
        unsigned k = 0;
        for (void *p = h->span.quick[n]; p; p = region_link_load(region_of_block(p), p, 0), k++) {
            struct region *pr = region_of_block(p);
            if (atomic_load(&pr->owner) != h || tag_get(pr, span_gran(pr, p)) != TAG_CACHED
                || span_len(pr)[span_gran(pr, p)] != n || !(pr->span_cached_lens >> n & 1))
                return snprintf(why, sizeof why, "quick %u: bad block %p", n, p), why;
        }
        if (k != h->span.quick_n[n] || k > SPAN_QUICK_DEPTH)
            return snprintf(why, sizeof why, "quick %u: %u blocks, count %u", n, k, h->span.quick_n[n]), why;
        bytes += (size_t)k * n << SPAN_GSHIFT;
    }
    if (bytes != h->span.quick_bytes || bytes > SPAN_QUICK_BYTES)
        return snprintf(why, sizeof why, "quick: %zu bytes, count %u", bytes, h->span.quick_bytes), why;
    return NULL;
}
#endif
