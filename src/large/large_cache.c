/* The large page cache: an unordered array of free ranges scanned in full (large operations are rare
 * and each touches at least 64 pages, so a scan of <= 64 entries is noise next to one fault). */
#include "large_cache.h"
#include "../common/common.h"

struct lcache_slot {
    struct lrange s;
    struct lmaps maps;          /* its pieces: one kernel mapping each */
    uint64_t     stamp;         /* when last freed into: the trim drops the stalest first */
};

/* A put may bring LMAPS_MAX pieces past LCACHE_MAX, and ranges never outnumber pieces. */
static struct lcache_slot ranges[LCACHE_MAX + LMAPS_MAX];
static unsigned range_n;
static size_t range_bytes;
static uint64_t range_clock;

static void range_remove(unsigned i)
{
    range_bytes -= ranges[i].s.len;
    ranges[i] = ranges[--range_n];
}

/* Take `len` bytes off the front of range i, their pieces to *maps. */
static void range_cut_front(unsigned i, size_t len, struct lmaps *maps)
{
    lmaps_split(&ranges[i].maps, len, maps, &ranges[i].maps);
    ranges[i].s.base += len;
    ranges[i].s.len -= len;
    range_bytes -= len;
    if (ranges[i].s.len == 0) {
        ranges[i] = ranges[--range_n];
    }
}

HAK_COLD int lcache_take(size_t len, size_t align, unsigned max, struct lrange *out, struct lmaps *maps)
{
    int best = -1;
    for (unsigned i = 0; i < range_n; i++) {
        uintptr_t b = ranges[i].s.base;
        size_t need = (((b + align - 1) & ~(uintptr_t)(align - 1)) - b) + len;
        if (need <= ranges[i].s.len && (best < 0 || ranges[i].s.len < ranges[best].s.len)
            && lmaps_count_head(&ranges[i].maps, need) <= max)
            best = (int)i;
    }
    if (best < 0)
        return 0;
    uintptr_t b = ranges[best].s.base;
    out->base = b;
    out->len = (((b + align - 1) & ~(uintptr_t)(align - 1)) - b) + len;
    range_cut_front((unsigned)best, out->len, maps);
    return 1;
}

HAK_COLD int lcache_take_largest(unsigned max, struct lrange *out, struct lmaps *maps)
{
    int best = -1;
    for (unsigned i = 0; i < range_n; i++)
        if ((best < 0 || ranges[i].s.len > ranges[best].s.len) && lmaps_count(&ranges[i].maps) <= max)
            best = (int)i;
    if (best < 0)
        return 0;
    *out = ranges[best].s;
    *maps = ranges[best].maps;
    range_remove((unsigned)best);
    return 1;
}

HAK_COLD int lcache_take_most(size_t len, unsigned max, struct lrange *out, struct lmaps *maps)
{
    int best = -1;
    size_t most = 0;
    for (unsigned i = 0; i < range_n && max; i++) {
        const struct lmaps *m = &ranges[i].maps;
        size_t can = m->n > max ? m->end[max - 1] : ranges[i].s.len;
        if (can > len)
            can = len;
        if (can > most) {
            most = can;
            best = (int)i;
        }
    }
    if (best < 0)
        return 0;
    out->base = ranges[best].s.base;
    out->len = most;
    range_cut_front((unsigned)best, most, maps);
    return 1;
}

