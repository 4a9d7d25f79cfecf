/* prodcons.c - producer/consumer: P producer threads allocate blocks (16..4096 bytes,
 * skewed small), stamp a header and a tail byte, and pass them through a bounded lock-free
 * queue to C consumer threads, which check the stamps and free the blocks, so every free
 * is a cross-thread free. Prints one machine-readable line; ops_per_sec is blocks/s. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define BENCH_NAME "prodcons"
#include "bench_util.h"

#define MIN_SIZE 16u
#define MAX_THREADS 512u

/* Bounded MPMC queue (Vyukov): each cell carries a sequence number that says whether it
 * is free for the producer of ticket 'pos' (seq == pos) or full for its consumer
 * (seq == pos + 1). Cells are padded to a cache line so neighbours do not false-share. */
struct cell {
    alignas(64) _Atomic size_t seq;
    void *data;
};

static struct {
    struct cell *cells;
    size_t mask;
    alignas(64) _Atomic size_t tail;  /* next enqueue ticket */
    alignas(64) _Atomic size_t head;  /* next dequeue ticket */
} q;

static int queue_init(size_t capacity)
{
    q.cells = aligned_alloc(64, capacity * sizeof *q.cells);
    if (!q.cells)
        return -1;
    q.mask = capacity - 1;
    for (size_t i = 0; i < capacity; i++) {
        atomic_init(&q.cells[i].seq, i);
        q.cells[i].data = NULL;
    }
    atomic_init(&q.tail, 0);
    atomic_init(&q.head, 0);
    return 0;
}

static int try_enqueue(void *data)
{
    size_t pos = atomic_load_explicit(&q.tail, memory_order_relaxed);
    for (;;) {
        struct cell *c = &q.cells[pos & q.mask];
        size_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
        intptr_t diff = (intptr_t)seq - (intptr_t)pos;
        if (diff == 0) {
            if (atomic_compare_exchange_weak_explicit(&q.tail, &pos, pos + 1,
                                                      memory_order_relaxed, memory_order_relaxed)) {
                c->data = data;
                atomic_store_explicit(&c->seq, pos + 1, memory_order_release);
                return 1;
            }
        } else if (diff < 0) {
            return 0;  /* full */
        } else {
            pos = atomic_load_explicit(&q.tail, memory_order_relaxed);
        }
    }
}

static int try_dequeue(void **data)
{
    size_t pos = atomic_load_explicit(&q.head, memory_order_relaxed);
    for (;;) {
        struct cell *c = &q.cells[pos & q.mask];
        size_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
        intptr_t diff = (intptr_t)seq - (intptr_t)(pos + 1);
        if (diff == 0) {
            if (atomic_compare_exchange_weak_explicit(&q.head, &pos, pos + 1,
                                                      memory_order_relaxed, memory_order_relaxed)) {
                *data = c->data;
                atomic_store_explicit(&c->seq, pos + q.mask + 1, memory_order_release);
                return 1;
            }
        } else if (diff < 0) {
            return 0;  /* empty */
        } else {
            pos = atomic_load_explicit(&q.head, memory_order_relaxed);
        }
    }
}

/* Spin briefly, then yield: on a loaded 2-core machine a waiting thread must let the
 * thread it waits for run. */
static inline void backoff(unsigned *spins)
{
    if (++*spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    } else {
        sched_yield();
    }
}

static void enqueue(void *data)
{
    unsigned spins = 0;
    while (!try_enqueue(data))
        backoff(&spins);
}

static void *dequeue(void)
{
    void *data;
    unsigned spins = 0;
    while (!try_dequeue(&data))
        backoff(&spins);
    return data;
}

/* 60% 16..128, 25% 129..512, 10% 513..2048, 5% 2049..4096 bytes. */
static inline size_t draw_size(uint64_t *rng)
{
    uint64_t r = next_rand(rng);
    uint32_t pick = below((uint32_t)(r >> 32), 100);
    uint32_t lo = (uint32_t)r;
    if (pick < 60) return MIN_SIZE + below(lo, 128 - MIN_SIZE + 1);
    if (pick < 85) return 129 + below(lo, 512 - 129 + 1);
    if (pick < 95) return 513 + below(lo, 2048 - 513 + 1);
    return 2049 + below(lo, 4096 - 2049 + 1);
}

static inline uint64_t stamp_of(uint64_t header)
{
    header ^= header >> 29;
    header *= 0xbf58476d1ce4e5b9ull;
    return header ^ (header >> 32);
}

static pthread_barrier_t start_barrier;  /* producers + consumers + main */

struct thread {
    pthread_t tid;
    unsigned id;
    uint64_t rng;
    unsigned long long blocks;  /* producer: blocks to make; consumer: blocks freed */
    unsigned long long bytes;
    unsigned checksum;
};

static void *producer_main(void *arg)
{
    struct thread *t = arg;
    /* Counters live in locals: the thread structs share cache lines. */
    uint64_t rng = t->rng;
    unsigned long long bytes = 0;
    pthread_barrier_wait(&start_barrier);
    for (unsigned long long i = 0; i < t->blocks; i++) {
        size_t size = draw_size(&rng);
        unsigned char *p = malloc(size);
        if (!p) {
            fprintf(stderr, "prodcons: producer %u: malloc(%zu) failed\n", t->id, size);
            exit(1);
        }
        /* Word 0: size, producer and sequence; word 1: a hash of word 0; the last byte
         * (past the header): the hash's low byte. The consumer checks all three. */
        uint64_t h[2];
        h[0] = (uint64_t)size | ((uint64_t)t->id << 16) | ((uint64_t)i << 26);
        h[1] = stamp_of(h[0]);
        memcpy(p, h, sizeof h);
        if (size > sizeof h)
            p[size - 1] = (unsigned char)h[1];
        bytes += size;
        enqueue(p);
    }
    t->bytes = bytes;
    return NULL;
}

