/* transfer.c - transfer stress with thread turnover: generations of short-lived threads
 * allocate blocks of 8 B .. 512 B, free random earlier ones, and swap live ones through a
 * shared array, so other threads (often later ones) free what a thread allocated; half of
 * each thread's blocks live until it exits.  Every block carries a checksum checked before
 * it is freed.  ops_per_sec is allocations/s over all generations. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_NAME "transfer"
#include "bench_util.h"

#define MAX_THREADS 64u
#define TRANSFER_SLOTS 1000u

static _Atomic(uint64_t *) shared[TRANSFER_SLOTS];
static unsigned long long base_allocs;

/* Word 0: the block's length in words and a hash of its address; the other words follow
 * from the same hash, so a block written by another owner or handed out twice fails. */
static uint64_t block_hash(const uint64_t *b)
{
    uint64_t x = (uint64_t)(uintptr_t)b;
    return next_rand(&x);
}

static uint64_t *make(unsigned words)
{
    uint64_t *b = malloc(words * sizeof *b);
    if (b == NULL) {
        fprintf(stderr, "transfer: malloc(%zu) failed\n", words * sizeof *b);
        exit(1);
    }
    uint64_t h = block_hash(b);
    b[0] = (h << 16) | words;
    for (unsigned i = 1; i < words; i++)
        b[i] = h + i;
    return b;
}

static void check_free(uint64_t *b)
{
    if (b == NULL)
        return;
    uint64_t h = block_hash(b);
    unsigned words = (unsigned)(b[0] & 0xffff);
    int bad = (b[0] >> 16) != (h & 0xffffffffffffull) || words == 0 || words > 64;
    for (unsigned i = 1; !bad && i < words; i++)
        bad = b[i] != h + i;
    if (bad) {
        fprintf(stderr, "transfer: block %p corrupted\n", (void *)b);
        exit(1);
    }
    free(b);
}

/* A pointer array of the thread's own, grown by doubling. */
struct vec {
    uint64_t **v;
    size_t n, cap;
};

static void push(struct vec *a, uint64_t *b)
{
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 1024;
        a->v = realloc(a->v, a->cap * sizeof *a->v);
        if (a->v == NULL) {
            fprintf(stderr, "transfer: out of memory\n");
            exit(1);
        }
    }
    a->v[a->n++] = b;
}

struct worker {
    pthread_t tid;
    unsigned index;
    uint64_t rng;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    uint64_t rng = w->rng;
    struct vec live = { 0 }, kept = { 0 };
    unsigned long long n = base_allocs * (1 + w->index % 8);
    for (unsigned long long i = 0; i < n; i++) {
        uint64_t r = next_rand(&rng);
        if (r & 1) {                        /* half of them live until the thread ends */
            push(&kept, make(1u << below((uint32_t)(r >> 1), 7)));
        } else {
            push(&live, make(1u << below((uint32_t)(r >> 1), 5)));
        }
        uint32_t draw = (uint32_t)(r >> 32);
        if (below(draw, 3) < 2 && live.n > 0) {         /* 2/3: free a random earlier block */
            size_t k = below((uint32_t)next_rand(&rng), (uint32_t)live.n);
            check_free(live.v[k]);
            live.v[k] = live.v[--live.n];
        }
        if ((draw & 3) == 0 && live.n > 0) {            /* 1/4: swap one with another thread */
            uint64_t s = next_rand(&rng);
            size_t k = below((uint32_t)s, (uint32_t)live.n);
            uint64_t *got = atomic_exchange(&shared[below((uint32_t)(s >> 32), TRANSFER_SLOTS)], live.v[k]);
            if (got != NULL)
                live.v[k] = got;
            else
                live.v[k] = live.v[--live.n];
        }
    }
    for (size_t k = 0; k < live.n; k++)
        check_free(live.v[k]);
    for (size_t k = 0; k < kept.n; k++)
        check_free(kept.v[k]);
    free(live.v);
    free(kept.v);
    return NULL;
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "threads", "generations", "allocs", "seed" };
    static const unsigned long long mins[] = { 1, 1, 1, 0 };
    unsigned long long arg[] = { 2, 25, 5000, 0x7a45f3ull };
    bench_args(argc, argv, "transfer [threads [generations [allocs [seed]]]]", 4, names, mins, arg);
    if (arg[0] > MAX_THREADS || arg[2] > (1ull << 32)) {
        fprintf(stderr, "transfer: at most %u threads and 2^32 allocations a thread\n", MAX_THREADS);
        return 2;
    }
    unsigned nthreads = (unsigned)arg[0], generations = (unsigned)arg[1];
    base_allocs = arg[2];
    uint64_t seeder = arg[3];
    struct worker w[MAX_THREADS];
    unsigned long long total = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned g = 0; g < generations; g++) {
        for (unsigned t = 0; t < nthreads; t++) {
            w[t].index = g * nthreads + t;
            w[t].rng = next_rand(&seeder);
            total += base_allocs * (1 + w[t].index % 8);
            if (pthread_create(&w[t].tid, NULL, worker_main, &w[t])) {
                fprintf(stderr, "transfer: cannot start thread %u\n", t);
                return 1;
            }
        }
        for (unsigned t = 0; t < nthreads; t++)
            pthread_join(w[t].tid, NULL);
    }
    for (unsigned s = 0; s < TRANSFER_SLOTS; s++)
        check_free(atomic_exchange(&shared[s], NULL));
    clock_gettime(CLOCK_MONOTONIC, &t1);

    char fields[96];
    snprintf(fields, sizeof fields, "threads=%u generations=%u allocs=%llu", nthreads, generations, total);
    bench_report((double)total, t0, t1, fields);
    return 0;
}
