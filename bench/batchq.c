/* batchq.c - producer/consumer by the batch: producers allocate batches of small blocks
 * (writing each one's first bytes) and queue them under one mutex and two condition
 * variables; consumers take a batch and free every block, so every free crosses threads
 * and arrives in bursts.  More threads than cores is the point: a thread is preempted
 * while it holds memory another one frees.  Runs for a time; ops_per_sec is frees/s. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_NAME "batchq"
#include "bench_util.h"

#define MAX_THREADS 256u
#define STAMP 0x5au

static size_t batch_len, block_size, queue_cap;
static struct timespec deadline;

/* The queue: a ring of batches, each an array of block pointers taken from malloc too, as a
 * program's own would be. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER, not_empty = PTHREAD_COND_INITIALIZER;
static void ***ring;
static size_t head, count;
static unsigned producers_left;
static atomic_bool stop;

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (p == NULL) {
        fprintf(stderr, "batchq: malloc(%zu) failed\n", n);
        exit(1);
    }
    return p;
}

static int past_deadline(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec > deadline.tv_sec || (now.tv_sec == deadline.tv_sec && now.tv_nsec >= deadline.tv_nsec);
}

static void *producer(void *arg)
{
    (void)arg;
    size_t stamp = block_size < 64 ? block_size : 64;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        void **batch = xmalloc(batch_len * sizeof *batch);
        for (size_t i = 0; i < batch_len; i++) {
            batch[i] = xmalloc(block_size);
            memset(batch[i], STAMP, stamp);
        }
        pthread_mutex_lock(&lock);
        while (count == queue_cap && !atomic_load(&stop))
            pthread_cond_wait(&not_full, &lock);
        if (count == queue_cap) {           /* stopped while full: the batch is not counted */
            pthread_mutex_unlock(&lock);
            for (size_t i = 0; i < batch_len; i++)
                free(batch[i]);
            free(batch);
            break;
        }
        ring[(head + count++) % queue_cap] = batch;
        pthread_cond_signal(&not_empty);
        pthread_mutex_unlock(&lock);
        if (past_deadline())
            atomic_store(&stop, 1);
    }
    pthread_mutex_lock(&lock);
    producers_left--;
    pthread_cond_broadcast(&not_empty);
    pthread_cond_broadcast(&not_full);
    pthread_mutex_unlock(&lock);
    return NULL;
}

/* Frees until the producers are gone and the queue is empty; *frees counts the blocks. */
static void *consumer(void *arg)
{
    unsigned long long *frees = arg, n = 0;
    for (;;) {
        pthread_mutex_lock(&lock);
        while (count == 0 && producers_left > 0)
            pthread_cond_wait(&not_empty, &lock);
        if (count == 0) {
            pthread_mutex_unlock(&lock);
            break;
        }
        void **batch = ring[head];
        head = (head + 1) % queue_cap;
        count--;
        pthread_cond_signal(&not_full);
        pthread_mutex_unlock(&lock);
        for (size_t i = 0; i < batch_len; i++) {
            unsigned char *b = batch[i];
            if (b[0] != STAMP) {
                fprintf(stderr, "batchq: block %p lost its stamp\n", (void *)b);
                exit(1);
            }
            free(b);
        }
        free(batch);
        n += batch_len;
    }
    *frees = n;
    return NULL;
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "seconds", "producers", "consumers", "batch", "size", "queue" };
    static const unsigned long long mins[] = { 1, 1, 1, 1, 1, 1 };
    unsigned long long arg[] = { 5, 2, 2, 4096, 64, 100 };
    bench_args(argc, argv, "batchq [seconds [producers [consumers [batch [size [queue]]]]]]", 6, names, mins, arg);
    if (arg[1] + arg[2] > MAX_THREADS || arg[3] > (1u << 24) || arg[4] > (1u << 24) || arg[5] > (1u << 20)) {
        fprintf(stderr, "batchq: at most %u threads, batches and blocks of 16 M, a queue of 1 M\n", MAX_THREADS);
        return 2;
    }
    unsigned np = (unsigned)arg[1], nc = (unsigned)arg[2];
    batch_len = arg[3];
    block_size = arg[4];
    queue_cap = arg[5];
    producers_left = np;
    ring = xmalloc(queue_cap * sizeof *ring);

    pthread_t tid[MAX_THREADS];
    unsigned long long frees[MAX_THREADS] = { 0 };
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    deadline = t0;
    deadline.tv_sec += (time_t)arg[0];
    for (unsigned t = 0; t < np + nc; t++) {
        if (pthread_create(&tid[t], NULL, t < np ? producer : consumer, t < np ? NULL : &frees[t])) {
            fprintf(stderr, "batchq: cannot start thread %u\n", t);
            return 1;
        }
    }
    unsigned long long total = 0;
    for (unsigned t = 0; t < np + nc; t++) {
        pthread_join(tid[t], NULL);
        total += frees[t];
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    free(ring);

    char fields[128];
    snprintf(fields, sizeof fields, "producers=%u consumers=%u batch=%zu size=%zu frees=%llu", np, nc,
             batch_len, block_size, total);
    bench_report((double)total, t0, t1, fields);
    return 0;
}
