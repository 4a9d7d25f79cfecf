/* burst.c - bursts of one small size: allocate N blocks of one size and write every byte,
 * free the first half in allocation order and the second half in reverse; repeat.  Bursts
 * wider than a thread cache go through its refill and spill on every round.
 * Prints one machine-readable line; ops_per_sec is malloc+free pairs per second. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_NAME "burst"
#include "bench_util.h"

int main(int argc, char **argv)
{
    static const char *const names[] = { "width", "size", "pairs" };
    static const unsigned long long mins[] = { 2, 1, 1 };
    unsigned long long arg[] = { 400, 32, 20000000 };
    bench_args(argc, argv, "burst [width [size [pairs]]]", 3, names, mins, arg);
    unsigned long long width = arg[0], size = arg[1], pairs = arg[2];

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

    char fields[64];
    snprintf(fields, sizeof fields, "width=%llu size=%llu", width, size);
    bench_report((double)(rounds * width), t0, t1, fields);
    return 0;
}
