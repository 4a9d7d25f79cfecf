/* Resident free pages moving from the large page cache to the chunk arenas, so memory one
 * pool has freed serves the other without page faults (mremap moves pages, no copy). */
#include "large.h"
#include "large_cache.h"
#include "../arena/arena.h"
#include "../os/os.h"
#include "../policy/policy.h"

/* A fresh (non-resident) arena extent of len bytes is about to be faulted in by a region:
 * move the pages of a free range of the large page cache there instead.  Without this, a program whose large
 * blocks are freed before its mid blocks grow keeps both sets resident (bench/realloc.c:
 * big vectors early in each round, strings late).  1: the extent now holds
 * (stale) resident pages. */
HAK_COLD int large_donate(uintptr_t dst, size_t len)
{
    struct lrange s, drop[LCACHE_DROPS];
    struct lmaps m;
    large_lock();
    int found = lcache_take_piece(len, &s, &m);     /* one kernel mapping: see arena_foreign */
    large_unlock();
    if (!found)
        return 0;
    if (arena_foreign(dst, len) && os_move((void *)s.base, len, (void *)dst))
        return 1;
    /* The arena has as many mappings as it may, or the move failed (nothing moved): the
     * range goes back as it was. */
    large_lock();
    unsigned nd = lcache_put(s, &m, (size_t)policy_now()->large_cache_bytes & ~(size_t)(OS_PAGE - 1), drop);
    large_unlock();
    for (unsigned i = 0; i < nd; i++)
        os_unmap((void *)drop[i].base, drop[i].len);
    return 0;
}
