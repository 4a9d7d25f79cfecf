/* The free spans of large blocks: an unordered array scanned in full (large operations are rare
 * and each touches at least 64 pages, so a scan of <= 64 entries is noise next to one fault). */
#include "large_spans.h"
#include "../common/common.h"

struct lspan_slot {
    struct lspan s;
    uint64_t     stamp;         /* when last freed into: the trim drops the stalest first */
};

static struct lspan_slot spans[LSPAN_MAX];
static unsigned span_n;
static size_t span_bytes;
static uint64_t span_clock;

static void span_remove(unsigned i)
{
    span_bytes -= spans[i].s.len;
    spans[i] = spans[--span_n];
}

/* Take `len` bytes off the front of span i. */
static void span_cut_front(unsigned i, size_t len)
{
    spans[i].s.base += len;
    spans[i].s.len -= len;
    span_bytes -= len;
    if (spans[i].s.len == 0) {
        spans[i] = spans[--span_n];
    }
}

HAK_COLD int lspan_take(size_t len, size_t align, struct lspan *out)
{
    int best = -1;
    for (unsigned i = 0; i < span_n; i++) {
        uintptr_t b = spans[i].s.base;
        size_t need = (((b + align - 1) & ~(uintptr_t)(align - 1)) - b) + len;
        if (need <= spans[i].s.len && (best < 0 || spans[i].s.len < spans[best].s.len))
            best = (int)i;
    }
    if (best < 0)
        return 0;
    uintptr_t b = spans[best].s.base;
    out->base = b;
    out->len = (((b + align - 1) & ~(uintptr_t)(align - 1)) - b) + len;
    span_cut_front((unsigned)best, out->len);
    return 1;
}

HAK_COLD int lspan_take_largest(struct lspan *out)
{
    if (span_n == 0)
        return 0;
    unsigned best = 0;
    for (unsigned i = 1; i < span_n; i++)
        if (spans[i].s.len > spans[best].s.len)
            best = i;
    *out = spans[best].s;
    span_remove(best);
    return 1;
}

HAK_COLD int lspan_take_after(uintptr_t end, size_t more)
{
    for (unsigned i = 0; i < span_n; i++) {
        if (spans[i].s.base == end) {
            if (spans[i].s.len < more)
                return 0;
            span_cut_front(i, more);
            return 1;
        }
    }
    return 0;
}

static unsigned span_oldest(void)
{
    unsigned o = 0;
    for (unsigned i = 1; i < span_n; i++)
        if (spans[i].stamp < spans[o].stamp)
            o = i;
    return o;
}

HAK_COLD unsigned lspan_put(struct lspan s, size_t cap, struct lspan *drop)
{
    unsigned nd = 0;
    /* Coalesce: at most one neighbour on each side, since the set never holds two
     * adjacent spans. */
    for (unsigned i = 0; i < span_n;) {
        if (spans[i].s.base + spans[i].s.len == s.base) {
            s.base = spans[i].s.base;
            s.len += spans[i].s.len;
            span_remove(i);
        } else if (s.base + s.len == spans[i].s.base) {
            s.len += spans[i].s.len;
            span_remove(i);
        } else {
            i++;
        }
    }
    if (span_n == LSPAN_MAX) {
        unsigned o = span_oldest();
        drop[nd++] = spans[o].s;
        span_remove(o);
    }
    spans[span_n].s = s;
    spans[span_n].stamp = ++span_clock;
    span_n++;
    span_bytes += s.len;
    /* Over budget: give back the stalest bytes.  A partial trim keeps the span's head,
     * which is what the next carve takes. */
    while (span_bytes > cap) {
        unsigned o = span_oldest();
        size_t excess = span_bytes - cap;
        if (spans[o].s.len <= excess) {
            drop[nd++] = spans[o].s;
            span_remove(o);
        } else {
            spans[o].s.len -= excess;
            span_bytes -= excess;
            drop[nd].base = spans[o].s.base + spans[o].s.len;
            drop[nd++].len = excess;
        }
    }
    return nd;
}

int lspan_contains(uintptr_t p)
{
    for (unsigned i = 0; i < span_n; i++)
        if (p - spans[i].s.base < spans[i].s.len)
            return 1;
    return 0;
}

size_t lspan_bytes(void)
{
    return span_bytes;
}
