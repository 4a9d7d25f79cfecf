/* burst.c - bursts of one small size: allocate N blocks of one size and write every byte,
 * free the first half in allocation order and the second half in reverse; repeat.  Bursts
 * wider than a thread cache go through its refill and spill on every round.
 * Prints one machine-readable line; ops_per_sec is malloc+free pairs per second. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define BENCH_NAME "burst"
#include "bench_util.h"

int main(int argc, char **argv)
{
    unsigned long long width = 400, size = 32, pairs = 20000000;
    if (argc > 4) {
        fprintf(stderr, "usage: burst [width [size [pairs]]]\n");
        return 2;
    }
    if (argc > 1) width = parse_arg(argv[1], "width", 2);
    if (argc > 2) size = parse_arg(argv[2], "size", 1);
    if (argc > 3) pairs = parse_arg(argv[3], "pairs", 1);

    unsigned char **blk = malloc(width * sizeof *blk);
    if (blk == NULL)
        return 1;
    unsigned long long rounds = pairs / width + 1;
    unsigned checksum = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned long long r = 0; r < rounds; r++) {
        for (unsigned long long i = 0; i < width; i++) {
            blk[i] = malloc(size);
            if (blk[i] == NULL) {
                fprintf(stderr, "burst: malloc(%llu) failed\n", size);
                return 1;
            }
            memset(blk[i], (int)(i + r), size);
        }
        unsigned long long half = width / 2;
        for (unsigned long long i = 0; i < half; i++) {
            checksum += blk[i][size - 1];
            free(blk[i]);
        }
        for (unsigned long long i = width; i-- > half;) {
            checksum += blk[i][0];
            free(blk[i]);
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    free(blk);
    sink = (unsigned char)checksum;

    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    double done = (double)(rounds * width);
    printf("bench=burst ops_per_sec=%.0f seconds=%.6f width=%llu size=%llu peak_rss_kb=%ld\n",
           seconds > 0 ? done / seconds : 0.0, seconds, width, size, ru.ru_maxrss);
    return 0;
}
