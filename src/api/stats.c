/* The statistics half of the public API: the process totals (every build) and the OBSERVE
 * counters of every heap, as structs, as reports (hak_stats_print, malloc_stats, malloc_info,
 * at exit), and malloc_trim.  Reports are formatted on the stack and written with write(2). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include "stats.h"
#include "../cold/cold.h"
#include "../stats/stats.h"
#include "hakmem_version.h"

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

static void outf(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#include <stdarg.h>
/* printf into o's buffer, written out once it is three-quarters full (the widest line
 * fits the rest); a line longer than the room is cut. */
static void outf(struct out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(o->buf + o->n, o->cap - o->n, fmt, ap);
    va_end(ap);
    if (k > 0)
        o->n += (size_t)k < o->cap - o->n ? (size_t)k : o->cap - 1 - o->n;
    if (o->n > o->cap / 4 * 3)
        out_flush(o);
}

static void count_heap(struct heap *h, void *ctx)
{
    *(uint64_t *)ctx += h->live != 0;
}

/* Every figure but the heaps' count: relaxed counters, no lock. */
static void totals_counters(struct hak_totals *o)
{
    struct stats_totals t;
    stats_read(&t);
    o->mapped = t.mapped;
    o->in_use = t.in_use;
    o->retained = t.retained;
    o->sparse_purged = t.sparse_purged;
    o->sparse_refaulted = t.sparse_refaulted;
    o->sparse_out = t.sparse_out;
    o->visits = t.visits;
    uint64_t out = t.sparse_out * 4096u;
    o->resident = t.in_use + t.retained > out ? t.in_use + t.retained - out : 0;
    o->purged = t.purged;
    o->peak = t.peak_resident;
    o->large_blocks = t.large_blocks;
    o->large_bytes = t.large_bytes;
    o->regions_mapped = t.regions_mapped;
    o->regions_purged = t.regions_purged;
}

HAK_EXPORT void hak_totals_get(struct hak_totals *o)
{
    memset(o, 0, sizeof *o);
    totals_counters(o);
    heap_foreach(count_heap, &o->heaps);
}

static void out_bytes(struct out *o, const char *name, uint64_t v, const char *what)
{
    static const char unit[][4] = { "B", "KiB", "MiB", "GiB", "TiB" };
    double x = (double)v;
    unsigned u = 0;
    while (x >= 1024 && u < 4)
        x /= 1024, u++;
    outf(o, "  %-13s %15llu  (%7.1f %-3s)  %s\n", name, (unsigned long long)v, x, unit[u], what);
}

/* `in_signal`: from the [stats] signal's handler, which may have interrupted any code of the
 * program's or hakmem's: only the counters, read without a lock (no heap count, which walks
 * the heaps under their lock, and no profiler row, whose tables have one). */
static void totals_write(struct out *o, int in_signal)
{
    struct hak_totals t;
    if (in_signal) {
        memset(&t, 0, sizeof t);
        totals_counters(&t);
    } else {
        hak_totals_get(&t);
    }
    outf(o, "hakmem %s totals (pid %d):\n", HAK_VERSION, (int)getpid());
    out_bytes(o, "mapped", t.mapped, "every mapping hakmem holds");
    out_bytes(o, "resident", t.resident, "in use + retained - pages given back: hakmem's view of its RSS");
    out_bytes(o, "in use", t.in_use, "regions, spans and large blocks, whole: not the bytes live in them");
    out_bytes(o, "retained", t.retained, "free, kept resident for reuse");
    out_bytes(o, "purged", t.purged, "given back to the OS since start");
    out_bytes(o, "peak", t.peak, "the most resident has been (pages given back inside regions not counted)");
    if (!in_signal)
        outf(o, "  %-13s %15llu\n", "heaps", (unsigned long long)t.heaps);
    outf(o, "  %-13s %15llu  (%llu bytes)\n", "large blocks", (unsigned long long)t.large_blocks,
        (unsigned long long)t.large_bytes);
    outf(o, "  %-13s %15llu  (%llu purged)\n", "regions", (unsigned long long)t.regions_mapped,
        (unsigned long long)t.regions_purged);
    outf(o, "  %-13s %15llu  (%llu faulted in again, %llu given back now)\n", "sparse pages",
        (unsigned long long)t.sparse_purged, (unsigned long long)t.sparse_refaulted,
        (unsigned long long)t.sparse_out);
    outf(o, "  %-13s %15llu  (other threads' frees taken in for a thread out of its cold paths)\n",
        "visits", (unsigned long long)t.visits);
    if (!in_signal && prof_active()) {  /* the profiler's own memory, apart from the program's */
        struct prof_info pi;
        prof_read(&pi);
        out_bytes(o, "profiler", pi.mapped, "the heap profiler's own tables (mapped)");
        outf(o, "  %-13s %15llu  (%llu stacks, ~%.0f bytes live estimated, %llu dropped)\n",
            "samples live", (unsigned long long)pi.live, (unsigned long long)pi.stacks, pi.live_bytes,
            (unsigned long long)pi.dropped);
    }
}

