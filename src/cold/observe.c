/* OBSERVE: folding the per-heap counters into a report (at exit, or by hak_stats_print),
 * plus the counters that belong to no heap: remote frees, large blocks, regions, live bytes. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "../../include/hakmem.h"
#include "cold.h"

static _Atomic uint64_t obs_regions_mapped, obs_regions_purged;

void cold_obs_region(int purged)
{
    atomic_fetch_add_explicit(purged ? &obs_regions_purged : &obs_regions_mapped, 1, memory_order_relaxed);
}

#if HAK_OBSERVE

static pthread_mutex_t obs_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct heap_obs obs_retired;                 /* counters of heaps whose threads ended */
static _Atomic uint64_t obs_remote[OBS_SLOTS];
static _Atomic uint64_t obs_large_allocs, obs_large_frees;
static _Atomic int64_t obs_live, obs_peak;

static void obs_peak_update(int64_t live)
{
    int64_t peak = atomic_load_explicit(&obs_peak, memory_order_relaxed);
    while (live > peak && !atomic_compare_exchange_weak(&obs_peak, &peak, live))
        ;
}

static int64_t heap_live_bytes(const struct heap_obs *o)
{
    int64_t live = 0;
    for (unsigned c = 0; c < HAK_NCLASSES; c++)
        live += (int64_t)(o->allocs[c] - o->frees[c]) * (int64_t)route_classes[c].size;
    return live;
}

/* Adds what h allocated or freed since its last sync to the global live count: the
 * peak is sampled at cold-path entries, so it is exact to within one cache refill. */
void cold_obs_sync(struct heap *h)
{
    if (!h->snap.observe)
        return;
    int64_t live = heap_live_bytes(&h->obs);
    int64_t now = atomic_fetch_add(&obs_live, live - h->obs.live_synced) + live - h->obs.live_synced;
    h->obs.live_synced = live;
    obs_peak_update(now);
}

void cold_obs_remote_free(unsigned cls)
{
    if (!policy_now()->observe)
        return;
    atomic_fetch_add_explicit(&obs_remote[cls], 1, memory_order_relaxed);
    int64_t now = atomic_fetch_sub(&obs_live, (int64_t)route_classes[cls].size);
    (void)now;
}

void cold_obs_large(int is_alloc, size_t bytes)
{
    if (!policy_now()->observe)
        return;
    atomic_fetch_add_explicit(is_alloc ? &obs_large_allocs : &obs_large_frees, 1, memory_order_relaxed);
    int64_t d = is_alloc ? (int64_t)bytes : -(int64_t)bytes;
    obs_peak_update(atomic_fetch_add(&obs_live, d) + d);
}

void cold_obs_retire(struct heap *h)
{
    cold_obs_sync(h);
    pthread_mutex_lock(&obs_mutex);
    for (unsigned c = 0; c < OBS_SLOTS; c++) {
        obs_retired.allocs[c] += h->obs.allocs[c];
        obs_retired.frees[c] += h->obs.frees[c];
        obs_retired.slot_hits[c] += h->obs.slot_hits[c];
        obs_retired.overflows[c] += h->obs.overflows[c];
        obs_retired.refills[c] += h->obs.refills[c];
    }
    /* the blocks this heap left live stay counted in obs_live through the retired counters */
    memset(&h->obs, 0, sizeof h->obs);
    pthread_mutex_unlock(&obs_mutex);
}

static void add_heap(struct heap *h, void *ctx)
{
    struct hak_stats *s = ctx;
    for (unsigned c = 0; c < HAK_NCLASSES; c++) {
        s->cls[c].allocs += __atomic_load_n(&h->obs.allocs[c], __ATOMIC_RELAXED);
        s->cls[c].frees += __atomic_load_n(&h->obs.frees[c], __ATOMIC_RELAXED);
        s->cls[c].slot_hits += __atomic_load_n(&h->obs.slot_hits[c], __ATOMIC_RELAXED);
        s->cls[c].overflows += __atomic_load_n(&h->obs.overflows[c], __ATOMIC_RELAXED);
        s->cls[c].refills += __atomic_load_n(&h->obs.refills[c], __ATOMIC_RELAXED);
    }
}

static void obs_collect(struct hak_stats *s)
{
    memset(s, 0, sizeof *s);
    s->compiled_in = 1;
    s->enabled = policy_now()->observe;
    s->nclasses = HAK_NCLASSES + 1;
    pthread_mutex_lock(&obs_mutex);
    for (unsigned c = 0; c < HAK_NCLASSES; c++) {
        s->cls[c].allocs = obs_retired.allocs[c];
        s->cls[c].frees = obs_retired.frees[c];
        s->cls[c].slot_hits = obs_retired.slot_hits[c];
        s->cls[c].overflows = obs_retired.overflows[c];
        s->cls[c].refills = obs_retired.refills[c];
    }
    cold_heap_foreach(add_heap, s);
    pthread_mutex_unlock(&obs_mutex);
    for (unsigned c = 0; c < HAK_NCLASSES; c++) {
        uint64_t remote = atomic_load(&obs_remote[c]);
        s->cls[c].size = route_classes[c].size;
        s->cls[c].remote_frees = remote;
        s->cls[c].frees += remote;
    }
    s->cls[HAK_NCLASSES].allocs = atomic_load(&obs_large_allocs);
    s->cls[HAK_NCLASSES].frees = atomic_load(&obs_large_frees);
    int64_t live = atomic_load(&obs_live), peak = atomic_load(&obs_peak);
    s->bytes_live = live > 0 ? (uint64_t)live : 0;
    s->bytes_peak = (uint64_t)(peak > live ? peak : live);
}

