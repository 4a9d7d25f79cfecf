/* threadchurn.c - threads that exit leaving live blocks: each round starts a few threads that
 * allocate blocks of 16 B..3 KiB, free every other one and exit; the main thread joins them
 * and frees one survivor of each.  Thread-per-task servers and resizing pools do this.
 * Prints one machine-readable line; ops_per_sec is mallocs + frees per second. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define BENCH_NAME "threadchurn"
#include "bench_util.h"

#define MIN_SIZE 16u
#define MAX_SIZE 3072u

struct task {
    unsigned nblocks;
    uint64_t seed;
    void **kept;            /* the survivors, every other block */
};

/* Log-uniform in [MIN_SIZE, MAX_SIZE]: most blocks small, as in real programs. */
static size_t draw_size(uint64_t *rng)
{
    uint64_t r = next_rand(rng);
    unsigned span = 8;      /* 16 B .. 4 KiB in octaves, cut at MAX_SIZE */
    size_t lo = (size_t)MIN_SIZE << below((uint32_t)(r >> 32), span);
    size_t n = lo + below((uint32_t)r, (uint32_t)lo);
    return n > MAX_SIZE ? MAX_SIZE : n;
}

static void *task_main(void *arg)
{
    struct task *t = arg;
    uint64_t rng = t->seed;
    void **all = malloc(t->nblocks * sizeof *all);
    if (all == NULL)
        abort();
    for (unsigned i = 0; i < t->nblocks; i++) {
        size_t n = draw_size(&rng);
        unsigned char *p = malloc(n);
        if (p == NULL)
            abort();
        p[0] = (unsigned char)i;
        p[n - 1] = (unsigned char)i;
        all[i] = p;
    }
    for (unsigned i = 0; i < t->nblocks; i++) {
        if (i & 1)
            free(all[i]);
        else
            t->kept[i / 2] = all[i];
    }
    free(all);
    return NULL;
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "rounds", "threads", "blocks" };
    static const unsigned long long mins[] = { 1, 1, 2 };
    unsigned long long arg[] = { 1000, 4, 200 };
    bench_args(argc, argv, "threadchurn [rounds [threads [blocks]]]", 3, names, mins, arg);
    unsigned long long rounds = arg[0], threads = arg[1], nblocks = arg[2];

    unsigned keep = (unsigned)(nblocks / 2);
    struct task *tasks = calloc(threads, sizeof *tasks);
    pthread_t *tid = calloc(threads, sizeof *tid);
    if (tasks == NULL || tid == NULL)
        return 1;
    uint64_t rng = 0x7c4a7c4aull;
    unsigned checksum = 0;
    unsigned long long ops = 0;

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned long long r = 0; r < rounds; r++) {
        for (unsigned k = 0; k < threads; k++) {
            tasks[k].nblocks = (unsigned)nblocks;
            tasks[k].seed = next_rand(&rng);
            /* the survivors' list lives as long as they do: never freed, like them */
            tasks[k].kept = malloc(keep * sizeof(void *));
            if (tasks[k].kept == NULL || pthread_create(&tid[k], NULL, task_main, &tasks[k]) != 0) {
                fprintf(stderr, "threadchurn: cannot start a thread in round %llu\n", r);
                return 1;
            }
        }
        for (unsigned k = 0; k < threads; k++) {
            pthread_join(tid[k], NULL);
            unsigned char *p = tasks[k].kept[r % keep];
            checksum += p[0];
            free(p);
            tasks[k].kept[r % keep] = NULL;
        }
        ops += threads * (nblocks + nblocks / 2 + 1);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    sink = (unsigned char)checksum;

    char fields[32];
    snprintf(fields, sizeof fields, "rounds=%llu", rounds);
    bench_report((double)ops, t0, t1, fields);
    return 0;
}
