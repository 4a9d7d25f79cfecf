/* Phase 101: which pages of a live tiny region or span hold nothing the allocator or a
 * program still reads, so they may go back to the OS, and their faulting in again. */
#include <string.h>
#include "region.h"
#include "../os/os.h"
#include "../stats/stats.h"

#define PAGE_SHIFT 12u
_Static_assert(OS_PAGE == 1u << PAGE_SHIFT, "the purged bitmap counts 4 KiB pages");
_Static_assert(SPAN_CHUNKS * (HAK_CHUNK_SIZE >> PAGE_SHIFT) <= 4 * 64, "a span's pages fit its 32 bytes of bits");
_Static_assert(HAK_CHUNK_SIZE >> PAGE_SHIFT <= 64, "a tiny region's pages fit purged_tiny");

static uint64_t *purged_map(struct region *r)
{
    return r->cls == HAK_CLS_SPAN ? span_purged(r) : &r->purged_tiny;
}

HAK_COLD void region_purged_reset(struct region *r)
{
    __atomic_store_n(&r->purged_n, 0, __ATOMIC_RELAXED);   /* region_sparse reads it unheld */
    r->purged_tiny = 0;
    if (r->cls == HAK_CLS_SPAN)
        memset(span_purged(r), 0, SPAN_CHUNKS * (HAK_CHUNK_SIZE >> PAGE_SHIFT) / 8);
}

HAK_COLD void region_hold_wait(struct region *r)
{
    for (;;) {
        uint8_t expect = REGION_HOLD_FREE;
        if (atomic_compare_exchange_weak_explicit(&r->hold, &expect, REGION_HOLD_OWNER,
                                                  memory_order_acquire, memory_order_relaxed))
            return;
        os_yield();                     /* the purger holds it for one region's pages */
    }
}

/* Pages [first, last] of r that were given back: not any more.  Returns how many. */
static unsigned purged_clear(struct region *r, uintptr_t first, uintptr_t last)
{
    unsigned n = 0;
    uint64_t *map = purged_map(r);
    for (uintptr_t pg = first; pg <= last; pg++) {
        uint64_t bit = (uint64_t)1 << (pg & 63);
        if (map[pg >> 6] & bit) {
            map[pg >> 6] &= ~bit;
            n++;
        }
    }
    __atomic_store_n(&r->purged_n, (uint16_t)(r->purged_n - n), __ATOMIC_RELAXED);
    return n;
}

HAK_COLD void region_refault_slow(struct region *r, uintptr_t p, size_t len)
{
    uintptr_t off = p - (uintptr_t)r;
    unsigned n = purged_clear(r, off >> PAGE_SHIFT, (off + len - 1) >> PAGE_SHIFT);
    if (n)
        stats_sparse(0, n, 0);
}

HAK_COLD void region_purged_forget(struct region *r, uintptr_t p, size_t len)
{
    if (r->purged_n == 0)
        return;
    uintptr_t off = p - (uintptr_t)r;
    unsigned n = purged_clear(r, off >> PAGE_SHIFT, (off + len - 1) >> PAGE_SHIFT);
    if (n)
        stats_sparse(0, 0, n);
}

/* Collects the pages [lo, hi) of r (page numbers) that are not given back yet into out[]
 * as ranges, marking them given back.  Returns the new count of ranges. */
static unsigned pages_add(struct region *r, uintptr_t lo, uintptr_t hi, struct iovec *out,
                          unsigned n, unsigned max, unsigned *pages)
{
    uint64_t *map = purged_map(r);
    for (uintptr_t pg = lo; pg < hi; pg++) {
        uint64_t bit = (uint64_t)1 << (pg & 63);
        if (map[pg >> 6] & bit)
            continue;
        char *a = (char *)r + (pg << PAGE_SHIFT);
        if (n && (char *)out[n - 1].iov_base + out[n - 1].iov_len == a) {
            out[n - 1].iov_len += OS_PAGE;
        } else {
            if (n == max)
                return n;
            out[n].iov_base = a;
            out[n++].iov_len = OS_PAGE;
        }
        map[pg >> 6] |= bit;
        __atomic_store_n(&r->purged_n, (uint16_t)(r->purged_n + 1), __ATOMIC_RELAXED);
        ++*pages;
    }
    return n;
}

/* A tiny region's page is free when every block overlapping it is home (TAG_HOME: no link
 * in it, found again by its tag) or not carved yet.  A block in any cache or on a list is
 * TAG_FREE, live ones are live: their pages stay.  Other threads' frees only turn live
 * tags into free or home ones meanwhile; a page they free now waits for the next pass. */
static unsigned tiny_free_pages(struct region *r, struct iovec *out, unsigned max, unsigned *pages)
{
    uintptr_t off = r->blocks_off, bsize = r->bsize, n = 0;
    uintptr_t npages = ((uintptr_t)r->chunks << HAK_CHUNK_SHIFT) >> PAGE_SHIFT;
    uint32_t carved = r->carved, nblocks = r->nblocks;
    for (uintptr_t pg = (off + OS_PAGE - 1) >> PAGE_SHIFT; pg < npages; pg++) {
        uintptr_t ps = pg << PAGE_SHIFT;
        uintptr_t lo = (ps - off) / bsize, hi = (ps + OS_PAGE - 1 - off) / bsize;
        int ok = 1;
        for (uintptr_t k = lo; ok && k <= hi && k < carved && k < nblocks; k++)
            ok = __atomic_load_n(&r->tags[(off + k * bsize) >> r->gshift], __ATOMIC_RELAXED) == TAG_HOME;
        if (ok)
            n = pages_add(r, pg, pg + 1, out, (unsigned)n, max, pages);
    }
    return (unsigned)n;
}

