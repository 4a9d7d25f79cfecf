/* ssot.c - the SSOT random-mixed benchmark: a ring of slots, each step frees a random slot
 * and refills it with a random 16..1024-byte block; prints one machine-readable result line. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#define BENCH_NAME "ssot"
#include "bench_util.h"

#define MIN_SIZE 16u
#define MAX_SIZE 1024u

int main(int argc, char **argv)
{
    unsigned long long steps = 20000000ull;
    unsigned long long ring_size = 400;
    uint64_t seed = 0x5eed5eedull;

    if (argc > 4) {
        fprintf(stderr, "usage: %s [steps] [ring_size] [seed]\n", argv[0]);
        return 2;
    }
    if (argc > 1) steps = parse_arg(argv[1], "steps", 1);
    if (argc > 2) ring_size = parse_arg(argv[2], "ring size", 1);
    if (argc > 3) seed = parse_arg(argv[3], "seed", 0);
    if (ring_size > UINT32_MAX) {
        fprintf(stderr, "ssot: ring size too large\n");
        return 2;
    }

    /* Allocated before the clock starts so the ring itself is not measured. */
    unsigned char **ring = calloc(ring_size, sizeof *ring);
    if (!ring) {
        perror("ssot: calloc ring");
        return 1;
    }

    uint64_t rng = seed;
    unsigned checksum = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);

    for (unsigned long long i = 0; i < steps; i++) {
        uint64_t r = next_rand(&rng);
        /* One draw feeds both choices: high half picks the slot, low half the size. */
        uint32_t slot = below((uint32_t)(r >> 32), (uint32_t)ring_size);
        size_t size = MIN_SIZE + below((uint32_t)r, MAX_SIZE - MIN_SIZE + 1);

        unsigned char *old = ring[slot];
        if (old) {
            /* Consuming the byte makes each block observable, so no malloc/free
             * pair can be elided even if builtin malloc semantics are enabled. */
            checksum += old[0];
            free(old);
        }
        unsigned char *p = malloc(size);
        if (!p) {
            fprintf(stderr, "ssot: malloc(%zu) failed at step %llu\n", size, i);
            return 1;
        }
        p[0] = (unsigned char)i;  /* touch the block so it is really used */
        ring[slot] = p;
    }

    clock_gettime(CLOCK_MONOTONIC, &t1);

    for (unsigned long long s = 0; s < ring_size; s++) {
        if (ring[s]) {
            checksum += ring[s][0];
            free(ring[s]);
        }
    }
    free(ring);
    sink = (unsigned char)checksum;

    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);

    double seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    /* ru_maxrss is in kilobytes on Linux. */
    printf("bench=ssot ops_per_sec=%.0f seconds=%.6f steps=%llu peak_rss_kb=%ld\n",
           seconds > 0 ? (double)steps / seconds : 0.0, seconds, steps, ru.ru_maxrss);
    return 0;
}
