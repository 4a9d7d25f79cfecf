/* OBSERVE: a heap's counters folded into the process totals (stats/) at cold-path entries,
 * and kept in a retired set when its thread ends, so nothing counted is lost. */
#include <pthread.h>
#include <string.h>
#include "slots.h"
#include "../stats/stats.h"

#if HAK_OBSERVE

static pthread_mutex_t obs_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct heap_obs obs_retired;                 /* counters of heaps whose threads ended */

void heap_obs_lock(void)   { pthread_mutex_lock(&obs_mutex); }
void heap_obs_unlock(void) { pthread_mutex_unlock(&obs_mutex); }

const struct heap_obs *heap_obs_retired(void)
{
    return &obs_retired;
}

static int64_t heap_live_bytes(const struct heap_obs *o)
{
    int64_t live = 0;
    for (unsigned c = 0; c < HAK_NCLASSES; c++)
        live += (int64_t)(o->allocs[c] - o->frees[c]) * (int64_t)class_table[c].size;
    return live;
}

/* Adds what h allocated or freed since its last sync to the global live count: the
 * peak is sampled at cold-path entries, so it is exact to within one cache refill. */
void heap_obs_sync(struct heap *h)
{
    if (!h->snap.observe)
        return;
    int64_t live = heap_live_bytes(&h->obs);
    stats_live_add(live - h->obs.live_synced);
    h->obs.live_synced = live;
}

void heap_obs_retire(struct heap *h)
{
    heap_obs_sync(h);
    pthread_mutex_lock(&obs_mutex);
    for (unsigned c = 0; c < OBS_SLOTS; c++) {
        obs_retired.allocs[c] += h->obs.allocs[c];
        obs_retired.frees[c] += h->obs.frees[c];
        obs_retired.slot_hits[c] += h->obs.slot_hits[c];
        obs_retired.overflows[c] += h->obs.overflows[c];
        obs_retired.refills[c] += h->obs.refills[c];
    }
    /* the blocks this heap left live stay counted in the live bytes through the retired counters */
    memset(&h->obs, 0, sizeof h->obs);
    pthread_mutex_unlock(&obs_mutex);
}

#endif
