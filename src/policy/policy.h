/* The global policy (defaults <- INI <- environment) and the per-thread snapshot of it.
 * The hot path reads only the snapshot; a thread rebuilds it on its next cold-path entry after the epoch moves. */
#ifndef HAK_POLICY_H
#define HAK_POLICY_H

#include <stdatomic.h>
#include <stdint.h>
#include "../common/attrs.h"
#include "../route/classes.h"

#define HAK_SLOTS_CAP_MAX 128

struct policy {
    uint8_t  route[HAK_NCLASSES];    /* route per class */
    uint16_t slots_cap;              /* inline-slot capacity per class, 1..HAK_SLOTS_CAP_MAX */
    uint8_t  phase91;                /* runtime switch; effective only if compiled in */
    uint8_t  observe;
    uint8_t  on_misuse_abort;        /* report then abort, as glibc does */
    size_t   purge_cap;              /* bytes of empty regions kept unpurged (all heaps) */
    size_t   large_cache_bytes;      /* bound of the large-block cache */
};

/* Phase 91 entry: class in the low byte, route in the high byte. */
#define ROUTE91_INDEX(n) (((n) + 7) >> 3)
#define ROUTE91_ENTRIES  (ROUTE91_INDEX(HAK_TINY_MAX) + 1)

struct policy_snapshot {
    uint8_t  route[HAK_NCLASSES];
    uint8_t  phase91;
    uint16_t slots_cap;
    uint64_t epoch;
#if HAK_PHASE91
    uint16_t table91[ROUTE91_ENTRIES];
#endif
};

extern struct policy policy_global;
extern _Atomic uint64_t policy_epoch;

void policy_defaults(struct policy *p);
void policy_snapshot_build(struct policy_snapshot *s);

#endif