HAK_COLD int lcache_take_after(uintptr_t end, size_t more, unsigned max, struct lmaps *maps)
{
    for (unsigned i = 0; i < range_n; i++) {
        if (ranges[i].s.base == end) {
            if (ranges[i].s.len < more || lmaps_count_head(&ranges[i].maps, more) > max)
                return 0;
            range_cut_front(i, more, maps);
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

/* [start, start + len) out of range i: what is before it stays there, what is after it
 * becomes a range of its own. */
static void range_cut_out(unsigned i, size_t start, size_t len)
{
    struct lcache_slot *r = &ranges[i];
    size_t after = r->s.len - start - len;
    range_bytes -= len;
    if (after) {
        struct lcache_slot *t = &ranges[range_n++];
        t->s.base = r->s.base + start + len;
        t->s.len = after;
        lmaps_split(&r->maps, start + len, NULL, &t->maps);
        t->stamp = r->stamp;
    }
    if (start) {
        r->s.len = start;
        lmaps_split(&r->maps, start, &r->maps, NULL);
    } else {
        ranges[i] = ranges[--range_n];
    }
}

/* The smallest piece (one kernel mapping) of at least `least` bytes, or with least 0 the
 * smallest of all: 0 if there is none, else 1 and its range and place in *i, *start, *len. */
static int range_piece(size_t least, unsigned *i, size_t *start, size_t *len)
{
    int found = 0;
    for (unsigned r = 0; r < range_n; r++) {
        const struct lmaps *m = &ranges[r].maps;
        for (unsigned k = 0; k < m->n; k++) {
            size_t ps = k ? m->end[k - 1] : 0;
            if (m->end[k] - ps >= least && (!found || m->end[k] - ps < *len)) {
                found = 1;
                *i = r;
                *start = ps;
                *len = m->end[k] - ps;
            }
        }
    }
    return found;
}

HAK_COLD int lcache_take_piece(size_t len, struct lrange *out, struct lmaps *maps)
{
    unsigned i;
    size_t start, plen;
    if (!range_piece(len, &i, &start, &plen))
        return 0;
    out->base = ranges[i].s.base + start;
    out->len = len;
    lmaps_split(&ranges[i].maps, start, NULL, maps);
    lmaps_split(maps, len, maps, NULL);
    range_cut_out(i, start, len);
    return 1;
}

/* Past LCACHE_MAX kernel mappings, the smallest pieces go (whole mappings: what is given
 * back costs the least bytes for each mapping it frees); one in the middle of a range cuts
 * the range in two. */
static unsigned lcache_drop_pieces(struct lrange *drop)
{
    unsigned nd = 0, pieces = 0;
    for (unsigned i = 0; i < range_n; i++)
        pieces += lmaps_count(&ranges[i].maps);
    for (; pieces > LCACHE_MAX; pieces--) {
        unsigned i;
        size_t start, len;
        range_piece(0, &i, &start, &len);
        drop[nd].base = ranges[i].s.base + start;
        drop[nd++].len = len;
        range_cut_out(i, start, len);
    }
    return nd;
}

HAK_COLD unsigned lcache_put(struct lrange s, const struct lmaps *maps, size_t cap, struct lrange *drop)
{
    unsigned nd = 0;
    struct lmaps m = *maps;
    /* Coalesce with a neighbour on each side, unless the two span too many mappings (then
     * they stay apart in the set). */
    for (unsigned i = 0; i < range_n;) {
        struct lrange r = ranges[i].s;
        struct lmaps j = ranges[i].maps;
        if (r.base + r.len == s.base && lmaps_overlay(&j, r.len, &m, LMAPS_MAX)) {
            s.base = r.base;
            s.len += r.len;
            m = j;
            range_remove(i);
        } else if (s.base + s.len == r.base && lmaps_overlay(&m, s.len, &j, LMAPS_MAX)) {
            s.len += r.len;
            range_remove(i);
        } else {
            i++;
        }
    }
    ranges[range_n].s = s;
    ranges[range_n].maps = m;
    ranges[range_n].stamp = ++range_clock;
    range_n++;
    range_bytes += s.len;
    nd += lcache_drop_pieces(drop);
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
            lmaps_split(&ranges[o].maps, ranges[o].s.len, &ranges[o].maps, NULL);
            drop[nd].base = ranges[o].s.base + ranges[o].s.len;
            drop[nd++].len = excess;
        }
    }
    return nd;
}

size_t lcache_largest(void)
{
    size_t most = 0;
    for (unsigned i = 0; i < range_n; i++)
        if (ranges[i].s.len > most)
            most = ranges[i].s.len;
    return most;
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
