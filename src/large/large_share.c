/* Resident free pages moving between the large free spans and the chunk arenas, so memory a
 * pool has freed serves the other one without page faults (mremap moves pages, no copy). */
#include "large.h"
#include "large_spans.h"
#include "../os/os.h"
#include "../policy/policy.h"

/* A fresh (non-resident) arena run of len bytes is about to be faulted in by a region:
 * move the pages of a free large span there instead.  Without this, a program whose large
 * blocks are freed before its mid blocks grow keeps both sets resident (bench/realloc.c:
 * big vectors early in each round, strings late).  1: the run now holds
 * (stale) resident pages. */
HAK_COLD int large_donate(uintptr_t dst, size_t len)
{
    struct lspan s, drop[LSPAN_MAX + 1];
    large_lock();
    int found = lspan_take(len, OS_PAGE, &s);
    large_unlock();
    if (!found)
        return 0;
    if (os_move((void *)s.base, len, (void *)dst))
        return 1;
    /* e.g. the span crosses two kernel mappings: it goes back as it was */
    large_lock();
    unsigned nd = lspan_put(s, (size_t)policy_now()->large_cache_bytes & ~(size_t)(OS_PAGE - 1), drop);
    large_unlock();
    for (unsigned i = 0; i < nd; i++)
        os_unmap((void *)drop[i].base, drop[i].len);
    return 0;
}
