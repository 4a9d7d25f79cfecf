/* The profiling library's sampler (libhakmem-prof.so): each thread counts the bytes it
 * allocates down from a random interval and samples the block that runs it out. */
#define _GNU_SOURCE
#include <errno.h>
#include <link.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "../../include/hakmem.h"
#include "hot.h"
#include "sampler.h"
#include "stats.h"
#include "../prof/prof.h"

static HAK_TLS uint64_t prof_rng;
static HAK_TLS uint8_t prof_busy;        /* sampling: the unwinder's own mallocs are not sampled */
static HAK_TLS uint8_t prof_drawn;       /* this thread's first interval is drawn */
static _Atomic int prof_decided;         /* the constructor has read [prof] enabled */

/* The library's own code, whose frames top every sampled stack.  When hakmem is linked into
 * the program itself this is the program's code, so a fixed number of frames is dropped instead. */
static uintptr_t self_lo, self_hi;
#define SELF_FRAMES 3                    /* prof_stack, api_prof_sample, the entry point */

static uint64_t rng_next(void)
{
    if (prof_rng == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        prof_rng = ((uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull) ^ (uintptr_t)&prof_rng
                   ^ ((uint64_t)gettid() << 32) ^ 1;
    }
    uint64_t x = prof_rng;              /* xorshift64* */
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    prof_rng = x;
    return x * 0x2545f4914f6cdd1dull;
}

/* Bytes to the next sample: exponential with mean [prof] sample, so sample points form a
 * Poisson process over the bytes allocated and a block of n bytes is sampled with chance
 * 1 - exp(-n / rate), whatever came before it. */
static int64_t draw(void)
{
    double u = (double)((rng_next() >> 11) + 1) * 0x1p-53;     /* (0, 1] */
    double v = -log(u) * (double)prof_rate();
    return v < 0x1p62 ? (int64_t)v : (int64_t)1 << 62;
}

static unsigned frames_to_skip(void *const *pcs, unsigned depth)
{
    unsigned s = 0;
    if (self_hi == 0)
        return depth > SELF_FRAMES ? SELF_FRAMES : depth;
    while (s < depth && (uintptr_t)pcs[s] >= self_lo && (uintptr_t)pcs[s] < self_hi)
        s++;
    return s;
}

/* The sampled block's mark: its tag, or its large registry entry, so only its free leaves
 * the hot path (for prof_forget); an unsampled block's free costs nothing more. */
static int prof_mark(void *p, int on)
{
    uintptr_t a = (uintptr_t)p;
    unsigned b = region_map_get(a);
    if (region_map_is_region(b)) {
        struct region *r = region_from_map(a, b);
        uint8_t *t, from = on ? r->live_tag : TAG_SAMPLED;
        region_tag_check_live(r, a, &t);        /* t: p's tag, or the header's if p is none */
        return atomic_compare_exchange_strong((_Atomic uint8_t *)t, &from,
                                              (uint8_t)(on ? TAG_SAMPLED : r->live_tag));
    }
    return b == MAP_LARGE && large_mark_sampled(p, on);
}

static void warn_path(const char *path, int err)
{
    static _Atomic int warned;
    char line[PROF_PATH_MAX + 160];
    if (atomic_exchange(&warned, 1))
        return;
    int n = snprintf(line, sizeof line, "hakmem: warning: [prof] output: cannot write %s: %s; "
                     "the program goes on without it\n", path, strerrordesc_np(err));
    if (n > 0 && write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1) < 0)
        return;
}

/* A profile to [prof] output (numbered when seq > 0); a failure is one warning. */
static void write_profile(unsigned seq)
{
    char path[PROF_PATH_MAX];
    const char *pattern = policy_now()->prof_output;
    if (!prof_path(path, sizeof path, pattern, seq)) {
        warn_path(pattern, ENAMETOOLONG);
        return;
    }
    if (prof_dump(path) != 0)
        warn_path(path, errno);
}

/* [prof] signal: a profile at once, from the handler (an idle program runs nothing else),
 * unless the signal came inside the profiler's tables: then the next sample writes it.
 * Writing one allocates nothing and takes no lock but the tables'. */
static _Atomic int signal_pending;

static void prof_on_signal(int sig)
{
    (void)sig;
    int saved = errno;
    unsigned seq = prof_busy ? 0 : prof_seq_try();
    if (seq)
        write_profile(seq);
    else
        atomic_store(&signal_pending, 1);
    errno = saved;
}

