/* The profiler's tables: call stacks (hashed, with live and total sample counts) and the
 * sampled blocks still live (open addressing by address), in its own bounded mappings. */
#include <errno.h>
#include <stdatomic.h>
#include <pthread.h>
#include <string.h>
#include "../common/common.h"
#include "../os/os.h"
#include "table.h"

struct prof_tables prof_tab;
static pthread_mutex_t prof_mutex = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int prof_on;

void prof_lock(void)   { pthread_mutex_lock(&prof_mutex); }
void prof_unlock(void) { pthread_mutex_unlock(&prof_mutex); }
void prof_after_fork_child(void) { pthread_mutex_init(&prof_mutex, NULL); }

int prof_active(void)
{
    return atomic_load_explicit(&prof_on, memory_order_relaxed);
}

size_t prof_rate(void)
{
    return prof_tab.rate;
}

/* Mapped once, touched as they fill: only the used part is ever resident. */
HAK_COLD void prof_start(size_t rate, uint64_t interval)
{
    if (prof_active() || rate == 0)
        return;
    prof_tab.rate = rate;
    prof_tab.interval = interval;
    prof_tab.next_dump = (double)interval;
    prof_tab.stacks = os_map(PROF_STACKS_MAX * sizeof(struct prof_stack));
    prof_tab.pcs = os_map(PROF_PCS_MAX * sizeof(uintptr_t));
    prof_tab.buckets = os_map(PROF_BUCKETS * sizeof(uint32_t));
    if (!prof_tab.stacks || !prof_tab.pcs || !prof_tab.buckets)
        return;                         /* profiling stays off; a dump then fails with ENOTSUP */
    prof_tab.nstacks = 1;               /* index 0: no stack, the empty bucket */
    atomic_store(&prof_on, 1);
}

static uint64_t hash_pcs(void *const *pcs, unsigned depth)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ depth;
    for (unsigned i = 0; i < depth; i++) {
        h ^= (uintptr_t)pcs[i];
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    return h;
}

/* The stack's index, added if new; 0 when a table is full. */
static uint32_t stack_find(void *const *pcs, unsigned depth)
{
    uint64_t h = hash_pcs(pcs, depth);
    uint32_t *b = &prof_tab.buckets[h & (PROF_BUCKETS - 1)];
    for (uint32_t i = *b; i != 0; i = prof_tab.stacks[i].next) {
        struct prof_stack *s = &prof_tab.stacks[i];
        if (s->hash == h && s->depth == depth
            && !memcmp(&prof_tab.pcs[s->first], pcs, depth * sizeof(uintptr_t)))
            return i;
    }
    if (prof_tab.nstacks == PROF_STACKS_MAX || prof_tab.npcs + depth > PROF_PCS_MAX)
        return 0;
    uint32_t i = prof_tab.nstacks++;
    struct prof_stack *s = &prof_tab.stacks[i];
    s->hash = h;
    s->depth = depth;
    s->first = prof_tab.npcs;
    memcpy(&prof_tab.pcs[s->first], pcs, depth * sizeof(uintptr_t));
    prof_tab.npcs += depth;
    s->next = *b;
    *b = i;
    return i;
}

static size_t slot_of(uintptr_t p, size_t cap)
{
    return (size_t)(((p >> 4) * 0x9e3779b97f4a7c15ull) >> 20) & (cap - 1);
}

static void block_put(struct prof_block *t, size_t cap, struct prof_block b)
{
    size_t i = slot_of(b.p, cap);
    while (t[i].p != 0)
        i = (i + 1) & (cap - 1);
    t[i] = b;
}

