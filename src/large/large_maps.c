/* The pieces of a huge block or free range, one kernel mapping each (large_maps.h). */
#include <stdatomic.h>
#include "large_maps.h"
#include "../common/common.h"

static _Atomic uint64_t lmaps_next_id = 1;

static uint64_t lmaps_new_id(void)
{
    return atomic_fetch_add_explicit(&lmaps_next_id, 1, memory_order_relaxed);
}

HAK_COLD void lmaps_fresh(struct lmaps *m, size_t len)
{
    m->n = len != 0;
    m->end[0] = len;
    m->id[0] = lmaps_new_id();
}

HAK_COLD unsigned lmaps_count_head(const struct lmaps *m, size_t len)
{
    unsigned c = 0;
    while (c < m->n && (c == 0 || m->end[c - 1] < len))
        c++;
    return len ? c : 0;
}

HAK_COLD void lmaps_split(const struct lmaps *m, size_t off, struct lmaps *head, struct lmaps *tail)
{
    struct lmaps h = { 0 }, t = { 0 };
    size_t start = 0;
    for (unsigned i = 0; i < m->n; i++) {
        if (start < off) {
            h.end[h.n] = m->end[i] < off ? m->end[i] : off;
            h.id[h.n++] = m->id[i];
        }
        if (m->end[i] > off) {
            t.end[t.n] = m->end[i] - off;
            t.id[t.n++] = m->id[i];
        }
        start = m->end[i];
    }
    if (head)
        *head = h;
    if (tail)
        *tail = t;
}

/* A piece ending at `end` after r's last: one with it when both lie in one mapping. */
static int lmaps_push(struct lmaps *r, size_t end, uint64_t id, unsigned max)
{
    if (r->n && r->id[r->n - 1] == id) {
        r->end[r->n - 1] = end;
        return 1;
    }
    if (r->n == max)
        return 0;
    r->end[r->n] = end;
    r->id[r->n++] = id;
    return 1;
}

HAK_COLD int lmaps_overlay(struct lmaps *m, size_t off, const struct lmaps *p, unsigned max)
{
    struct lmaps r, tail;
    size_t plen = p->n ? p->end[p->n - 1] : 0;
    if (max > LMAPS_MAX)
        max = LMAPS_MAX;
    lmaps_split(m, off, &r, NULL);
    lmaps_split(m, off + plen, NULL, &tail);
    for (unsigned i = 0; i < p->n; i++)
        if (!lmaps_push(&r, off + p->end[i], p->id[i], max))
            return 0;
    for (unsigned i = 0; i < tail.n; i++)
        if (!lmaps_push(&r, off + plen + tail.end[i], tail.id[i], max))
            return 0;
    *m = r;
    return 1;
}

HAK_COLD void lmaps_moved(struct lmaps *m)
{
    for (unsigned i = 0; i < m->n; i++)
        m->id[i] = lmaps_new_id();
}
