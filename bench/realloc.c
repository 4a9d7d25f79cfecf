/* realloc.c - realloc growth: each round starts B buffers at 16 bytes and grows them, one
 * random buffer at a time (so growths interleave), by realloc: 3 in 4 like a string builder
 * (append 1..512 bytes), 1 in 4 like a vector (x1.5..x2), up to a target of 1/4..1 x
 * max_size; every big_every-th buffer grows like a vector up to 4 MiB. New bytes are
 * written, the first 16 bytes and the last byte before each growth are checked, and a
 * buffer is freed when it reaches its target. Prints one machine-readable line;
 * ops_per_sec is realloc calls per second. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define BENCH_NAME "realloc"
#include "bench_util.h"

#define START_SIZE 16u
#define BIG_SIZE (4u << 20)
#define APPEND_MAX 512u

enum kind { APPEND, VECTOR };

struct buf {
    unsigned char *p;
    size_t size;
    size_t target;
    enum kind kind;
    unsigned char last;   /* value written to the bytes added by the latest growth */
    unsigned char head[START_SIZE];
};

static void fail_check(const struct buf *b, uint32_t id, unsigned long long round, const char *what)
{
    fprintf(stderr, "realloc: round %llu buffer %u (%zu bytes, %p): %s did not survive realloc\n",
            round, id, b->size, (void *)b->p, what);
    exit(1);
}

int main(int argc, char **argv)
{
    unsigned long long rounds = 4;
    unsigned long long nbufs = 1000;
    unsigned long long max_size = 64u << 10;
    unsigned long long big_every = 100;
    uint64_t seed = 0x9e0a110cull;

    if (argc > 6) {
        fprintf(stderr, "usage: %s [rounds] [buffers] [max_size] [big_every (0: none)] [seed]\n",
                argv[0]);
        return 2;
    }
    if (argc > 1) rounds = parse_arg(argv[1], "rounds", 1);
    if (argc > 2) nbufs = parse_arg(argv[2], "buffers", 1);
    if (argc > 3) max_size = parse_arg(argv[3], "max size", 4 * START_SIZE);
    if (argc > 4) big_every = parse_arg(argv[4], "big_every", 0);
    if (argc > 5) seed = parse_arg(argv[5], "seed", 0);
    if (nbufs > UINT32_MAX || max_size > (1ull << 32)) {
        fprintf(stderr, "realloc: at most %u buffers and 4 GiB max size\n", UINT32_MAX);
        return 2;
    }

    /* Bookkeeping is allocated before the clock starts so it is not measured. */
    struct buf *bufs = calloc(nbufs, sizeof *bufs);
    uint32_t *active = calloc(nbufs, sizeof *active);
    if (!bufs || !active) {
        perror("realloc: calloc");
        return 1;
    }

    uint64_t rng = seed;
    unsigned long long reallocs = 0, copies = 0;
    unsigned long long live = 0, peak_live = 0;  /* requested bytes, for memory efficiency */
    unsigned checksum = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);

    for (unsigned long long round = 0; round < rounds; round++) {
        for (uint32_t i = 0; i < nbufs; i++) {
            struct buf *b = &bufs[i];
            uint64_t r = next_rand(&rng);
            int big = big_every && i % big_every == big_every - 1;
            b->kind = big || (r >> 62) == 0 ? VECTOR : APPEND;
            b->target = big ? BIG_SIZE
                            : max_size / 4 + below((uint32_t)r, (uint32_t)(max_size - max_size / 4 + 1));
            b->size = START_SIZE;
            b->p = malloc(START_SIZE);
            if (!b->p) {
                fprintf(stderr, "realloc: malloc(%u) failed\n", START_SIZE);
                return 1;
            }
            uint64_t h[2] = { next_rand(&rng), ((uint64_t)round << 32) | i };
            memcpy(b->head, h, sizeof h);
            memcpy(b->p, b->head, START_SIZE);
            b->last = b->head[START_SIZE - 1];
            active[i] = i;
            live += START_SIZE;
        }

        uint32_t nactive = (uint32_t)nbufs;
        while (nactive) {
            uint64_t r = next_rand(&rng);
            uint32_t k = below((uint32_t)(r >> 32), nactive);
            uint32_t id = active[k];
            struct buf *b = &bufs[id];

            size_t old = b->size;
            size_t grow = b->kind == APPEND ? 1 + below((uint32_t)r, APPEND_MAX)
                                            : old / 2 + below((uint32_t)r, (uint32_t)(old / 2 + 1));
            size_t size = old + grow;
            if (size > b->target)
                size = b->target;

            /* Kept as an integer: the old pointer's value is indeterminate once moved. */
            uintptr_t before = (uintptr_t)b->p;
            unsigned char *p = realloc(b->p, size);
            reallocs++;
            if (!p) {
                fprintf(stderr, "realloc: realloc(%#lx, %zu) failed\n", (unsigned long)before, size);
                return 1;
            }
            copies += (uintptr_t)p != before;
            b->p = p;
            if (memcmp(p, b->head, START_SIZE))
                fail_check(b, id, round, "first 16 bytes");
            if (p[old - 1] != b->last)
                fail_check(b, id, round, "last byte");
            /* Fill the new part, as a string builder or vector would. */
            unsigned char v = (unsigned char)(r >> 24);
            memset(p + old, v, size - old);
            b->last = v;
            b->size = size;
            live += size - old;
            if (live > peak_live)
                peak_live = live;

            if (size == b->target) {
                checksum += p[0] + p[size - 1];
                free(p);
                b->p = NULL;
                active[k] = active[--nactive];
                live -= size;
            }
        }
    }

    clock_gettime(CLOCK_MONOTONIC, &t1);
    free(bufs);
    free(active);
    sink = (unsigned char)checksum;

    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);

    double seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    /* ru_maxrss is in kilobytes on Linux. */
    printf("bench=realloc ops_per_sec=%.0f seconds=%.6f rounds=%llu buffers=%llu max_size=%llu "
           "big_every=%llu reallocs=%llu moved=%llu peak_live_kb=%llu peak_rss_kb=%ld\n",
           seconds > 0 ? (double)reallocs / seconds : 0.0, seconds, rounds, nbufs, max_size,
           big_every, reallocs, copies, (peak_live + 1023) / 1024, ru.ru_maxrss);
    return 0;
}