static void *consumer_main(void *arg)
{
    struct thread *t = arg;
    unsigned checksum = 0;
    unsigned long long blocks = 0, bytes = 0;
    pthread_barrier_wait(&start_barrier);
    for (;;) {
        unsigned char *p = dequeue();
        if (!p)
            break;  /* end marker: all real blocks were enqueued before it */
        uint64_t h[2];
        memcpy(h, p, sizeof h);
        size_t size = (size_t)(h[0] & 0xffff);
        if (h[1] != stamp_of(h[0]) || size < MIN_SIZE || size > 4096 ||
            (size > sizeof h && p[size - 1] != (unsigned char)h[1])) {
            fprintf(stderr, "prodcons: consumer %u: block %p corrupted (header %#llx %#llx)\n",
                    t->id, (void *)p, (unsigned long long)h[0], (unsigned long long)h[1]);
            exit(1);
        }
        checksum += p[size - 1];
        blocks++;
        bytes += size;
        free(p);
    }
    t->blocks = blocks;
    t->bytes = bytes;
    t->checksum = checksum;
    return NULL;
}

int main(int argc, char **argv)
{
    unsigned long long blocks = 2000000ull;
    unsigned long long producers = 1;
    unsigned long long consumers = 1;
    unsigned long long capacity = 1024;
    uint64_t seed = 0x9c0dc0115eedull;

    if (argc > 6) {
        fprintf(stderr, "usage: %s [blocks] [producers] [consumers] [queue_capacity] [seed]\n",
                argv[0]);
        return 2;
    }
    if (argc > 1) blocks = parse_arg(argv[1], "blocks", 1);
    if (argc > 2) producers = parse_arg(argv[2], "producers", 1);
    if (argc > 3) consumers = parse_arg(argv[3], "consumers", 1);
    if (argc > 4) capacity = parse_arg(argv[4], "queue capacity", 2);
    if (argc > 5) seed = parse_arg(argv[5], "seed", 0);
    if (producers > MAX_THREADS || consumers > MAX_THREADS) {
        fprintf(stderr, "prodcons: at most %u producers and %u consumers\n", MAX_THREADS, MAX_THREADS);
        return 2;
    }
    if ((capacity & (capacity - 1)) || capacity > (1ull << 30)) {
        fprintf(stderr, "prodcons: queue capacity must be a power of two <= 2^30\n");
        return 2;
    }
    if (blocks / producers >= (1ull << 38)) {
        fprintf(stderr, "prodcons: too many blocks per producer\n");
        return 2;
    }

    unsigned np = (unsigned)producers, nc = (unsigned)consumers;
    struct thread *th = calloc(np + nc, sizeof *th);
    if (!th || queue_init((size_t)capacity)) {
        perror("prodcons: alloc");
        return 1;
    }
    if (pthread_barrier_init(&start_barrier, NULL, np + nc + 1)) {
        fprintf(stderr, "prodcons: pthread_barrier_init failed\n");
        return 1;
    }

    uint64_t seeder = seed;
    for (unsigned i = 0; i < np + nc; i++) {
        struct thread *t = &th[i];
        t->id = i < np ? i : i - np;
        t->rng = next_rand(&seeder);
        if (i < np)
            t->blocks = blocks / np + (i < blocks % np ? 1 : 0);
        int rc = pthread_create(&t->tid, NULL, i < np ? producer_main : consumer_main, t);
        if (rc) {
            fprintf(stderr, "prodcons: pthread_create: %s\n", strerror(rc));
            return 1;
        }
    }

    struct timespec t0, t1;
    pthread_barrier_wait(&start_barrier);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned i = 0; i < np; i++)
        pthread_join(th[i].tid, NULL);
    /* One end marker per consumer, queued behind every real block. */
    for (unsigned i = 0; i < nc; i++)
        enqueue(NULL);
    for (unsigned i = np; i < np + nc; i++)
        pthread_join(th[i].tid, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);

    unsigned long long made = 0, freed = 0, bytes_made = 0, bytes_freed = 0;
    unsigned checksum = 0;
    for (unsigned i = 0; i < np + nc; i++) {
        if (i < np) { made += th[i].blocks; bytes_made += th[i].bytes; }
        else { freed += th[i].blocks; bytes_freed += th[i].bytes; }
        checksum += th[i].checksum;
    }
    sink = (unsigned char)checksum;
    if (made != blocks || freed != blocks || bytes_made != bytes_freed) {
        fprintf(stderr, "prodcons: lost blocks: made %llu (%llu B), freed %llu (%llu B)\n",
                made, bytes_made, freed, bytes_freed);
        return 1;
    }
    free(q.cells);
    free(th);
    pthread_barrier_destroy(&start_barrier);

    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);

    double seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    /* ru_maxrss is in kilobytes on Linux. */
    printf("bench=prodcons ops_per_sec=%.0f seconds=%.6f producers=%u consumers=%u blocks=%llu "
           "queue=%llu avg_size=%.0f peak_rss_kb=%ld\n",
           seconds > 0 ? (double)blocks / seconds : 0.0, seconds, np, nc, blocks, capacity,
           (double)bytes_made / (double)blocks, ru.ru_maxrss);
    return 0;
}