static void prof_signal_install(const struct policy *pol)
{
    int sig = api_signal_of(pol->prof_signal, "[prof] signal");
    if (sig == 0)
        return;
    if (sig == api_signal_of(pol->stats_signal, NULL)) {
        static const char same[] = "hakmem: error: [prof] signal: the same as [stats] signal; no handler\n";
        if (write(2, same, sizeof same - 1) < 0)
            return;
        return;
    }
    api_signal_install(sig, prof_on_signal);
}

HAK_COLD void api_prof_sample(void *p, size_t n)
{
    if (!prof_active() || prof_busy) {
        /* Before the constructor has decided, look again every 64 KiB, so that a thread
         * which allocated during start-up is not left out once profiling starts; after,
         * never again (off), or not until the sampling below ends. */
        int wait = !prof_busy && !atomic_load_explicit(&prof_decided, memory_order_relaxed);
        api_prof_left = wait ? 1 << 16 : INT64_MAX;
        return;
    }
    if (!prof_drawn) {                  /* a new thread: its countdown started at 0 */
        prof_drawn = 1;
        api_prof_left = (int64_t)((uint64_t)draw() - n);
        if (api_prof_left >= 0)
            return;
    }
    int e = errno;
    prof_busy = 1;
    api_prof_left = INT64_MAX;
    void *pcs[PROF_DEPTH + SELF_FRAMES + 4];
    unsigned depth = prof_stack(pcs, sizeof pcs / sizeof pcs[0]);
    unsigned skip = frames_to_skip(pcs, depth);
    if (depth - skip > PROF_DEPTH)
        depth = skip + PROF_DEPTH;
    /* A block of n bytes is sampled with chance 1 - exp(-n / rate), so it stands for n over
     * that (gperftools' heap_v2 scaling, which google-pprof applies to the file itself). */
    double est = (double)n / -expm1(-(double)n / (double)prof_rate());
    if (p != NULL && prof_record((uintptr_t)p, n, est, pcs + skip, depth - skip) && !prof_mark(p, 1))
        prof_forget((uintptr_t)p);
    unsigned seq = prof_interval_due();
    if (seq)
        write_profile(seq);
    if (atomic_load_explicit(&signal_pending, memory_order_relaxed)
        && atomic_exchange(&signal_pending, 0) && (seq = prof_seq_try()))
        write_profile(seq);
    api_prof_left = draw();
    prof_busy = 0;
    errno = e;
}

HAK_COLD void api_prof_unsample(void *p)
{
    if (prof_active() && prof_mark(p, 0))
        prof_forget((uintptr_t)p);
}

HAK_EXPORT int hak_prof_dump(const char *path)
{
    char full[PROF_PATH_MAX];
    if (path == NULL) {
        errno = EINVAL;
        return -1;
    }
    if (!prof_path(full, sizeof full, path, 0)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return prof_dump(full);
}

static int find_self(struct dl_phdr_info *info, size_t size, void *ctx)
{
    (void)size, (void)ctx;
    uintptr_t me = (uintptr_t)&api_prof_sample;
    for (unsigned i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) || me < lo || me >= lo + ph->p_memsz)
            continue;
        if (info->dlpi_name && info->dlpi_name[0]) {   /* a library, not the program */
            self_lo = lo;
            self_hi = lo + ph->p_memsz;
        }
        return 1;
    }
    return 0;
}

/* After the allocator's own start-up (its constructor runs first: init.c), as the policy
 * must be read; samples begin here, so allocations made while the program's libraries
 * start are not in the profile. */
__attribute__((constructor(102))) static void api_prof_start(void)
{
    const struct policy *pol = policy_now();
    static const char other[] = "hakmem: warning: [prof] enabled, but this process's malloc is not this "
                                "library's (an allocator linked into the program or preloaded before it "
                                "serves it): no profile\n";
    int ours = pol->prof && api_malloc_is_ours();
    if (pol->prof && !ours && write(2, other, sizeof other - 1) < 0)
        ours = 0;
    if (ours) {
        void *pcs[4];
        dl_iterate_phdr(find_self, NULL);
        prof_start(pol->prof_sample, pol->prof_interval);
        prof_signal_install(pol);
        /* libunwind initialises itself on its first use, checking a flag outside its lock
         * (ThreadSanitizer saw two threads race there): that first use is here, before the
         * program can start a thread. */
        prof_stack(pcs, 4);
    }
    atomic_store(&prof_decided, 1);
}

/* At exit (the last destructor of a preloaded library runs after the program's own): the
 * leak report, then the profile. */
__attribute__((destructor)) static void api_prof_stop(void)
{
    if (!prof_active())
        return;
    prof_busy = 1;
    api_prof_left = INT64_MAX;
    if (policy_now()->prof_leaks)
        prof_leak_report(2);
    write_profile(0);
}
