/* The router: size -> class -> route, read from the thread's policy snapshot.
 * Without Phase 91 it computes the class with arithmetic; with it, one table load does both. */
#ifndef HAK_ROUTE_H
#define HAK_ROUTE_H

#include "../policy/policy.h"

/* Relaxed atomic: a plain load on the owner's side, but a publisher may overwrite it. */
HAK_INLINE unsigned route_of_class(const struct policy_snapshot *s, unsigned cls)
{
    return __atomic_load_n(&s->route[cls], __ATOMIC_RELAXED);
}

/* n <= HAK_TINY_MAX.  Returns the route, stores the class. */
HAK_INLINE unsigned route_lookup_tiny(const struct policy_snapshot *s, size_t n, unsigned *cls)
{
#if HAK_PHASE91
    if (likely(s->phase91)) {
        unsigned t = __atomic_load_n(&s->table91[ROUTE91_INDEX(n)], __ATOMIC_RELAXED);
        *cls = TAG_CLASS(t);
        return route_of_class(s, *cls);         /* ROUTE_NONE for an invalidated entry */
    }
#endif
    *cls = class_of_size(n);
    return route_of_class(s, *cls);
}

/* Any size: large sizes have no class (stored as HAK_NCLASSES). */
HAK_INLINE unsigned route_lookup(const struct policy_snapshot *s, size_t n, unsigned *cls)
{
    if (n <= HAK_TINY_MAX)
        return route_lookup_tiny(s, n, cls);
    if (n <= HAK_MID_MAX) {
        *cls = class_of_size(n);
        return route_of_class(s, *cls);
    }
    *cls = HAK_NCLASSES;
    return ROUTE_LARGE;
}

#endif