/* The pages wholly inside bytes [a, b) of r. */
static unsigned block_pages(struct region *r, uintptr_t a, uintptr_t b, struct iovec *out,
                            unsigned n, unsigned max, unsigned *pages)
{
    uintptr_t lo = (a + OS_PAGE - 1) >> PAGE_SHIFT, hi = b >> PAGE_SHIFT;
    return lo < hi ? pages_add(r, lo, hi, out, n, max, pages) : n;
}

/* Takes r's remote stack off (r held by the purger): its blocks are TAG_DETACHED from now
 * on, found by their tags when the owner merges them (span_merge_remote), so their links
 * are not read again and all of their memory may go.  remote_home turns nonzero before
 * the stack empties, so the owner's check for pending frees sees one or the other. */
static void span_detach_remote(struct region *r)
{
    if (atomic_load_explicit(&r->remote, memory_order_relaxed) == NULL)
        return;
    atomic_fetch_add(&r->remote_home, 1);
    void *p = atomic_exchange(&r->remote, NULL);
    while (p) {
        void *next = region_link_load(r, p, 1);
        __atomic_store_n(&r->tags[span_gran(r, p)], (uint8_t)TAG_DETACHED, __ATOMIC_RELAXED);
        p = next;
    }
}

/* A span's free pages are those wholly inside a free run, but for the last bytes of a run
 * that keeps its bin links there (span_links_in_run).  The owner changes runs without the
 * hold, but only to free more (a merge, which writes a short run's links only at its end,
 * never before where it was, and takes a run's links out of its memory before marking it
 * long) and a block it frees is TAG_FREE with no TAG_FEND at its end until it is a run;
 * handing out (a carve, a lend) takes the hold. */
static unsigned span_free_pages(struct region *r, struct iovec *out, unsigned max, unsigned *pages)
{
    uint16_t *len = span_len(r);
    unsigned n = 0;
    uintptr_t da = 0, db = 0;               /* dead bytes so far, one stretch of them */
    span_detach_remote(r);
    for (uint32_t g = SPAN_FIRST; g < SPAN_NGRAN;) {
        uint32_t k = __atomic_load_n(&len[g], __ATOMIC_RELAXED);
        unsigned t = __atomic_load_n(&r->tags[g], __ATOMIC_RELAXED);
        if (k == 0 || g + k > SPAN_NGRAN)
            break;                      /* moving under a merge: the next pass sees it */
        uintptr_t a = (uintptr_t)g << SPAN_GSHIFT, b = (uintptr_t)(g + k) << SPAN_GSHIFT;
        uintptr_t lo = a, hi = a;       /* what of this block or run holds nothing */
        int open_end = 0;               /* and it reaches its end */
        if (k > 1 && t == TAG_FREE
            && __atomic_load_n(&r->tags[g + k - 1], __ATOMIC_RELAXED) == TAG_FEND
            && __atomic_load_n(&len[g + k - 1], __ATOMIC_RELAXED) == k)
            hi = span_links_in_run(k) ? b - sizeof(struct span_node) : b;
        else if (t == TAG_DETACHED)
            hi = b, open_end = 1;
        else if (t == TAG_REMOTE)
            /* Pushed since the stack was taken off, maybe still being pushed: its first
             * word is a link; if short, its end may take a run's links when it merges
             * (the owner merges holding r). */
            lo = a + sizeof(void *), hi = span_links_in_run(k) ? b - sizeof(struct span_node) : b;
        if (lo == db && hi > lo) {
            db = hi;                    /* the stretch goes on */
        } else {
            n = block_pages(r, da, db, out, n, max, pages);
            da = lo, db = hi;
        }
        if (!open_end) {
            n = block_pages(r, da, db, out, n, max, pages);
            da = db = 0;
        }
        g += k;
    }
    return block_pages(r, da, db, out, n, max, pages);
}

HAK_COLD unsigned region_free_pages(struct region *r, struct iovec *out, unsigned max, unsigned *pages)
{
    *pages = 0;
    if (r->cls == HAK_CLS_SPAN)
        return span_free_pages(r, out, max, pages);
    return r->cls < HAK_NTINY ? tiny_free_pages(r, out, max, pages) : 0;
}

HAK_COLD int region_sparse(struct region *r, size_t *free_bytes)
{
    size_t out = (size_t)__atomic_load_n(&r->purged_n, __ATOMIC_RELAXED) << PAGE_SHIFT, f;
    int sparse;
    if (r->cls == HAK_CLS_SPAN) {
        uint32_t avail = __atomic_load_n(&r->span_avail, __ATOMIC_RELAXED);
        uint32_t lent = __atomic_load_n(&r->span_lent, __ATOMIC_RELAXED);
        f = (size_t)avail << SPAN_GSHIFT;
        /* half or less live, or blocks other threads freed waiting for an owner gone idle
         * (not counted free until merged) */
        sparse = 2 * (avail + lent) >= SPAN_RUN_MAX || region_remote_pending(r);
    } else if (r->cls < HAK_NTINY) {
        uint32_t used = __atomic_load_n(&r->used, __ATOMIC_RELAXED);
        uint32_t home = atomic_load_explicit(&r->remote_home, memory_order_relaxed);
        used = used > home ? used - home : 0;   /* Phase 97: home already, not counted yet */
        f = (size_t)(r->nblocks - (used < r->nblocks ? used : r->nblocks)) * r->bsize;
        sparse = 2 * used <= r->nblocks;
    } else {
        return 0;
    }
    *free_bytes = f > out ? f - out : 0;
    /* Other threads' frees not merged yet count as in use: at least a page, so a pass that
     * sees nothing else free still takes the span */
    if (r->cls == HAK_CLS_SPAN && *free_bytes < OS_PAGE && region_remote_pending(r))
        *free_bytes = OS_PAGE;
    return sparse;
}
