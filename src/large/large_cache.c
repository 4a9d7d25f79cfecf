/* The large page cache: an unordered array of free ranges scanned in full (large operations are rare
 * and each touches at least 64 pages, so a scan of <= 64 entries is noise next to one fault). */
#include "large_cache.h"
#include "../common/common.h"

struct lcache_slot {
    struct lrange s;
    uint64_t     stamp;         /* when last freed into: the trim drops the stalest first */
};

static struct lcache_slot ranges[LCACHE_MAX];
static unsigned range_n;
static size_t range_bytes;
static uint64_t range_clock;

static void range_remove(unsigned i)
{
    range_bytes -= ranges[i].s.len;
    ranges[i] = ranges[--range_n];
}

/* Take `len` bytes off the front of range i. */
static void range_cut_front(unsigned i, size_t len)
{
    ranges[i].s.base += len;
    ranges[i].s.len -= len;
    range_bytes -= len;
    if (ranges[i].s.len == 0) {
        ranges[i] = ranges[--range_n];
    }
}

HAK_COLD int lcache_take(size_t len, size_t align, struct lrange *out)
{
    int best = -1;
    for (unsigned i = 0; i < range_n; i++) {
        uintptr_t b = ranges[i].s.base;
        size_t need = (((b + align - 1) & ~(uintptr_t)(align - 1)) - b) + len;
        if (need <= ranges[i].s.len && (best < 0 || ranges[i].s.len < ranges[best].s.len))
            best = (int)i;
    }
    if (best < 0)
        return 0;
    uintptr_t b = ranges[best].s.base;
    out->base = b;
    out->len = (((b + align - 1) & ~(uintptr_t)(align - 1)) - b) + len;
    range_cut_front((unsigned)best, out->len);
    return 1;
}

HAK_COLD int lcache_take_largest(struct lrange *out)
{
    if (range_n == 0)
        return 0;
    unsigned best = 0;
    for (unsigned i = 1; i < range_n; i++)
        if (ranges[i].s.len > ranges[best].s.len)
            best = i;
    *out = ranges[best].s;
    range_remove(best);
    return 1;
}

HAK_COLD int lcache_take_after(uintptr_t end, size_t more)
{
    for (unsigned i = 0; i < range_n; i++) {
        if (ranges[i].s.base == end) {
            if (ranges[i].s.len < more)
                return 0;
            range_cut_front(i, more);
            return 1;
        }
    }
    return 0;
}

static unsigned range_oldest(void)
{
    unsigned o = 0;
    for (unsigned i = 1; i < range_n; i++)
        if (ranges[i].stamp < ranges[o].stamp)
            o = i;
    return o;
}

HAK_COLD unsigned lcache_put(struct lrange s, size_t cap, struct lrange *drop)
{
    unsigned nd = 0;
    /* Coalesce: at most one neighbour on each side, since the set never holds two
     * adjacent ranges. */
    for (unsigned i = 0; i < range_n;) {
        if (ranges[i].s.base + ranges[i].s.len == s.base) {
            s.base = ranges[i].s.base;
            s.len += ranges[i].s.len;
            range_remove(i);
        } else if (s.base + s.len == ranges[i].s.base) {
            s.len += ranges[i].s.len;
            range_remove(i);
        } else {
            i++;
        }
    }
    if (range_n == LCACHE_MAX) {
        unsigned o = range_oldest();
        drop[nd++] = ranges[o].s;
        range_remove(o);
    }
    ranges[range_n].s = s;
    ranges[range_n].stamp = ++range_clock;
    range_n++;
    range_bytes += s.len;
    return nd + lcache_trim(cap, drop + nd);
}

HAK_COLD unsigned lcache_trim(size_t cap, struct lrange *drop)
{
    unsigned nd = 0;
    /* Over budget: give back the stalest bytes.  A partial trim keeps the range's head,
     * which is what the next carve takes. */
    while (range_bytes > cap) {
        unsigned o = range_oldest();
        size_t excess = range_bytes - cap;
        if (ranges[o].s.len <= excess) {
            drop[nd++] = ranges[o].s;
            range_remove(o);
        } else {
            ranges[o].s.len -= excess;
            range_bytes -= excess;
            drop[nd].base = ranges[o].s.base + ranges[o].s.len;
            drop[nd++].len = excess;
        }
    }
    return nd;
}

int lcache_contains(uintptr_t p)
{
    for (unsigned i = 0; i < range_n; i++)
        if (p - ranges[i].s.base < ranges[i].s.len)
            return 1;
    return 0;
}

size_t lcache_bytes(void)
{
    return range_bytes;
}