static void stats_write(int fd)
{
    struct hak_stats s;
    char buf[4096];
    struct out o = OUT_INIT(buf, fd);
    totals_write(&o, 0);
    if (hak_stats_get(&s) < 0) {
        outf(&o, "hakmem OBSERVE: %s\n", s.compiled_in ? "off ([observe] enabled = on to count)"
                                                                 : "compiled out (meson configure -Dobserve=true)");
    } else {
        uint64_t ta = 0, tf = 0, th = 0, to = 0, tr = 0, trem = 0, slot_frees = 0, slot_allocs = 0;
        outf(&o, "hakmem OBSERVE (pid %d, policy epoch %llu)\n", (int)getpid(),
            (unsigned long long)atomic_load(&policy_epoch));
        outf(&o, "%-6s %8s %12s %12s %12s %7s %10s %10s %12s\n", "class", "size", "allocs", "frees",
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
            outf(&o, "%-6s %8llu %12llu %12llu %12llu %6.1f%% %10llu %10llu %12llu\n", name,
                (unsigned long long)k->size, (unsigned long long)k->allocs, (unsigned long long)k->frees,
                (unsigned long long)k->slot_hits, k->allocs ? 100.0 * (double)k->slot_hits / (double)k->allocs : 0.0,
                (unsigned long long)k->overflows, (unsigned long long)k->refills, (unsigned long long)k->remote_frees);
            ta += k->allocs, tf += k->frees, th += k->slot_hits, to += k->overflows, tr += k->refills;
            trem += k->remote_frees;
            if (c < HAK_NCLASSES && policy_now()->route[c] == ROUTE_SLOTS)
                slot_frees += k->frees, slot_allocs += k->allocs;
        }
        outf(&o, "total: allocs %llu, frees %llu, slot hits %llu, refills %llu, remote frees %llu\n",
            (unsigned long long)ta, (unsigned long long)tf, (unsigned long long)th, (unsigned long long)tr,
            (unsigned long long)trem);
        outf(&o, "slots: PUSH TOTAL %llu, POP TOTAL %llu, overflow rate %.4f%%\n",
            (unsigned long long)slot_frees, (unsigned long long)slot_allocs,
            tf ? 100.0 * (double)to / (double)tf : 0.0);
        outf(&o, "regions: mapped %llu, purged %llu; bytes live %llu, peak %llu\n",
            (unsigned long long)s.regions_mapped, (unsigned long long)s.regions_purged,
            (unsigned long long)s.bytes_live, (unsigned long long)s.bytes_peak);
    }
    out_flush(&o);
}

/* [stats] output with %p as the process id (by hand: also from the signal handler), or
 * [observe] output where that alone is set; NULL for stderr. */
static const char *stats_path(char *buf, size_t len)
{
    const struct policy *p = policy_now();
    const char *o = strcmp(p->stats_output, "stderr") ? p->stats_output : p->observe_output;
    if (!*o || !strcmp(o, "stderr"))
        return NULL;
    struct out b = { .buf = buf, .cap = len, .n = 0, .fd = -1, .err = 0 };
    for (const char *c = o; *c; c++) {
        if (c[0] == '%' && c[1] == 'p') {
            out_num(&b, (uint64_t)getpid(), 10, 0);
            c++;
        } else {
            char one[2] = { *c, 0 };
            out_str(&b, one);
        }
    }
    buf[b.n < len ? b.n : len - 1] = 0;
    return buf;
}

