/* hugebuf.c - huge buffers replaced at random: a thread keeps `count` buffers of 5-25 MiB and
 * replaces a random one `steps` times, each new buffer from calloc, then written at every
 * page, as a program double-buffering images or column chunks does.
 * Prints one machine-readable line; ops_per_sec is replacements per second. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_NAME "hugebuf"
#include "bench_util.h"

#define MIB (1ull << 20)

int main(int argc, char **argv)
{
    static const char *const names[] = { "count", "steps" };
    static const unsigned long long mins[] = { 1, 1 };
    unsigned long long arg[] = { 20, 400 };
    bench_args(argc, argv, "hugebuf [count [steps]]", 2, names, mins, arg);
    unsigned long long count = arg[0], steps = arg[1];

    unsigned char **buf = calloc(count, sizeof *buf);
    size_t *len = calloc(count, sizeof *len);
    if (buf == NULL || len == NULL)
        return 1;
    uint64_t rng = 42;
    unsigned checksum = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned long long s = 0; s < count + steps; s++) {
        uint64_t r = next_rand(&rng);
        /* the first `count` steps fill the slots, the rest replace one at random */
        unsigned i = s < count ? (unsigned)s : below((uint32_t)r, (uint32_t)count);
        size_t n = 5 * MIB + below((uint32_t)(r >> 32), 20 * MIB);
        if (buf[i]) {
            checksum += buf[i][len[i] / 2];
            free(buf[i]);
        }
        buf[i] = calloc(1, n);
        if (buf[i] == NULL) {
            fprintf(stderr, "hugebuf: calloc(%zu) failed\n", n);
            return 1;
        }
        for (size_t off = 0; off < n; off += 4096)
            checksum += buf[i][off]++;
        len[i] = n;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    for (unsigned long long i = 0; i < count; i++)
        free(buf[i]);
    free(buf);
    free(len);
    sink = (unsigned char)checksum;

    char fields[64];
    snprintf(fields, sizeof fields, "count=%llu", count);
    bench_report((double)steps, t0, t1, fields);
    return 0;
}