#endif

HAK_EXPORT int hak_stats_get(struct hak_stats *s)
{
    memset(s, 0, sizeof *s);
#if HAK_OBSERVE
    cold_init();
    obs_collect(s);
#endif
    s->regions_mapped = atomic_load(&obs_regions_mapped);
    s->regions_purged = atomic_load(&obs_regions_purged);
    return s->compiled_in && s->enabled ? 0 : -1;
}

static void out(int fd, char *buf, size_t *n, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#include <stdarg.h>
static void out(int fd, char *buf, size_t *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf + *n, 4096 - *n, fmt, ap);
    va_end(ap);
    if (k > 0)
        *n += (size_t)k < 4096 - *n ? (size_t)k : 4095 - *n;
    if (*n > 3000) {
        ssize_t w = write(fd, buf, *n);
        (void)w;
        *n = 0;
    }
}

static void stats_write(int fd)
{
    struct hak_stats s;
    char buf[4096];
    size_t n = 0;
    if (hak_stats_get(&s) < 0) {
        out(fd, buf, &n, "hakmem OBSERVE: %s\n", s.compiled_in ? "off ([observe] enabled = on to count)"
                                                                 : "compiled out (meson configure -Dobserve=true)");
    } else {
        uint64_t ta = 0, tf = 0, th = 0, to = 0, tr = 0, trem = 0, slot_frees = 0, slot_allocs = 0;
        out(fd, buf, &n, "hakmem OBSERVE (pid %d, policy epoch %llu)\n", (int)getpid(),
            (unsigned long long)atomic_load(&policy_epoch));
        out(fd, buf, &n, "%-6s %8s %12s %12s %12s %7s %10s %10s %12s\n", "class", "size", "allocs", "frees",
            "slot_hits", "hit%", "overflows", "refills", "remote_free");
        for (unsigned c = 0; c < s.nclasses; c++) {
            const struct hak_class_stats *k = &s.cls[c];
            if (!k->allocs && !k->frees)
                continue;
            char name[8];
            if (c < HAK_NCLASSES)
                snprintf(name, sizeof name, "C%u", c);
            else
                snprintf(name, sizeof name, "large");
            out(fd, buf, &n, "%-6s %8llu %12llu %12llu %12llu %6.1f%% %10llu %10llu %12llu\n", name,
                (unsigned long long)k->size, (unsigned long long)k->allocs, (unsigned long long)k->frees,
                (unsigned long long)k->slot_hits, k->allocs ? 100.0 * (double)k->slot_hits / (double)k->allocs : 0.0,
                (unsigned long long)k->overflows, (unsigned long long)k->refills, (unsigned long long)k->remote_frees);
            ta += k->allocs, tf += k->frees, th += k->slot_hits, to += k->overflows, tr += k->refills;
            trem += k->remote_frees;
            if (c < HAK_NCLASSES && policy_now()->route[c] == ROUTE_SLOTS)
                slot_frees += k->frees, slot_allocs += k->allocs;
        }
        out(fd, buf, &n, "total: allocs %llu, frees %llu, slot hits %llu, refills %llu, remote frees %llu\n",
            (unsigned long long)ta, (unsigned long long)tf, (unsigned long long)th, (unsigned long long)tr,
            (unsigned long long)trem);
        out(fd, buf, &n, "slots: PUSH TOTAL %llu, POP TOTAL %llu, overflow rate %.4f%%\n",
            (unsigned long long)slot_frees, (unsigned long long)slot_allocs,
            tf ? 100.0 * (double)to / (double)tf : 0.0);
        out(fd, buf, &n, "regions: mapped %llu, purged %llu; bytes live %llu, peak %llu\n",
            (unsigned long long)s.regions_mapped, (unsigned long long)s.regions_purged,
            (unsigned long long)s.bytes_live, (unsigned long long)s.bytes_peak);
    }
    ssize_t w = write(fd, buf, n);
    (void)w;
}

static int stats_fd(void)
{
    const char *o = policy_now()->observe_output;
    if (!*o || !strcmp(o, "stderr"))
        return 2;
    int fd = open(o, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    return fd < 0 ? 2 : fd;
}

HAK_EXPORT void hak_stats_print(void)
{
    int fd = stats_fd();
    stats_write(fd);
    if (fd != 2)
        close(fd);
}

/* The report at exit, when OBSERVE is compiled in and switched on. */
__attribute__((destructor)) static void obs_at_exit(void)
{
    if (HAK_OBSERVE && policy_now()->observe)
        hak_stats_print();
}
