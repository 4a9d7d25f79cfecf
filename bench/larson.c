/* larson.c - a Larson-like server workload: T threads each own an array of slots filled
 * with blocks; every op frees a random slot's block and allocates a new one (7/8 of sizes
 * 16..512, 1/8 513..4096). After every epoch a thread passes its array on and takes one
 * another thread worked on, so it frees blocks another thread allocated (cross-thread
 * frees), as in the original Larson benchmark. Fixed ops per thread; prints one
 * machine-readable line; ops_per_sec counts free+malloc pairs over all threads. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define BENCH_NAME "larson"
#include "bench_util.h"

#define MIN_SIZE 16u
#define SMALL_MAX 512u
#define LARGE_MAX 4096u
#define MAX_THREADS 1024u

/* Shared, read-only once the threads start. There are T+1 slot arrays: one held by each
 * thread and one waiting in a one-place pool. At the end of every epoch a thread swaps its
 * array for the waiting one, which the thread that swapped just before it worked on: so
 * it frees blocks another thread allocated (cross-thread frees), as when a Larson thread
 * hands its array to the next. No thread ever waits for another to finish an epoch (a
 * barrier would make a loaded machine measure the scheduler); the price is that which
 * thread gets which array depends on timing, while each thread's own sequence of ops and
 * sizes stays deterministic. */
static unsigned nthreads;
static uint32_t nslots;
static unsigned long long ops_per_thread;
static unsigned long long epoch_ops;

struct slot_array {
    unsigned char **slots;
    unsigned holder;        /* the thread that held it last */
};

static struct slot_array *arrays;           /* nthreads + 1 */
static _Atomic(struct slot_array *) pool;   /* the waiting array */
static pthread_barrier_t start_barrier;     /* workers + main */

struct worker {
    pthread_t tid;
    unsigned id;
    uint64_t rng;
    unsigned checksum;
    unsigned long long handoffs;   /* arrays taken from the pool */
    unsigned long long foreign;    /* ... that another thread held last */
};

/* 7 in 8 blocks are 16..512 bytes, 1 in 8 are 513..4096: mostly small, as in a server. */
static inline size_t draw_size(uint64_t *rng)
{
    uint64_t r = next_rand(rng);
    if ((r >> 61) == 0)
        return SMALL_MAX + 1 + below((uint32_t)r, LARGE_MAX - SMALL_MAX);
    return MIN_SIZE + below((uint32_t)r, SMALL_MAX - MIN_SIZE + 1);
}

static inline unsigned char tail_byte(uint32_t slot, size_t size)
{
    return (unsigned char)(slot * 7u + size);
}

/* Header word: slot index and size; the last byte is derived from both. Checked at
 * free, so a block handed back twice or overwritten by the allocator is caught. */
static unsigned char *alloc_block(uint32_t slot, size_t size, unsigned id)
{
    unsigned char *p = malloc(size);
    if (!p) {
        fprintf(stderr, "larson: thread %u: malloc(%zu) failed\n", id, size);
        exit(1);
    }
    uint64_t h = ((uint64_t)slot << 32) | size;
    memcpy(p, &h, sizeof h);
    p[size - 1] = tail_byte(slot, size);
    return p;
}

static unsigned check_and_free(unsigned char *p, uint32_t slot, unsigned id)
{
    uint64_t h;
    memcpy(&h, p, sizeof h);
    size_t size = (size_t)(uint32_t)h;
    if ((uint32_t)(h >> 32) != slot || size < MIN_SIZE || size > LARGE_MAX ||
        p[size - 1] != tail_byte(slot, size)) {
        fprintf(stderr, "larson: thread %u: block %p in slot %u corrupted (header %#llx)\n",
                id, (void *)p, slot, (unsigned long long)h);
        exit(1);
    }
    unsigned c = p[0] + p[size - 1];
    free(p);
    return c;
}

/* The draws live in a local: the workers' structs share cache lines, and a state stored
 * into one on every op would measure the benchmark's own false sharing, which moves with
 * where the allocator put the array of them. */