/* Room for one more live sample: the table doubles at half full, up to its bound. */
static int blocks_room(void)
{
    if (prof_tab.nblocks + 1 <= prof_tab.cap / 2)
        return 1;
    size_t cap = prof_tab.cap ? prof_tab.cap * 2 : PROF_BLOCKS_MIN;
    if (cap > PROF_BLOCKS_MAX)
        return 0;
    struct prof_block *t = os_map(cap * sizeof *t);
    if (t == NULL)
        return 0;
    for (size_t i = 0; i < prof_tab.cap; i++)
        if (prof_tab.blocks[i].p != 0)
            block_put(t, cap, prof_tab.blocks[i]);
    if (prof_tab.blocks)
        os_unmap(prof_tab.blocks, prof_tab.cap * sizeof *t);
    prof_tab.blocks = t;
    prof_tab.cap = cap;
    return 1;
}

HAK_COLD int prof_record(uintptr_t p, size_t n, double est, void *const *pcs, unsigned depth)
{
    if (!prof_active() || p == 0 || depth == 0)
        return 0;
    int ok = 0;
    prof_lock();
    uint32_t s = stack_find(pcs, depth);
    if (s != 0 && blocks_room()) {
        block_put(prof_tab.blocks, prof_tab.cap, (struct prof_block){ p, n, s, (float)est });
        prof_tab.nblocks++;
        struct prof_stack *st = &prof_tab.stacks[s];
        st->live_n++;
        st->live_bytes += n;
        st->total_n++;
        st->total_bytes += n;
        st->est_live += (float)est;
        prof_tab.est_live += (float)est;
        ok = 1;
    } else {
        prof_tab.dropped++;
    }
    prof_unlock();
    return ok;
}

HAK_COLD void prof_forget(uintptr_t p)
{
    prof_lock();
    size_t cap = prof_tab.cap, i = cap ? slot_of(p, cap) : 0;
    while (cap && prof_tab.blocks[i].p != 0 && prof_tab.blocks[i].p != p)
        i = (i + 1) & (cap - 1);
    if (cap && prof_tab.blocks[i].p == p) {
        struct prof_block b = prof_tab.blocks[i];
        struct prof_stack *st = &prof_tab.stacks[b.stack];
        st->live_n--;
        st->live_bytes -= b.size;
        st->est_live -= b.est;          /* exactly what was added: the same float */
        prof_tab.est_live -= b.est;
        prof_tab.nblocks--;
        /* Backward-shift deletion: later entries of the run move up, so no tombstones. */
        size_t j = i;
        for (;;) {
            prof_tab.blocks[i].p = 0;
            for (;;) {
                j = (j + 1) & (cap - 1);
                if (prof_tab.blocks[j].p == 0) {
                    prof_unlock();
                    return;
                }
                size_t k = slot_of(prof_tab.blocks[j].p, cap);
                /* j's entry may fill the hole at i unless its home lies in (i, j] */
                if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
                    continue;
                break;
            }
            prof_tab.blocks[i] = prof_tab.blocks[j];
            i = j;
        }
    }
    prof_unlock();
}

HAK_COLD unsigned prof_interval_due(void)
{
    unsigned seq = 0;
    if (prof_tab.interval == 0)
        return 0;
    prof_lock();
    if (prof_tab.est_live >= prof_tab.next_dump) {
        prof_tab.next_dump = prof_tab.est_live + (double)prof_tab.interval;
        seq = ++prof_tab.dumps;
    }
    prof_unlock();
    return seq;
}

HAK_COLD unsigned prof_seq_try(void)
{
    if (pthread_mutex_trylock(&prof_mutex) != 0)
        return 0;
    unsigned seq = ++prof_tab.dumps;
    prof_unlock();
    return seq;
}

void prof_read(struct prof_info *out)
{
    prof_lock();
    out->mapped = prof_tab.stacks ? PROF_STACKS_MAX * sizeof(struct prof_stack)
                  + PROF_PCS_MAX * sizeof(uintptr_t) + PROF_BUCKETS * sizeof(uint32_t)
                  + prof_tab.cap * sizeof(struct prof_block) : 0;
    out->stacks = prof_tab.nstacks ? prof_tab.nstacks - 1 : 0;
    out->live = prof_tab.nblocks;
    out->dropped = prof_tab.dropped;
    out->live_bytes = prof_tab.est_live;
    prof_unlock();
}
