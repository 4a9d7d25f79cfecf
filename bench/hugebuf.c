/* hugebuf.c - huge buffers replaced at random: a thread keeps `count` buffers of 5-25 MiB and
 * replaces a random one `steps` times, then writes every page of the new buffer, as a program
 * double-buffering images or column chunks does.  A new buffer comes from calloc (--fill
 * calloc, the default) or from malloc with every byte then zeroed by the program, as C++'s
 * `new char[n]()` does (--fill malloc+memset).
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
    int memset_fill = 0;
    if (argc > 2 && !strcmp(argv[1], "--fill")) {
        if (strcmp(argv[2], "calloc") && strcmp(argv[2], "malloc+memset")) {
            fprintf(stderr, "hugebuf: --fill takes calloc or malloc+memset, not '%s'\n", argv[2]);
            return 2;
        }
        memset_fill = !strcmp(argv[2], "malloc+memset");
        argv[2] = argv[0];
        argc -= 2;
        argv += 2;
    }
    bench_args(argc, argv, "hugebuf [--fill calloc|malloc+memset] [count [steps]]", 2, names, mins, arg);
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
        buf[i] = memset_fill ? malloc(n) : calloc(1, n);
        if (buf[i] == NULL) {
            fprintf(stderr, "hugebuf: allocating %zu bytes failed\n", n);
            return 1;
        }
        if (memset_fill)
            memset(buf[i], 0, n);
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
    snprintf(fields, sizeof fields, "count=%llu fill=%s", count, memset_fill ? "malloc+memset" : "calloc");
    bench_report((double)steps, t0, t1, fields);
    return 0;
}
