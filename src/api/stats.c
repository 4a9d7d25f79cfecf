/* The statistics half of the public API: the OBSERVE counters of every heap and the process
 * totals as one struct (hak_stats_get), as a report (hak_stats_print), and at exit. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "../../include/hakmem.h"
#include "../cold/cold.h"
#include "../stats/stats.h"

#if HAK_OBSERVE

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
    heap_obs_lock();
    const struct heap_obs *retired = heap_obs_retired();
    for (unsigned c = 0; c < HAK_NCLASSES; c++) {
        s->cls[c].allocs = retired->allocs[c];
        s->cls[c].frees = retired->frees[c];
        s->cls[c].slot_hits = retired->slot_hits[c];
        s->cls[c].overflows = retired->overflows[c];
        s->cls[c].refills = retired->refills[c];
    }
    heap_foreach(add_heap, s);
    heap_obs_unlock();
    struct stats_totals t;
    stats_read(&t);
    for (unsigned c = 0; c < HAK_NCLASSES; c++) {
        s->cls[c].size = class_table[c].size;
        s->cls[c].remote_frees = t.remote_frees[c];
        s->cls[c].frees += t.remote_frees[c];
    }
    s->cls[HAK_NCLASSES].allocs = t.large_allocs;
    s->cls[HAK_NCLASSES].frees = t.large_frees;
    int64_t live = t.live, peak = t.peak;
    s->bytes_live = live > 0 ? (uint64_t)live : 0;
    s->bytes_peak = (uint64_t)(peak > live ? peak : live);
}

#endif

HAK_EXPORT int hak_stats_get(struct hak_stats *s)
{
    memset(s, 0, sizeof *s);
#if HAK_OBSERVE
    init_process();
    obs_collect(s);
#endif
    struct stats_totals t;
    stats_read(&t);
    s->regions_mapped = t.regions_mapped;
    s->regions_purged = t.regions_purged;
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
