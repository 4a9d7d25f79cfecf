/* Compiled defaults of the global policy, its epoch, and building a thread's snapshot from it.
 * The snapshot copies the routes so the hot path never reads shared, mutable state. */
#include <string.h>
#include "policy.h"

struct policy policy_global;
_Atomic uint64_t policy_epoch = 1;

void policy_defaults(struct policy *p)
{
    memset(p, 0, sizeof *p);
    for (unsigned c = 0; c < HAK_NCLASSES; c++)
        p->route[c] = route_classes[c].default_route;
    for (unsigned c = 4; c < HAK_NTINY; c++)     /* inline slots serve C4-C7 by default */
        p->route[c] = ROUTE_SLOTS;
    p->slots_cap = 64;
    p->phase91 = 1;
    p->observe = 0;
    p->on_misuse_abort = HAK_HARDENED;
    p->purge_cap = (size_t)8 << 20;
    p->large_cache_bytes = (size_t)32 << 20;
}

void policy_snapshot_build(struct policy_snapshot *s)
{
    const struct policy *g = &policy_global;
    s->epoch = atomic_load_explicit(&policy_epoch, memory_order_acquire);
    memcpy(s->route, g->route, sizeof s->route);
    for (unsigned c = HAK_NTINY; c < HAK_NCLASSES; c++)   /* slots exist for tiny classes only */
        if (s->route[c] == ROUTE_SLOTS || s->route[c] == ROUTE_NONE)
            s->route[c] = ROUTE_MID;
    s->slots_cap = g->slots_cap;
    s->phase91 = (uint8_t)(HAK_PHASE91 && g->phase91);
#if HAK_PHASE91
    for (size_t i = 0; i < ROUTE91_ENTRIES; i++) {
        unsigned cls = route_class_of(i << 3);
        s->table91[i] = (uint16_t)(cls | (unsigned)s->route[cls] << 8);
    }
#endif
}
