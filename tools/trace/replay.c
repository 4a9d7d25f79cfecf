/* hakmem-replay: runs an allocation trace (libhakmem-trace.so's, trace.h) again through
 * whatever malloc is preloaded, writing every byte asked for, and reports the memory it
 * took: peak RSS growth, the live bytes at their peak, and the blocks' usable sizes. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "trace.h"

/* The trace's pointers to the replay's blocks: open addressing, mapped (not malloc'd, so
 * the table is not the allocator's memory), touched whole at the start so it is part of
 * the baseline, not of the growth. */
struct slot {
    uint64_t key;                       /* the traced pointer; 0 empty */
    void *p;
    uint64_t size;
};
static struct slot *tab;
static uint64_t tab_mask;

static uint64_t hash(uint64_t k)
{
    return (k * 0x9E3779B97F4A7C15ull) >> 17;
}

static struct slot *find(uint64_t k)
{
    for (uint64_t i = hash(k) & tab_mask;; i = (i + 1) & tab_mask)
        if (tab[i].key == k || tab[i].key == 0)
            return &tab[i];
}

/* Backward-shift deletion keeps every probe sequence whole. */
static void erase(struct slot *s)
{
    uint64_t i = (uint64_t)(s - tab), j = i;
    tab[i].key = 0;
    for (;;) {
        j = (j + 1) & tab_mask;
        if (tab[j].key == 0)
            return;
        uint64_t h = hash(tab[j].key) & tab_mask;
        if ((j > i && (h <= i || h > j)) || (j < i && h <= i && h > j)) {
            tab[i] = tab[j];
            tab[j].key = 0;
            i = j;
        }
    }
}

static long status_kb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0)
            v = atol(line + n);
    if (f)
        fclose(f);
    return v;
}

static uint64_t live, peak, nlive;
static long long missing;

/* The traced pointer of slot s is freed (or moved by realloc): its block no longer counts. */
static void forget(struct slot *s)
{
    live -= s->size;
    nlive--;
    erase(s);
}

/* Block p of `size` bytes now stands for the traced pointer `key`. */
static int place(uint64_t key, void *p, uint64_t size)
{
    struct slot *s = find(key);
    if (s->key == 0 && (++nlive) * 4 > (tab_mask + 1) * 3) {
        fprintf(stderr, "hakmem-replay: more than %llu live blocks: give --slots a larger power\n",
                (unsigned long long)((tab_mask + 1) * 3 / 4));
        return -1;
    }
    if (s->key != 0)
        live -= s->size;                /* the trace reused a pointer it never freed: replaced */
    s->key = key;
    s->p = p;
    s->size = size;
    live += size;
    return 0;
}

/* One record, run through the malloc in force; -1 if that malloc failed. */
static int step(const struct trace_rec *x, long long n, int touch)
{
    struct slot *s;
    void *p;
    uint32_t op = x->op;
    if (op == TRACE_REALLOC && x->old == 0)
        op = TRACE_MALLOC;
    switch (op) {
    case TRACE_MALLOC:
    case TRACE_CALLOC:
    case TRACE_MEMALIGN:
        if (x->ret == 0)
            return 0;                   /* it failed when traced */
        p = op == TRACE_MALLOC ? malloc(x->size) : op == TRACE_CALLOC ? calloc(1, x->size)
                                                 : memalign(x->align, x->size);
        if (p == NULL)
            break;
        if (touch && op != TRACE_CALLOC)
            memset(p, 0xa5, x->size);   /* calloc's memory is the allocator's to zero */
        return place(x->ret, p, x->size);
    case TRACE_FREE:
        s = find(x->old);
        if (s->key == 0) {
            missing++;                  /* allocated before the trace began */
            return 0;
        }
        free(s->p);
        forget(s);
        return 0;
    case TRACE_REALLOC:
        if (x->ret == 0)
            return 0;                   /* it failed when traced: the old block stays */
        s = find(x->old);
        if (s->key == 0) {
            missing++;
            return 0;
        }
        uint64_t old = s->size;
        p = realloc(s->p, x->size);
        if (p == NULL)
            break;
        forget(s);
        if (touch && x->size > old)
            memset((char *)p + old, 0xa5, x->size - old);
        return place(x->ret, p, x->size);
    default:
        fprintf(stderr, "hakmem-replay: record %lld: unknown operation %u\n", n, x->op);
        return -1;
    }
    fprintf(stderr, "hakmem-replay: record %lld: %s of %llu bytes failed\n", n,
            op == TRACE_REALLOC ? "realloc" : "allocation", (unsigned long long)x->size);
    return -1;
}