static int stats_fd(void)
{
    char path[300];
    const char *o = stats_path(path, sizeof path);
    if (o == NULL)
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

HAK_EXPORT const char *hak_version(void)
{
    return HAK_VERSION;
}

/* The totals to [stats] output, formatted on the stack and written with write(2). */
static void totals_report(int in_signal)
{
    char buf[4096];
    int fd = stats_fd();
    struct out o = OUT_INIT(buf, fd);
    totals_write(&o, in_signal);
    out_flush(&o);
    if (fd != 2)
        close(fd);
}

/* The report at exit: with OBSERVE compiled in and on, the totals and the counters; else
 * with [stats] enabled, the totals; to [stats] output. */
__attribute__((destructor)) static void stats_at_exit(void)
{
    const struct policy *p = policy_now();
    if (HAK_OBSERVE && p->observe)
        hak_stats_print();
    else if (p->stats)
        totals_report(0);
}

/* [stats] signal: the totals at once, from the handler itself (an idle program runs nothing
 * else): counters only. */
static void stats_on_signal(int sig)
{
    (void)sig;
    int saved = errno;
    totals_report(1);
    errno = saved;
}

/* After the policy constructor (101), which loads HAKMEM_CONFIG.  A name hakmem does not
 * know is said once; the program's own handler, installed later, replaces this one. */
HAK_COLD int api_signal_of(const char *name, const char *key)
{
    if (!strncasecmp(name, "SIG", 3))
        name += 3;
    int sig = !strcasecmp(name, "USR1") ? SIGUSR1 : !strcasecmp(name, "USR2") ? SIGUSR2 : 0;
    if (sig == 0 && key != NULL && strcasecmp(name, "none") && *name) {
        char line[160];
        struct out o = OUT_INIT(line, 2);
        out_str(&o, "hakmem: error: ");
        out_str(&o, key);
        out_str(&o, ": expected USR1, USR2 or none; no handler\n");
        out_flush(&o);
    }
    return sig;
}

/* A handler of hakmem's for sig: every signal blocked while it runs, calls restarted. */
HAK_COLD void api_signal_install(int sig, void (*fn)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fn;
    sa.sa_flags = SA_RESTART;
    sigfillset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
}

__attribute__((constructor(103))) static void stats_signal_install(void)
{
    int sig = api_signal_of(policy_now()->stats_signal, "[stats] signal");
    if (sig != 0)
        api_signal_install(sig, stats_on_signal);
}

void api_malloc_stats(void)
{
    char buf[4096];
    struct out o = OUT_INIT(buf, 2);
    init_process();
    totals_write(&o, 0);
    out_flush(&o);
}

int api_malloc_trim(size_t pad)
{
    init_process();
    heap_trim();
    size_t left = 0;
    size_t purged = arena_trim(pad, &left);
    pad = pad > left ? pad - left : 0;
    size_t sparse = arena_sparse_pass(1, pad);       /* Phase 101: pages inside regions too */
    size_t unmapped = large_trim(pad > sparse ? pad - sparse : 0);
    return purged || sparse || unmapped;
}

/* glibc's fields, from the totals: everything hakmem has is mapped, so "arena" is what it
 * maps; the large blocks are the "mmapped" ones; what malloc_trim could release is the
 * retained memory. */
struct mallinfo2 api_mallinfo2(void)
{
    struct hak_totals t;
    init_process();
    hak_totals_get(&t);
    struct mallinfo2 m;
    memset(&m, 0, sizeof m);
    m.arena = t.mapped;
    m.hblks = t.large_blocks;
    m.hblkhd = t.large_bytes;
    m.usmblks = t.peak;
    m.uordblks = t.in_use;
    m.fordblks = t.retained;
    m.keepcost = t.retained;
    return m;
}

/* glibc's layout (one heap, then the totals), filled from hakmem's totals. */
int api_malloc_info(int options, FILE *fp)
{
    if (options != 0 || fp == NULL) {
        errno = EINVAL;
        return -1;
    }
    struct hak_totals t;
    init_process();
    hak_totals_get(&t);
    char buf[2048];
    int n = snprintf(buf, sizeof buf,
        "<malloc version=\"1\">\n"
        "<heap nr=\"0\">\n<sizes>\n</sizes>\n"
        "<total type=\"fast\" count=\"0\" size=\"0\"/>\n"
        "<total type=\"rest\" count=\"0\" size=\"%llu\"/>\n"
        "<system type=\"current\" size=\"%llu\"/>\n"
        "<system type=\"max\" size=\"%llu\"/>\n"
        "<aspace type=\"total\" size=\"%llu\"/>\n"
        "<aspace type=\"mprotect\" size=\"%llu\"/>\n"
        "</heap>\n"
        "<total type=\"fast\" count=\"0\" size=\"0\"/>\n"
        "<total type=\"rest\" count=\"0\" size=\"%llu\"/>\n"
        "<total type=\"mmap\" count=\"%llu\" size=\"%llu\"/>\n"
        "<system type=\"current\" size=\"%llu\"/>\n"
        "<system type=\"max\" size=\"%llu\"/>\n"
        "<aspace type=\"total\" size=\"%llu\"/>\n"
        "<aspace type=\"mprotect\" size=\"%llu\"/>\n"
        "</malloc>\n",
        (unsigned long long)t.retained, (unsigned long long)t.resident, (unsigned long long)t.peak,
        (unsigned long long)t.mapped, (unsigned long long)t.mapped,
        (unsigned long long)t.retained, (unsigned long long)t.large_blocks, (unsigned long long)t.large_bytes,
        (unsigned long long)t.resident, (unsigned long long)t.peak,
        (unsigned long long)t.mapped, (unsigned long long)t.mapped);
    if (n < 0 || (size_t)n >= sizeof buf)
        return -1;
    return fwrite(buf, 1, (size_t)n, fp) == (size_t)n ? 0 : -1;
}

/* glibc's parameters (malloc.h), which hakmem accepts and ignores: its settings are its
 * policy keys, and a program tuning glibc must not fail for it. */
int api_mallopt(int param, int value)
{
    (void)value;
    switch (param) {
    case 1:  /* M_MXFAST */
    case 2:  /* M_NLBLKS */
    case 3:  /* M_GRAIN */
    case 4:  /* M_KEEP */
    case -1: /* M_TRIM_THRESHOLD */
    case -2: /* M_TOP_PAD */
    case -3: /* M_MMAP_THRESHOLD */
    case -4: /* M_MMAP_MAX */
    case -5: /* M_CHECK_ACTION */
    case -6: /* M_PERTURB */
    case -7: /* M_ARENA_TEST */
    case -8: /* M_ARENA_MAX */
        return 1;
    default:
        return 0;
    }
}
