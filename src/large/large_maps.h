/* The kernel mappings under a huge block or a free range of the page cache.
 * Pages moved in with mremap keep a kernel mapping of their own wherever they go next (the
 * kernel merges two mappings only when their pages come from one place, in order), so a
 * block gathered from pieces costs one mapping per piece, for as long as its pages live.
 * Each block and free range lists its pieces, and nothing joins pieces past LMAPS_MAX: the
 * process holds at most that many mappings per live huge block and per free range, however
 * often it replaces them (vm.max_map_count, 65530 by default, bounds them all: past it
 * every mmap fails).
 * A piece carries the id of the mapping it lies in, given when the mapping was made or its
 * pages moved there: two pieces of one id that meet again (a block carved from a free
 * range's front, freed back) are still one mapping, since the kernel splits a mapping only
 * where a call starts or ends, and every call here leaves a hole or a new id there. */
#ifndef HAK_LARGE_MAPS_H
#define HAK_LARGE_MAPS_H

#include <stddef.h>
#include <stdint.h>

#define LMAPS_MAX 32u                /* kernel mappings a block or free range may span */

struct lmaps {
    unsigned n;                     /* pieces, each inside one kernel mapping; 0: empty */
    size_t   end[LMAPS_MAX];        /* where piece i ends, from the start: end[n - 1] is the length */
    uint64_t id[LMAPS_MAX];         /* the mapping piece i lies in */
};

/* One piece of len bytes (none if len is 0) in a mapping just made or moved: a new id. */
void lmaps_fresh(struct lmaps *m, size_t len);

static inline unsigned lmaps_count(const struct lmaps *m)
{
    return m->n;
}

/* The mappings under the first `len` bytes. */
unsigned lmaps_count_head(const struct lmaps *m, size_t len);

/* Cuts at `off`: the pieces of [0, off) to *head and of the rest to *tail (either may be
 * NULL; m may be either). */
void lmaps_split(const struct lmaps *m, size_t off, struct lmaps *head, struct lmaps *tail);

/* The pages of p moved over [off, off + p's length) of m (a piece of m cut there keeps
 * its id on both sides; p may reach past m's end).  0, with m unchanged, when m would then
 * span more than `max` mappings. */
int lmaps_overlay(struct lmaps *m, size_t off, const struct lmaps *p, unsigned max);

/* m's pieces moved elsewhere, by mremap: each a mapping of its own there (new ids). */
void lmaps_moved(struct lmaps *m);

#endif
