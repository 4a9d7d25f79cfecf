/* randarray.c - threads that each replace blocks at random positions of their own large slot
 * array (256 K slots by default), with sizes skewed toward small: every op frees a random
 * slot's block and puts a new one of 16 B - 8 KiB there, half of them under 32 B, each size
 * octave half as likely as the one below.  No block crosses threads.  Prints one
 * machine-readable line; ops_per_sec counts free+malloc pairs over all threads. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_NAME "randarray"
#include "bench_util.h"

#define MAX_THREADS 256u
#define MIN_SHIFT 4u        /* 16 B */
#define MAX_SHIFT 12u       /* the last octave: 4 KiB .. 8 KiB */

static uint32_t nslots;
static unsigned long long ops_per_thread;
static pthread_barrier_t start_barrier;

struct worker {
    pthread_t tid;
    unsigned id;
    uint64_t rng;
    unsigned char **slots;
    uint64_t checksum;
};

/* An octave [2^e, 2^(e+1)) with e = 4 + the number of trailing one bits of a draw (capped),
 * so each octave is half as likely as the one below; uniform inside it. */
static inline size_t draw_size(uint64_t *rng)
{
    uint64_t r = next_rand(rng);
    unsigned e = MIN_SHIFT + (unsigned)__builtin_ctzll(~r);
    if (e > MAX_SHIFT)
        e = MAX_SHIFT;
    return ((size_t)1 << e) + below((uint32_t)(r >> 32), 1u << e);
}

/* The first word holds slot and size, the last byte a value derived from both: checked
 * before the block is freed, so a block handed out twice or overwritten is caught. */
static unsigned char *fill(uint32_t slot, size_t size, unsigned id)
{
    unsigned char *p = malloc(size);
    if (p == NULL) {
        fprintf(stderr, "randarray: thread %u: malloc(%zu) failed\n", id, size);
        exit(1);
    }
    uint64_t h = ((uint64_t)slot << 32) | size;
    memcpy(p, &h, sizeof h);
    p[size - 1] = (unsigned char)(slot * 13u + size);
    return p;
}

static uint64_t check_and_free(unsigned char *p, uint32_t slot, unsigned id)
{
    uint64_t h;
    memcpy(&h, p, sizeof h);
    size_t size = (uint32_t)h;
    if ((uint32_t)(h >> 32) != slot || size < (1u << MIN_SHIFT) || size >= (2u << MAX_SHIFT)
        || p[size - 1] != (unsigned char)(slot * 13u + size)) {
        fprintf(stderr, "randarray: thread %u: block %p in slot %u corrupted (header %#llx)\n",
                id, (void *)p, slot, (unsigned long long)h);
        exit(1);
    }
    free(p);
    return h;
}

/* The loop keeps its state in locals: the workers' structs share cache lines, and a
 * draw stored into one on every op would measure the benchmark's false sharing, which
 * moves with where the allocator put the array of them. */
static void *worker_main(void *arg)
{
    struct worker *w = arg;
    uint64_t rng = w->rng;
    unsigned char **slots = w->slots;
    unsigned id = w->id;
    for (uint32_t s = 0; s < nslots; s++)           /* the fill is not timed */
        slots[s] = fill(s, draw_size(&rng), id);
    pthread_barrier_wait(&start_barrier);
    uint64_t sum = 0;
    for (unsigned long long i = 0; i < ops_per_thread; i++) {
        uint32_t s = below((uint32_t)next_rand(&rng), nslots);
        sum += check_and_free(slots[s], s, id);
        slots[s] = fill(s, draw_size(&rng), id);
    }
    pthread_barrier_wait(&start_barrier);           /* the clock stops before the frees */
    for (uint32_t s = 0; s < nslots; s++)
        sum += check_and_free(slots[s], s, id);
    w->checksum = sum;
    return NULL;
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "threads", "slots", "ops_per_thread", "seed" };
    static const unsigned long long mins[] = { 1, 1, 1, 0 };
    unsigned long long arg[] = { 2, 262144, 5000000, 0x5eed5107ull };
    bench_args(argc, argv, "randarray [threads [slots [ops_per_thread [seed]]]]", 4, names, mins, arg);
    if (arg[0] > MAX_THREADS || arg[1] > UINT32_MAX) {
        fprintf(stderr, "randarray: at most %u threads and %u slots\n", MAX_THREADS, UINT32_MAX);
        return 2;
    }
    unsigned nthreads = (unsigned)arg[0];
    nslots = (uint32_t)arg[1];
    ops_per_thread = arg[2];
    uint64_t seeder = arg[3];

    struct worker *w = calloc(nthreads, sizeof *w);
    if (w == NULL || pthread_barrier_init(&start_barrier, NULL, nthreads + 1)) {
        fprintf(stderr, "randarray: out of memory\n");
        return 1;
    }
    for (unsigned t = 0; t < nthreads; t++) {
        w[t].id = t;
        w[t].rng = next_rand(&seeder);
        w[t].slots = calloc(nslots, sizeof *w[t].slots);
        if (w[t].slots == NULL || pthread_create(&w[t].tid, NULL, worker_main, &w[t])) {
            fprintf(stderr, "randarray: cannot start thread %u\n", t);
            return 1;
        }
    }
    struct timespec t0, t1;
    pthread_barrier_wait(&start_barrier);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_barrier_wait(&start_barrier);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    uint64_t checksum = 0;
    for (unsigned t = 0; t < nthreads; t++) {
        pthread_join(w[t].tid, NULL);
        checksum += w[t].checksum;
        free(w[t].slots);
    }
    free(w);
    sink = (unsigned char)checksum;

    char fields[96];
    snprintf(fields, sizeof fields, "threads=%u slots=%u ops=%llu", nthreads, nslots,
             (unsigned long long)nthreads * ops_per_thread);
    bench_report((double)nthreads * (double)ops_per_thread, t0, t1, fields);
    return 0;
}