static int usage(void)
{
    fprintf(stderr, "usage: hakmem-replay [--no-touch] [--at N] [--dump FILE] [--slots K] TRACE\n"
                    "  runs TRACE (written by LD_PRELOAD=libhakmem-trace.so) under the malloc in force;\n"
                    "  --at N stops after record N, --dump writes each live block's size and usable size,\n"
                    "  --slots K sizes the table of live blocks (2^K slots, default 20)\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *path = NULL, *dump = NULL;
    long long at = -1;
    int touch = 1;
    unsigned bits = 20;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--no-touch") == 0)
            touch = 0;
        else if (strcmp(argv[i], "--at") == 0 && i + 1 < argc)
            at = atoll(argv[++i]);
        else if (strcmp(argv[i], "--dump") == 0 && i + 1 < argc)
            dump = argv[++i];
        else if (strcmp(argv[i], "--slots") == 0 && i + 1 < argc)
            bits = (unsigned)atoi(argv[++i]);
        else if (argv[i][0] == '-' || path)
            return usage();
        else
            path = argv[i];
    }
    if (path == NULL || bits < 10 || bits > 32)
        return usage();
    FILE *f = fopen(path, "rb");
    char magic[16];
    if (f == NULL || fread(magic, 1, sizeof magic, f) != sizeof magic
        || memcmp(magic, TRACE_MAGIC, sizeof TRACE_MAGIC - 1) != 0) {
        fprintf(stderr, "hakmem-replay: %s: %s\n", path, f ? "not a trace of libhakmem-trace.so" : strerror(errno));
        return 1;
    }
    size_t cap = (size_t)1 << bits;
    tab = mmap(NULL, cap * sizeof *tab, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (tab == MAP_FAILED) {
        fprintf(stderr, "hakmem-replay: cannot map a table of %zu slots\n", cap);
        return 1;
    }
    memset(tab, 0, cap * sizeof *tab);
    tab_mask = cap - 1;
    static struct trace_rec rb[4096];
    long base = status_kb("VmRSS:");
    long long n = 0, peak_at = 0;
    size_t got;
    while (at != 0 && (got = fread(rb, sizeof rb[0], sizeof rb / sizeof rb[0], f)) > 0) {
        for (size_t i = 0; i < got; i++, n++) {
            if (at >= 0 && n >= at)
                goto done;
            if (step(&rb[i], n, touch) != 0)
                return 1;
            if (live > peak) {
                peak = live;
                peak_at = n;
            }
        }
    }
done:;
    uint64_t usable = 0;
    FILE *d = dump ? fopen(dump, "w") : NULL;
    if (dump && d == NULL) {
        fprintf(stderr, "hakmem-replay: %s: %s\n", dump, strerror(errno));
        return 1;
    }
    for (size_t i = 0; i < cap; i++)
        if (tab[i].key) {
            size_t u = malloc_usable_size(tab[i].p);
            usable += u;
            if (d)
                fprintf(d, "%llu %zu\n", (unsigned long long)tab[i].size, u);
        }
    if (d)
        fclose(d);
    printf("replay records=%lld live_blocks=%llu live_kb=%llu usable_kb=%llu peak_live_kb=%llu peak_at=%lld "
           "rss_growth_peak_kb=%ld rss_growth_kb=%ld unmatched_frees=%lld\n",
           n, (unsigned long long)nlive, (unsigned long long)(live >> 10), (unsigned long long)(usable >> 10),
           (unsigned long long)(peak >> 10), peak_at, status_kb("VmHWM:") - base, status_kb("VmRSS:") - base,
           missing);
    return 0;
}