static void *worker_main(void *arg)
{
    struct worker *w = arg;
    uint64_t rng = w->rng;

    /* Initial fill by the owning thread, before the clock starts; thread 0 also
     * fills the array that starts in the pool. */
    for (unsigned a = w->id; a <= nthreads; a += nthreads) {
        arrays[a].holder = w->id;
        for (uint32_t s = 0; s < nslots; s++)
            arrays[a].slots[s] = alloc_block(s, draw_size(&rng), w->id);
    }

    pthread_barrier_wait(&start_barrier);

    struct slot_array *cur = &arrays[w->id];
    unsigned long long done = 0;
    unsigned checksum = 0;
    while (done < ops_per_thread) {
        unsigned long long n = ops_per_thread - done;
        if (n > epoch_ops)
            n = epoch_ops;
        unsigned char **arr = cur->slots;
        for (unsigned long long i = 0; i < n; i++) {
            uint64_t r = next_rand(&rng);
            uint32_t slot = below((uint32_t)(r >> 32), nslots);
            checksum += check_and_free(arr[slot], slot, w->id);
            arr[slot] = alloc_block(slot, draw_size(&rng), w->id);
        }
        done += n;
        if (done < ops_per_thread) {
            cur->holder = w->id;
            cur = atomic_exchange(&pool, cur);
            w->handoffs++;
            w->foreign += cur->holder != w->id;
        }
    }
    w->checksum = checksum;
    return NULL;
}

int main(int argc, char **argv)
{
    unsigned long long threads_arg = 2;
    unsigned long long slots_arg = 1000;
    unsigned long long ops_arg = 5000000ull;
    unsigned long long epoch_arg = 10000;
    uint64_t seed = 0x1a750a5eedull;

    if (argc > 6) {
        fprintf(stderr, "usage: %s [threads] [slots] [ops_per_thread] [epoch_ops] [seed]\n", argv[0]);
        return 2;
    }
    if (argc > 1) threads_arg = parse_arg(argv[1], "threads", 1);
    if (argc > 2) slots_arg = parse_arg(argv[2], "slots", 1);
    if (argc > 3) ops_arg = parse_arg(argv[3], "ops per thread", 1);
    if (argc > 4) epoch_arg = parse_arg(argv[4], "epoch ops", 1);
    if (argc > 5) seed = parse_arg(argv[5], "seed", 0);
    if (threads_arg > MAX_THREADS || slots_arg > UINT32_MAX) {
        fprintf(stderr, "larson: at most %u threads and %u slots\n", MAX_THREADS, UINT32_MAX);
        return 2;
    }
    nthreads = (unsigned)threads_arg;
    nslots = (uint32_t)slots_arg;
    ops_per_thread = ops_arg;
    epoch_ops = epoch_arg;

    /* Bookkeeping is allocated before the clock starts so it is not measured. */
    unsigned narrays = nthreads + 1;
    arrays = calloc(narrays, sizeof *arrays);
    struct worker *workers = calloc(nthreads, sizeof *workers);
    if (!arrays || !workers) {
        perror("larson: calloc");
        return 1;
    }
    for (unsigned a = 0; a < narrays; a++) {
        arrays[a].slots = calloc(nslots, sizeof *arrays[a].slots);
        if (!arrays[a].slots) {
            perror("larson: calloc slots");
            return 1;
        }
    }
    atomic_init(&pool, &arrays[nthreads]);
    if (pthread_barrier_init(&start_barrier, NULL, nthreads + 1)) {
        fprintf(stderr, "larson: pthread_barrier_init failed\n");
        return 1;
    }

    uint64_t seeder = seed;
    for (unsigned t = 0; t < nthreads; t++) {
        workers[t].id = t;
        workers[t].rng = next_rand(&seeder);
        int rc = pthread_create(&workers[t].tid, NULL, worker_main, &workers[t]);
        if (rc) {
            fprintf(stderr, "larson: pthread_create: %s\n", strerror(rc));
            return 1;
        }
    }

    struct timespec t0, t1;
    pthread_barrier_wait(&start_barrier);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned t = 0; t < nthreads; t++)
        pthread_join(workers[t].tid, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);

    /* Untimed teardown: the main thread frees (and checks) every remaining block. */
    unsigned checksum = 0;
    unsigned long long handoffs = 0, foreign = 0;
    for (unsigned t = 0; t < nthreads; t++) {
        checksum += workers[t].checksum;
        handoffs += workers[t].handoffs;
        foreign += workers[t].foreign;
    }
    for (unsigned a = 0; a < narrays; a++) {
        for (uint32_t s = 0; s < nslots; s++)
            checksum += check_and_free(arrays[a].slots[s], s, nthreads);
        free(arrays[a].slots);
    }
    free(arrays);
    free(workers);
    pthread_barrier_destroy(&start_barrier);
    sink = (unsigned char)checksum;

    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);

    unsigned long long total_ops = ops_per_thread * nthreads;
    double seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    /* ru_maxrss is in kilobytes on Linux. */
    printf("bench=larson ops_per_sec=%.0f seconds=%.6f threads=%u slots=%u ops=%llu "
           "epoch_ops=%llu handoffs=%llu foreign_handoffs=%llu peak_rss_kb=%ld\n",
           seconds > 0 ? (double)total_ops / seconds : 0.0, seconds, nthreads, nslots,
           total_ops, epoch_ops, handoffs, foreign, ru.ru_maxrss);
    return 0;
}
